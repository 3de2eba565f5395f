"""Many publishers, few subscribers: model selection, runtime and the number of publishers.

One fold of pubsub-ml.txt §8.2.3 (Fig. 4, Table 6) or appendix B (Fig. 8): the publishers'
DP networks are trained at once on the stacked DP-SGD engine
(:func:`~pubsubml.learners.mlp.fit_many`), each publisher charges its ledger and publishes to a
:class:`~pubsubml.hub.LocalHub`, and every subscriber pulls the models (Load), scores them on its
customization split and keeps the top m (Select), and fuses them (Fuse) with
:class:`~pubsubml.methods.pubsub.customizer.Customizer`, whose subscribed networks run batched through
:func:`~pubsubml.methods.pubsub.outputs.published_runner`.  The publishers are trained once per fold and
shared by all subscribers, as in Algorithm 3 (publishers in parallel, then subscribers).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pubsubml.data import hyperplane_schema
from pubsubml.errors import SeededNoiseWarning
from pubsubml.experiments.pubsub import compared as pm
from pubsubml.experiments.pubsub.scale.fl_baselines import fl_records
from pubsubml.experiments.pubsub.scale.hyperplane import HyperplaneSite, make_consortium
from pubsubml.experiments.pubsub.scale.sizes import SIZES, Frame, ScaleSizes
from pubsubml.experiments.runner import Record, kfold_indices
from pubsubml.hub import LocalHub
from pubsubml.learners.mlp import DPMLPClassifier, fit_many
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.outputs import published_runner
from pubsubml.privacy.ledger import PrivacyLedger
from pubsubml.sites import Site

__all__ = [
    "PROTOCOLS",
    "Fold",
    "check_protocol",
    "customize_options",
    "customize_records",
    "own_records",
    "publish_models",
    "publisher_estimator",
    "publishers_fold",
    "selection_fold",
    "split_sites",
    "train_many_publishers",
]

PROTOCOLS: tuple[str, ...] = ("default", "paper")
"""The CUSTOMIZE protocols of these experiments (:func:`customize_options`)."""


def customize_options(protocol: str, sizes: ScaleSizes, seed: int) -> dict[str, Any]:
    """The :class:`~pubsubml.methods.pubsub.customizer.Customizer` options of a protocol.

    ``"default"``: none, the Customizer's defaults (M^s chosen among three kinds, each
    cross-fitted over 5 folds, then the stacked fusion with its penalty chosen by internal CV).
    ``"paper"``: CUSTOMIZE as pubsub-ml.txt §4 and §7 run it: M^s is Table 4's network trained
    without DP (the publishers' network, §7.3) on ``Tra``, 75 % of the subscriber's rows (60 %
    of all its data), and f_c is the input layer fully connected to the output (§7.2, an L2
    logistic regression) on ``Cus``, the other 25 %; candidates are ranked by accuracy, the
    metric of §8 for Hyperplane.  Only the ``Cus`` rows and the scored rows go through the
    subscribed models, and nothing is cross-fitted: 5,000 × 5,000 sites run in about 25 minutes
    on two cores, against an estimated 3.7 hours with the defaults (``benchmarks/RESULTS.md``).

    Raises
    ------
    ValueError
        An unknown ``protocol``.
    """
    check_protocol(protocol)
    if protocol == "default":
        return {}
    own = publisher_estimator(sizes, seed).set_params(dp=False, epsilon=None)
    return pm.paper_protocol("accuracy") | {"own_model": own}


def check_protocol(protocol: str) -> None:
    """Refuse a CUSTOMIZE protocol outside :data:`PROTOCOLS` (before anything is trained).

    Raises
    ------
    ValueError
        An unknown ``protocol``.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown CUSTOMIZE protocol {protocol!r}; choose from {PROTOCOLS}")


def config_label(top_m: int | None) -> str:
    """``"All"`` or ``"Top-m"`` (Fig. 4's labels)."""
    return "All" if top_m is None else f"Top-{top_m}"


@dataclass(frozen=True)
class Fold:
    """One fold's data: publishers' training rows and subscribers' fit / test rows (§8)."""

    publishers: list[Frame]
    sub_fit: list[Frame]
    sub_test: list[Frame]
    names: list[str]


def split_sites(
    publishers: Sequence[HyperplaneSite],
    subscribers: Sequence[HyperplaneSite],
    *,
    folds: int,
    fold: int,
    seed: int,
) -> Fold:
    """Fold ``fold`` of every site: publishers keep the 80% training part, subscribers split 80/20.

    With the paper's protocol the Customizer splits the subscriber's 80% 60/20 into Tra and Cus
    (§8); with its defaults it cross-fits over all of it (:func:`customize_options`).
    """

    def part(site: HyperplaneSite, rows: np.ndarray) -> Frame:
        return site.data.X.iloc[rows].reset_index(drop=True), site.data.y[rows]

    pubs = [part(s, kfold_indices(s.data.y, folds, fold, seed)[0]) for s in publishers]
    fit, test = [], []
    for s in subscribers:
        tr, te = kfold_indices(s.data.y, folds, fold, seed)
        fit.append(part(s, tr))
        test.append(part(s, te))
    return Fold(pubs, fit, test, [s.name for s in publishers])


def publisher_estimator(sizes: ScaleSizes, seed: int) -> DPMLPClassifier:
    """A publisher's (ε, δ)-DP network of Table 4 (unfitted), minibatches of 100, Adam 10⁻³."""
    return DPMLPClassifier(
        schema=hyperplane_schema(),
        classes=[0, 1],
        hidden_layer_sizes=sizes.hidden,
        epochs=sizes.epochs,
        batch_size=100,
        learning_rate=1e-3,
        epsilon=sizes.epsilon,
        delta=sizes.delta,
        random_state=seed,
        noise_seed=seed,  # a simulation: reproducible noise
    )


def train_many_publishers(
    data: Sequence[Frame], sizes: ScaleSizes, *, seed: int
) -> tuple[list[Any], float]:
    """Every publisher's (ε, δ)-DP network, trained at once with ``fit_many``; and the seconds."""
    est = publisher_estimator(sizes, seed)
    t0 = time.perf_counter()
    models = fit_many(est, [X for X, _ in data], [y for _, y in data])
    return models, time.perf_counter() - t0


def publish_models(
    models: Sequence[Any], names: Sequence[str], sizes: ScaleSizes
) -> tuple[LocalHub, list[Any], float]:
    """Each publisher charges its ledger and publishes (Algorithm 3, line 2).

    Returns
    -------
    hub, public keys, seconds
    """
    t0 = time.perf_counter()
    hub = LocalHub()
    keys = []
    schema = hyperplane_schema()
    for name, model in zip(names, models, strict=True):
        ledger = PrivacyLedger(site=name, epsilon_budget=sizes.epsilon, delta=sizes.delta)
        site = Site(name, schema, ledger)
        with warnings.catch_warnings():  # a simulation: its publishers' noise is seeded
            warnings.simplefilter("ignore", SeededNoiseWarning)
            site.publish(model, hub)
        keys.append(site.public_key)
    return hub, keys, time.perf_counter() - t0


def pull_models(hub: LocalHub, keys: Sequence[Any], name: str) -> tuple[list[Any], float]:
    """A subscriber's Load (Table 6): subscribe, fetch, verify and load every model; seconds."""
    schema = hyperplane_schema()
    site = Site(name, schema, PrivacyLedger(site=name, epsilon_budget=1.0, delta=1e-4))
    site.trust(*keys)
    site.subscribe(hub, " | ".join(schema.names), task="classification", classes=[0, 1])
    t0 = time.perf_counter()
    models = site.pull(hub)
    return models, time.perf_counter() - t0


def customize_records(
    models: Sequence[Any],
    fit: Frame,
    test: Frame,
    top_ms: Sequence[int | None],
    *,
    seed: int,
    own: bool = True,
    protocol: str = "default",
    sizes: ScaleSizes | None = None,
) -> list[Record]:
    """Customize with All / Top-m of ``models`` and score on ``test``; one record per config.

    Timings follow Table 6: ``select_s`` is scoring every candidate on the fusion rows and
    ranking them (0 for All, which selects nothing; its outputs are part of ``fuse_s``),
    ``fuse_s`` the own model, m(x) where not already computed, and f_c.  The configurations
    share the own model and the outputs (:meth:`Customizer.fit_top_ms`), and each record carries
    their seconds, as a separate fit would.  ``own=True`` adds the
    record ``"Own (M^s)"``: the Customizer's own model M^s alone (cross-fitted, then refit on
    all of ``fit``; on ``Tra`` alone with ``protocol="paper"``).  ``protocol`` and ``sizes``
    (default: the full sizes) give the Customizer's options (:func:`customize_options`).
    """
    X_fit, y_fit = fit
    X_test, y_test = test
    out: list[Record] = []
    own_score = None
    base = Customizer(
        models=list(models),
        schema=hyperplane_schema(),
        runner=published_runner,
        random_state=seed,
        **customize_options(protocol, SIZES["full"] if sizes is None else sizes, seed),
    )
    for top_m, c in zip(top_ms, base.fit_top_ms(X_fit, y_fit, top_ms), strict=True):
        tm = c.fit_timings_
        ranking = tm["outputs"] + tm["select"]
        select = 0.0 if top_m is None else ranking
        fuse = tm["own"] + tm["fuse"] + (ranking if top_m is None else 0.0)
        out.append(
            {
                "method": config_label(top_m),
                "score": c.score(X_test, y_test),
                "n_models": len(c.selected_ids_),
                "select_s": select,
                "fuse_s": fuse,
            }
        )
        if own_score is None and c.own_model_ is not None:
            own_score = float(np.mean(c.own_model_.predict(X_test) == y_test))
    if own:
        out.append({"method": "Own (M^s)", "score": own_score, "n_models": 1})
    return out


def own_records(
    subscribers: Sequence[HyperplaneSite],
    sizes: ScaleSizes,
    *,
    seed: int,
    fold: int,
    own_model: str = "auto",
) -> list[Record]:
    """The baseline "Own" of every subscriber, as :func:`~pubsubml.experiments.pubsub.compared.evaluate_fold`
    scores it (pubsub-ml.txt §7.3: the subscriber's non-private model, no subscribed models);
    ``own_model`` is :class:`~pubsubml.experiments.pubsub.consortium.MethodConfig`'s."""
    config = pm.MethodConfig(
        hidden_layer_sizes=sizes.hidden, epochs=sizes.epochs, own_model=own_model
    )
    out: list[Record] = []
    for sub in subscribers:
        scenario = pm.Scenario(
            publishers=[],
            subscriber=pm.SimSite(sub.data.X, sub.data.y),
            schema=hyperplane_schema(),
            task="classification",
            classes=(0, 1),
            metric="accuracy",
            delta=sizes.delta,
        )
        for r in pm.evaluate_fold(
            scenario, seed=seed, fold=fold, folds=sizes.folds, methods=("Own",), config=config
        ):
            out.append({"subscriber": sub.name, "method": r["method"], "score": r["score"]})
    return out


def selection_fold(seed: int, fold: int, *, size: str = "full", fl: bool = True) -> list[Record]:
    """One fold of §8.2.3: All / Top-m vs Own vs the DP-FL baselines, with Table 6's timings.

    Records carry ``method``, ``subscriber``, ``score`` (accuracy) and the seconds of each phase
    (``train_s``, ``publish_s`` once per fold on the ``PubSub-ML train`` row; ``load_s``,
    ``select_s``, ``fuse_s``, ``total_s`` per subscriber; ``total_s`` of each FL method).
    """
    sizes = SIZES[size]
    pubs, subs = make_consortium(sizes.n_publishers, sizes.n_subscribers, sizes.rows, seed=seed)
    data = split_sites(pubs, subs, folds=sizes.folds, fold=fold, seed=seed)
    models, t_train = train_many_publishers(data.publishers, sizes, seed=seed * 1000 + fold)
    hub, keys, t_publish = publish_models(models, data.names, sizes)
    records: list[Record] = [
        {"method": "publishers", "subscriber": "", "score": np.nan, "train_s": t_train}
        | {"publish_s": t_publish, "n_models": len(models)}
    ]
    for j, (fit, test) in enumerate(zip(data.sub_fit, data.sub_test, strict=True)):
        received, t_load = pull_models(hub, keys, f"s{j}")
        for r in customize_records(received, fit, test, sizes.top_ms, seed=seed + j):
            if r["method"] != "Own (M^s)":
                r["load_s"] = t_load
                r["total_s"] = t_load + r["select_s"] + r["fuse_s"]
            records.append({"subscriber": f"s{j}", **r})
    records += own_records(subs, sizes, seed=seed, fold=fold)
    if fl:
        clients = data.publishers + data.sub_fit
        records += fl_records(
            clients, data.sub_fit, data.sub_test, sizes=sizes, seed=seed * 1000 + fold
        )
    return records


def publishers_fold(
    seed: int,
    fold: int,
    *,
    size: str = "full",
    max_publishers: int | None = None,
    customizer: str = "default",
) -> list[Record]:
    """One fold of appendix B (Fig. 8): n publishers and min(n, S) subscribers, n nested.

    The first ``n`` of the publishers serve the first ``min(n, n_subscribers)`` subscribers, so
    one training of the largest pool serves every ``n`` (the size's counts up to
    ``max_publishers``).  ``customizer`` is the CUSTOMIZE protocol (:func:`customize_options`).
    """
    check_protocol(customizer)
    sizes = SIZES[size]
    counts = [n for n in sizes.publisher_counts if max_publishers is None or n <= max_publishers]
    if not counts:
        raise ValueError(f"max_publishers {max_publishers} is below every n of {size!r}")
    n_max = max(counts)
    pubs, subs = make_consortium(n_max, sizes.n_subscribers, sizes.rows, seed=seed)
    data = split_sites(pubs, subs, folds=sizes.folds, fold=fold, seed=seed)
    models, _ = train_many_publishers(data.publishers, sizes, seed=seed * 1000 + fold)
    hub, keys, _ = publish_models(models, data.names, sizes)
    records: list[Record] = []
    for j, (fit, test) in enumerate(zip(data.sub_fit, data.sub_test, strict=True)):
        received, _ = pull_models(hub, keys, f"s{j}")
        by_publisher = {m.publisher: m for m in received}
        for n in counts:
            if j >= min(n, sizes.n_subscribers):
                continue
            chosen = [by_publisher[name] for name in data.names[:n]]
            fused = customize_records(
                chosen,
                fit,
                test,
                (None,),
                seed=seed + j,
                own=n == n_max,
                protocol=customizer,
                sizes=sizes,
            )
            for r in fused:
                r["method"] = "PubSub-ML" if r["method"] == "All" else r["method"]
                records.append({"n_publishers": n, "subscriber": f"s{j}", **r})
    own_model = "paper" if customizer == "paper" else "auto"
    for r in own_records(subs, sizes, seed=seed, fold=fold, own_model=own_model):
        records.append({"n_publishers": n_max, **r})
    return records
