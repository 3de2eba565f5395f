"""Many-site simulations on an executor: publishers in batches, subscribers in batches, and the
n × n run of Fig. 8 (pubsub-ml.txt Algorithm 3, appendix B)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.errors import DigestMismatchError
from pubsubml.experiments.executors import make_executor
from pubsubml.experiments.pubsub.scale import executor_tasks as scale_tasks
from pubsubml.experiments.pubsub.scale.executor_tasks import (
    Shipment,
    customize_subscribers,
    ship,
    train_and_publish,
)
from pubsubml.experiments.pubsub.scale.hyperplane import make_consortium
from pubsubml.experiments.pubsub.scale.many_publishers import (
    customize_records,
    publish_models,
    publisher_estimator,
    pull_models,
    split_sites,
)
from pubsubml.experiments.pubsub.scale.sizes import SIZES
from pubsubml.learners.mlp import fit_many

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = replace(
    SIZES["smoke"],
    n_publishers=5,
    n_subscribers=3,
    rows=50,
    hidden=(4,),
    epochs=1,
    top_ms=(None, 2),
    publisher_counts=(2, 3),
)
X_NEW = pd.DataFrame(
    np.random.default_rng(9).random((20, 10)), columns=[f"x{i}" for i in range(10)]
)


@pytest.fixture(scope="module")
def fold() -> Any:
    pubs, subs = make_consortium(TINY.n_publishers, TINY.n_subscribers, TINY.rows, seed=0)
    return split_sites(pubs, subs, folds=TINY.folds, fold=0, seed=0)


@pytest.fixture(scope="module")
def published(fold: Any) -> Any:
    """The TINY publishers' hub (every model published once) and their public keys."""
    models = fit_many(
        publisher_estimator(TINY, 0),
        [X for X, _ in fold.publishers],
        [y for _, y in fold.publishers],
    )
    hub, keys, _ = publish_models(models, fold.names, TINY)
    return hub, keys


def _subscribers(fold: Any) -> list[tuple[str, Any, Any, int]]:
    return [
        (f"s{j}", fit, test, 10 + j)
        for j, (fit, test) in enumerate(zip(fold.sub_fit, fold.sub_test, strict=True))
    ]


def test_publishers_trained_and_published_in_batches_are_the_models_of_one_call(
    fold: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scale_tasks, "PUBLISHER_BATCH", 2)  # 5 publishers: batches 2, 2, 1
    with make_executor("process", jobs=1) as pool:
        shipment, phases = train_and_publish(pool, fold.publishers, fold.names, TINY, seed=3)
    whole = fit_many(
        publisher_estimator(TINY, 3),
        [X for X, _ in fold.publishers],
        [y for _, y in fold.publishers],
    )
    assert len(shipment.cards) == 5 and phases["seconds"] > 0 and phases["worker_peak_gib"] > 0
    assert phases["train_s"] > 0 and phases["publish_s"] > 0
    assert phases["epsilons"] == [m.epsilon_ for m in whole]
    hub, keys = shipment.hub()
    received, _ = pull_models(hub, keys, "s")
    by_publisher = {m.publisher: m for m in received}
    for name, model in zip(fold.names, whole, strict=True):
        np.testing.assert_allclose(
            by_publisher[name].predict_proba(X_NEW), model.predict_proba(X_NEW), atol=1e-5
        )


def test_a_shipment_rebuilds_the_hub_and_a_tampered_one_is_refused(
    fold: Any, published: Any
) -> None:
    hub, keys = published
    shipment = ship(hub, keys)
    assert len(shipment.cards) == len(shipment.weights) == len(shipment.keys) == 5
    names = [c.publisher for c in (hub.fetch(i)[0] for i in hub.model_ids())]

    copy, trusted = shipment.hub()
    assert copy.model_ids() == hub.model_ids()
    received, _ = pull_models(copy, trusted, "s")
    assert sorted(m.publisher for m in received) == sorted(names) == sorted(fold.names)

    assert Shipment.join([shipment, shipment]).cards == shipment.cards * 2
    bad = Shipment(shipment.cards, [b"x" + shipment.weights[0], *shipment.weights[1:]], [])
    with pytest.raises(DigestMismatchError):
        bad.hub()


def test_subscribers_in_batches_score_as_one_by_one(fold: Any, published: Any) -> None:
    hub, keys = published
    subscribers = _subscribers(fold)
    received, _ = pull_models(hub, keys, "s")
    alone = [
        {"subscriber": name, **r}
        for name, fit, test, seed in subscribers
        for r in customize_records(received, fit, test, TINY.top_ms, seed=seed)
    ]
    with make_executor("process", jobs=1) as pool:  # two batches: s0, s1 then s2
        records, phases = customize_subscribers(
            pool, ship(hub, keys), subscribers, TINY.top_ms, tasks_per_worker=2
        )
    assert [(r["subscriber"], r["method"], r["score"]) for r in records] == [
        (r["subscriber"], r["method"], r["score"]) for r in alone
    ]
    assert phases["load_s"] > 0 and phases["worker_peak_gib"] > 0
    assert sum("customize_s" in r for r in records) == len(subscribers)


def test_subscribers_in_batches_take_the_protocol(fold: Any, published: Any) -> None:
    hub, keys = published
    subscribers = _subscribers(fold)[:2]
    received, _ = pull_models(hub, keys, "s")
    alone = [
        (name, r["method"], r["score"])
        for name, fit, test, seed in subscribers
        for r in customize_records(
            received, fit, test, (None,), seed=seed, protocol="paper", sizes=TINY
        )
    ]
    with make_executor("process", jobs=1) as pool:
        records, _ = customize_subscribers(
            pool, ship(hub, keys), subscribers, protocol="paper", sizes=TINY
        )
    assert [(r["subscriber"], r["method"], r["score"]) for r in records] == alone


def test_a_worker_loads_a_shipment_once_for_its_batches(
    fold: Any, published: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scale_tasks, "_LOADED", {})  # a fresh worker process
    hub, keys = published
    shipment = ship(hub, keys)
    assert shipment.digest() == ship(hub, keys).digest()
    fewer = Shipment(shipment.cards[:4], shipment.weights[:4], shipment.keys)
    assert fewer.digest() != shipment.digest()
    subscribers = _subscribers(fold)[:1]

    first, load, _ = scale_tasks._subscriber_batch(shipment, subscribers, TINY.top_ms)
    again, reload, _ = scale_tasks._subscriber_batch(shipment, subscribers, TINY.top_ms)
    assert load > 0 and reload == 0.0  # the second batch used the models already loaded
    assert [(r["method"], r["score"]) for r in again] == [(r["method"], r["score"]) for r in first]

    other, other_load, _ = scale_tasks._subscriber_batch(fewer, subscribers, TINY.top_ms)
    assert other_load > 0 and other[0]["n_models"] == 4 + 1  # its own models, and M^s
