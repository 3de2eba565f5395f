"""Many-site simulations on an executor: publishers in batches, subscribers in batches, and the
n × n run of Fig. 8 (pubsub-ml.txt Algorithm 3, appendix B)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.errors import DigestMismatchError
from pubsubml.experiments.catalog import get as get_experiment
from pubsubml.experiments.executors import make_executor
from pubsubml.experiments.pubsub import scale_tasks
from pubsubml.experiments.pubsub.hyperplane import make_consortium
from pubsubml.experiments.pubsub.publishers_scale import growth, scale_counts, scale_run
from pubsubml.experiments.pubsub.scale_tasks import (
    Shipment,
    customize_subscribers,
    ship,
    train_and_publish,
)
from pubsubml.experiments.pubsub.selection import (
    SIZES,
    customize_records,
    publish_models,
    publisher_estimator,
    pull_models,
    split_sites,
)
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


def test_scale_run_has_n_subscribers_and_a_run_record(monkeypatch: pytest.MonkeyPatch) -> None:
    with make_executor("process", jobs=1) as pool:
        records = scale_run(pool, 3, TINY, seed=0, fold=0)
        probe = scale_run(pool, 3, TINY, seed=0, fold=0, subscribers=1)
    table = pd.DataFrame(records)
    run = table[table["method"] == "run"].iloc[0]
    assert sorted(table.loc[table["method"] == "PubSub-ML", "subscriber"]) == ["s0", "s1", "s2"]
    assert (table.loc[table["method"] == "PubSub-ML", "n_models"] == 4).all()  # own + 3
    assert run["n_subscribers"] == 3 and run["total_s"] >= run["publishers_s"] > 0
    assert run["parent_peak_gib"] > 0 and run["worker_peak_gib"] > 0
    first = pd.DataFrame(probe)
    assert first.loc[first["method"] == "run", "n_subscribers"].item() == 1
    assert first.loc[first["method"] == "PubSub-ML", "score"].tolist() == (
        table.loc[
            (table["method"] == "PubSub-ML") & (table["subscriber"] == "s0"), "score"
        ].tolist()
    )


def test_counts_growth_and_options() -> None:
    assert scale_counts(False, 5000) == [5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
    assert scale_counts(False, 60) == [5, 10, 20, 50]
    assert scale_counts(True, 5000) == list(SIZES["smoke"].publisher_counts)
    with pytest.raises(ValueError, match="below the smallest n"):
        scale_counts(False, 4)
    b_all, b_last = growth([10, 20, 40], [3.0, 12.0, 48.0])
    assert b_all == pytest.approx(2.0) and b_last == pytest.approx(2.0)
    assert all(np.isnan(growth([10], [1.0])))

    exp = get_experiment("pubsub-publishers")
    assert exp.options(subscribers="all").params == {"subscribers": "all", "max_publishers": 5000}
    with pytest.raises(ValueError, match="--subscribers must be one of"):
        exp.options(subscribers="some")
    with pytest.raises(ValueError, match="below the smallest n"):
        exp.options(max_publishers=3)


@pytest.mark.slow
def test_bench_all_subscribers_writes_time_and_memory_per_n(tmp_path: Path) -> None:
    exp = get_experiment("pubsub-publishers")
    opts = exp.options(smoke=True, folds=1, subscribers="all", max_publishers=2, progress=False)
    paths = exp.run(tmp_path, opts)
    assert {p.suffix for p in paths} == {".csv", ".md", ".png"}
    text = (tmp_path / "pubsub-publishers.md").read_text()
    assert "## Time and memory per n" in text and "Growth exponent" in text
    table = pd.read_csv(tmp_path / "pubsub-publishers.csv")
    assert set(table["n_publishers"]) == {2}
    assert set(table["method"]) == {"PubSub-ML", "Own (M^s)", "run"}


@pytest.mark.slow
@pytest.mark.ray
def test_ray_and_the_process_pool_give_the_same_simulation(ray_session: Any) -> None:
    tables = []
    for executor, jobs in (("process", 1), ("ray", 2)):
        with make_executor(executor, jobs=jobs) as pool:
            records = scale_run(pool, 3, TINY, seed=1, fold=0)
        tables.append(pd.DataFrame([r for r in records if r["method"] != "run"]))
    keep = ["n_publishers", "subscriber", "method", "score", "n_models"]
    pd.testing.assert_frame_equal(tables[0][keep], tables[1][keep])
