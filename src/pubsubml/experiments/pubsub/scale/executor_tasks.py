"""The phases of a many-site simulation spread over an executor (pubsub-ml.txt Algorithm 3).

Algorithm 3 runs the publishers in parallel, then the subscribers.  Here each phase is a list of
independent tasks for an :class:`~pubsubml.experiments.executors.Executor` (a local process pool
or Ray):

* :func:`train_and_publish`: the publishers in batches of :data:`PUBLISHER_BATCH`, each batch one
  :func:`~pubsubml.learners.mlp.fit_many` call on the stacked DP-SGD engine with ``first_site``
  set (so the models are those of one call over every publisher whatever the number of workers),
  then each publisher charges its ledger and publishes to a :class:`~pubsubml.hub.LocalHub` in
  the worker, and :func:`ship` packs what they published as bytes (the JSON cards, the weights and
  the raw public keys: what a subscriber would download).  Fitted models never travel between
  processes: only bytes do;
* :func:`customize_subscribers`: the subscribers in batches; each task rebuilds a hub from the
  bytes, pulls every model once (Load: signature, digest, ε recomputed, runtime built) and
  customizes each of its subscribers with those models (a worker loads a shipment once and
  keeps it for its later batches).  A subscriber's result does not depend on its batch, so the
  batches follow the number of workers.

Each task also reports the peak resident memory of its process, so a run can say what it needed.
"""

from __future__ import annotations

import hashlib
import itertools
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from pubsubml.artifacts.card import ModelCard
from pubsubml.experiments.executors import Executor
from pubsubml.experiments.pubsub.scale.many_publishers import (
    customize_records,
    publish_models,
    publisher_estimator,
    pull_models,
)
from pubsubml.experiments.pubsub.scale.sizes import Frame, ScaleSizes
from pubsubml.experiments.runner import Record
from pubsubml.hub import LocalHub
from pubsubml.learners.mlp import fit_many

__all__ = [
    "PUBLISHER_BATCH",
    "Shipment",
    "customize_subscribers",
    "peak_rss_gib",
    "ship",
    "train_and_publish",
]

PUBLISHER_BATCH = 250
"""Publishers per training task: large enough for the stacked engine's batched products, small
enough that 1,000 publishers make 4 tasks to share between workers."""


def peak_rss_gib() -> float:
    """This process's peak resident memory so far, in GiB (``getrusage``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**30 if sys.platform == "darwin" else peak / 2**20


@dataclass(frozen=True)
class Shipment:
    """What the publishers released, as the bytes a subscriber downloads.

    Attributes
    ----------
    cards : list of str
        The signed model cards (JSON).
    weights : list of bytes
        Each card's artifact.
    keys : list of bytes
        The publishers' raw Ed25519 public keys, the subscribers' trust list.
    """

    cards: list[str]
    weights: list[bytes]
    keys: list[bytes]

    @classmethod
    def join(cls, parts: Sequence[Shipment]) -> Shipment:
        """The publications of ``parts``, in order."""
        return cls(
            [c for p in parts for c in p.cards],
            [w for p in parts for w in p.weights],
            [k for p in parts for k in p.keys],
        )

    def digest(self) -> str:
        """SHA-256 over every card, weights file and key, in order: the shipment's identity."""
        h = hashlib.sha256()
        parts: list[bytes] = [c.encode() for c in self.cards] + [*self.weights, *self.keys]
        for data in parts:
            h.update(len(data).to_bytes(8, "big"))
            h.update(data)
        return h.hexdigest()

    def hub(self) -> tuple[LocalHub, list[Ed25519PublicKey]]:
        """A hub holding every publication (digests checked again) and the trusted keys."""
        hub = LocalHub()
        for card, weights in zip(self.cards, self.weights, strict=True):
            hub.publish(ModelCard.from_json(card), weights)
        return hub, [Ed25519PublicKey.from_public_bytes(k) for k in self.keys]


def ship(hub: LocalHub, keys: Sequence[Ed25519PublicKey]) -> Shipment:
    """Pack every publication of ``hub`` (in publication order) and the publishers' keys."""
    cards, weights = [], []
    for model_id in hub.model_ids():
        card, data = hub.fetch(model_id)
        cards.append(card.to_json())
        weights.append(data)
    raw = [k.public_bytes(Encoding.Raw, PublicFormat.Raw) for k in keys]
    return Shipment(cards, weights, raw)


def _publish_batch(
    est: Any, data: Sequence[Frame], names: Sequence[str], first: int, sizes: ScaleSizes
) -> tuple[Shipment, list[float], float, float, float]:
    t0 = time.perf_counter()
    models = fit_many(est, [X for X, _ in data], [y for _, y in data], first_site=first)
    t_train = time.perf_counter() - t0
    hub, keys, t_publish = publish_models(models, names, sizes)
    epsilons = [float(m.epsilon_) for m in models]
    return ship(hub, keys), epsilons, t_train, t_publish, peak_rss_gib()


