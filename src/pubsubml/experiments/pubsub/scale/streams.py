"""PubSub-ML on Hyperplane streams with dynamic DP ensembles (pubsub-ml.txt §6, §8.3.3, Fig. 6).

Ten sites each produce ten chunks of 500 rows of their own Hyperplane stream (Table 3 drift per
site, one shared initial hyperplane).  Every site publishes through a
:class:`~pubsubml.methods.pubsub.streams.StreamPublisher` (an ensemble of its ``k`` most recent DP models,
one per disjoint chunk: ε stays that of one model, Theorems 5–6) and, in turn, subscribes with a
:class:`~pubsubml.methods.pubsub.streams.StreamSubscriber` to the nine others: it re-customizes on each
new chunk and is scored on the test part (20%) of its most recent chunk (§8.3.3).  All sites share
one :class:`~pubsubml.hub.LocalHub`; a subscriber's view of it leaves out its own models.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.artifacts.card import ModelCard
from pubsubml.data import hyperplane_schema
from pubsubml.errors import SeededNoiseWarning
from pubsubml.experiments.pubsub.scale.hyperplane import (
    concept_weights,
    draw_site_params,
    hyperplane_stream,
)
from pubsubml.experiments.runner import Record
from pubsubml.hub import FeedItem, Hub, LocalHub
from pubsubml.learners.mlp import DPMLPClassifier
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.outputs import published_runner
from pubsubml.methods.pubsub.streams import StreamPublisher, StreamSubscriber
from pubsubml.privacy.ledger import PrivacyLedger
from pubsubml.schema import Channel, FeatureSchema
from pubsubml.sites import Site

__all__ = [
    "STREAM_SIZES",
    "OtherPublishers",
    "StreamSizes",
    "site_streams",
    "streams_run",
    "trusting_sites",
]


@dataclass(frozen=True)
class StreamSizes:
    """Sizes of a run (§8.3.3: 10 sites × 10 chunks of 500; ensembles of 1 … 8)."""

    n_sites: int = 10
    n_chunks: int = 10
    chunk_size: int = 500
    ensemble_sizes: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)
    hidden: tuple[int, ...] = (100, 50)
    epochs: int = 30
    epsilon: float = 1.0
    delta: float = 1e-4


STREAM_SIZES: dict[str, StreamSizes] = {
    "full": StreamSizes(),
    "smoke": StreamSizes(
        n_sites=3, n_chunks=3, chunk_size=60, ensemble_sizes=(1, 2), hidden=(8,), epochs=2
    ),
}


class OtherPublishers:
    """A :class:`~pubsubml.hub.Hub` view whose feeds leave out one publisher's models.

    A site that publishes and subscribes on the same hub gets only the others' models.
    """

    def __init__(self, hub: Hub, exclude: str) -> None:
        self.hub = hub
        self.exclude = exclude

    def publish(self, card: ModelCard, weights: bytes) -> str:
        """Publish on the underlying hub."""
        return self.hub.publish(card, weights)

    def subscribe(
        self, site: str, channel: Channel, *, task: str, classes: Sequence[Any] | None = None
    ) -> str:
        """Subscribe on the underlying hub."""
        return self.hub.subscribe(site, channel, task=task, classes=classes)

    def poll(self, subscription_id: str, *, after: int = 0, timeout: float = 0.0) -> list[FeedItem]:
        """The underlying feed without the excluded publisher's items."""
        items = self.hub.poll(subscription_id, after=after, timeout=timeout)
        return [it for it in items if it.card.publisher != self.exclude]

    def fetch(self, model_id: str) -> tuple[ModelCard, bytes]:
        """Fetch from the underlying hub."""
        return self.hub.fetch(model_id)

    def report_contributions(self, subscriber: str, scores: Mapping[str, float]) -> None:
        """Report to the underlying hub."""
        self.hub.report_contributions(subscriber, scores)