def train_and_publish(
    pool: Executor, data: Sequence[Frame], names: Sequence[str], sizes: ScaleSizes, *, seed: int
) -> tuple[Shipment, dict[str, Any]]:
    """Every publisher trains its (ε, δ)-DP network and publishes it, in batches on ``pool``.

    A batch of :data:`PUBLISHER_BATCH` publishers is one ``fit_many(..., first_site=a)`` call
    (the models one call over every publisher gives), then each publisher charges its ledger,
    exports, signs and publishes (:func:`~pubsubml.experiments.pubsub.scale.many_publishers.publish_models`)
    in the same worker.  Only bytes come back (:class:`Shipment`), never a fitted model.

    Returns
    -------
    shipment : Shipment
        Every publication, in the order of ``data``.
    phases : dict
        ``"seconds"`` (wall), ``"train_s"`` and ``"publish_s"`` (summed over the batches),
        ``"epsilons"`` (each publisher's accounted ε) and ``"worker_peak_gib"``.
    """
    est = publisher_estimator(sizes, seed)
    tasks = [
        (est, list(data[a : a + PUBLISHER_BATCH]), list(names[a : a + PUBLISHER_BATCH]), a, sizes)
        for a in range(0, len(data), PUBLISHER_BATCH)
    ]
    parts: list[Shipment | None] = [None] * len(tasks)
    epsilons: list[list[float]] = [[] for _ in tasks]
    phases: dict[str, Any] = {"train_s": 0.0, "publish_s": 0.0, "worker_peak_gib": 0.0}
    t0 = time.perf_counter()
    for i, (part, eps, t_train, t_publish, rss) in pool.submit(_publish_batch, tasks):
        parts[i], epsilons[i] = part, eps
        phases["train_s"] += t_train
        phases["publish_s"] += t_publish
        phases["worker_peak_gib"] = max(phases["worker_peak_gib"], rss)
    phases["seconds"] = time.perf_counter() - t0
    phases["epsilons"] = [e for batch in epsilons for e in batch]
    return Shipment.join([p for p in parts if p is not None]), phases


_LOADED: dict[str, list[Any]] = {}
"""The models this process last loaded, by :meth:`Shipment.digest` (one shipment at a time)."""


def _loaded(shipment: Shipment) -> tuple[list[Any], float]:
    """The shipment's models as a subscriber loads them, and the seconds of the load.

    A worker process loads a shipment once (Load: signature, digest, ε recomputed, runtime
    built) and serves its later batches from memory (0 s): the models are the same objects
    whichever batch asks, so results do not change.  Only the last shipment is kept.
    """
    key = shipment.digest()
    if key in _LOADED:
        return _LOADED[key], 0.0
    hub, keys = shipment.hub()
    received, t_load = pull_models(hub, keys, "subscriber")
    _LOADED.clear()
    _LOADED[key] = received
    return received, t_load


def _subscriber_batch(
    shipment: Shipment,
    subscribers: Sequence[tuple[str, Frame, Frame, int]],
    top_ms: Sequence[int | None],
    protocol: str = "default",
    sizes: ScaleSizes | None = None,
) -> tuple[list[Record], float, float]:
    received, t_load = _loaded(shipment)
    out: list[Record] = []
    for name, fit, test, seed in subscribers:
        t0 = time.perf_counter()
        records = customize_records(
            received, fit, test, top_ms, seed=seed, protocol=protocol, sizes=sizes
        )
        for r in records:
            out.append({"subscriber": name, **r})
        out[-1]["customize_s"] = time.perf_counter() - t0
    return out, t_load, peak_rss_gib()


def customize_subscribers(
    pool: Executor,
    shipment: Shipment,
    subscribers: Sequence[tuple[str, Frame, Frame, int]],
    top_ms: Sequence[int | None] = (None,),
    *,
    protocol: str = "default",
    sizes: ScaleSizes | None = None,
    tasks_per_worker: int = 4,
) -> tuple[list[Record], dict[str, float]]:
    """Every subscriber's customizations with every shipped model, in batches on ``pool``.

    Parameters
    ----------
    pool : Executor
    shipment : Shipment
    subscribers : sequence of (name, fit part, test part, seed)
    top_ms : sequence of int or None, default=(None,)
        The configurations (All by default), with
        :func:`~pubsubml.experiments.pubsub.scale.many_publishers.customize_records`.
    protocol : {"default", "paper"}, default="default"
        The CUSTOMIZE protocol (:func:`~pubsubml.experiments.pubsub.scale.many_publishers.customize_options`).
    sizes : ScaleSizes, optional
        The sizes of the run (the own network of ``protocol="paper"``); default: the full sizes.
    tasks_per_worker : int, default=4
        Batches per worker (smaller batches balance the workers' load; a worker loads the
        models for its first batch and keeps them for the next).

    Returns
    -------
    records : list of dict
        ``customize_records``' records with ``subscriber``, in the order of ``subscribers``; the
        last record of each subscriber carries ``customize_s``, its seconds.
    phases : dict
        ``"load_s"`` (summed over the loads, one per worker process), ``"seconds"`` (wall time) and
        ``"worker_peak_gib"``.
    """
    n_tasks = min(len(subscribers), max(1, pool.jobs * tasks_per_worker))
    bounds = [round(i * len(subscribers) / n_tasks) for i in range(n_tasks + 1)]
    tasks = [  # n_tasks batches whose sizes differ by one at most
        (shipment, list(subscribers[a:b]), tuple(top_ms), protocol, sizes)
        for a, b in itertools.pairwise(bounds)
    ]
    results: list[list[Record]] = [[] for _ in tasks]
    load = peak = 0.0
    t0 = time.perf_counter()
    for i, (records, t_load, rss) in pool.submit(_subscriber_batch, tasks):
        results[i] = records
        load += t_load
        peak = max(peak, rss)
    phases = {"load_s": load, "seconds": time.perf_counter() - t0, "worker_peak_gib": peak}
    return [r for rs in results for r in rs], phases