def streams_run(seed: int, fold: int, *, size: str = "full", k: int = 5) -> list[Record]:
    """All sites' streams with ensemble size ``k``; one record per (subscriber, chunk).

    ``fold`` is unused (a stream is evaluated prequentially, not by folds).

    Returns
    -------
    list of dict
        ``subscriber``, ``chunk``, ``score`` (accuracy on the chunk's test part), ``prequential``
        (the previous customized model on the whole new chunk), ``n_models`` and ``epsilon`` (the
        subscriber site's spent ε as a publisher after that chunk).
    """
    del fold
    sizes = STREAM_SIZES[size]
    schema = hyperplane_schema()
    streams = site_streams(sizes, seed)
    hub = LocalHub()
    sites = trusting_sites(sizes, schema)
    publishers = [
        StreamPublisher(
            site,
            _publisher_network(sizes, schema, seed * 10_000 + 100 * i),
            hub,
            k=k,
            stream=site.name,
        )
        for i, site in enumerate(sites)
    ]
    template = Customizer(schema=schema, classes=[0, 1], runner=published_runner)
    subscribers = [
        StreamSubscriber(
            site,
            OtherPublishers(hub, site.name),
            template,
            channel=" | ".join(schema.names),
            k=k,
            random_state=seed * 10_000 + 100 * i,
        )
        for i, site in enumerate(sites)
    ]
    records: list[Record] = []
    with warnings.catch_warnings():  # a simulation: its publishers' noise is seeded
        warnings.simplefilter("ignore", SeededNoiseWarning)
        for t in range(sizes.n_chunks):
            for pub, stream in zip(publishers, streams, strict=True):
                pub.learn_chunk(*stream[t])
            for site, sub, stream in zip(sites, subscribers, streams, strict=True):
                rec = sub.learn_chunk(*stream[t])
                records.append(
                    {
                        "subscriber": site.name,
                        "chunk": t + 1,
                        "score": rec["test"],
                        "prequential": rec["prequential"],
                        "n_models": rec["n_models"],
                        "epsilon": site.ledger.spent_epsilon(),
                    }
                )
    return records


def site_streams(sizes: StreamSizes, seed: int) -> list[list[tuple[pd.DataFrame, np.ndarray]]]:
    """Every site's ``n_chunks`` chunks: its own Table 3 noise and drift, one shared initial
    hyperplane (§8.3.3)."""
    weights = concept_weights(seed)
    params = draw_site_params(sizes.n_sites, seed)
    children = np.random.SeedSequence([seed, 2]).spawn(sizes.n_sites)
    seeds = [int(c.generate_state(1)[0]) for c in children]
    return [
        list(hyperplane_stream(sizes.n_chunks, sizes.chunk_size, p, seed=s, weights=weights))
        for p, s in zip(params, seeds, strict=True)
    ]


def trusting_sites(sizes: StreamSizes, schema: FeatureSchema) -> list[Site]:
    """The sites ``site0`` … with their own ledgers (ε, δ of the run), each trusting the others."""
    sites = [
        Site(
            f"site{i}",
            schema,
            PrivacyLedger(site=f"site{i}", epsilon_budget=sizes.epsilon, delta=sizes.delta),
        )
        for i in range(sizes.n_sites)
    ]
    for s in sites:
        s.trust(*(o.public_key for o in sites if o is not s))
    return sites


def _publisher_network(sizes: StreamSizes, schema: FeatureSchema, seed: int) -> DPMLPClassifier:
    """A site's (ε, δ)-DP network of Table 4 for one chunk (unfitted), with seeded noise."""
    return DPMLPClassifier(
        schema=schema,
        classes=[0, 1],
        hidden_layer_sizes=sizes.hidden,
        epochs=sizes.epochs,
        epsilon=sizes.epsilon,
        delta=sizes.delta,
        random_state=seed,
        noise_seed=seed,  # a simulation: reproducible noise
    )
