"""The PubSub-ML evaluation: fold protocol, budgets per method, and every experiment's smoke run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pubsubml.sim.datasets import hyperplane
from pubsubml.sim.pubsub_methods import MethodConfig, Scenario, Site, _fold_rows, evaluate_fold
from pubsubml.sim.pubsub_scenarios import distributed_features, non_iid_sites, with_budgets

TINY = MethodConfig(hidden_layer_sizes=(8,), epochs=2, fl_rounds=2, fine_tune_epochs=2)


def _hyperplane_scenario(n_pub: int = 3, rows: int = 200, sub_rows: int = 100) -> Scenario:
    data = hyperplane(n_pub * rows + sub_rows, seed=5)
    pubs = [
        Site(data.X.iloc[i * rows : (i + 1) * rows], data.y[i * rows : (i + 1) * rows])
        for i in range(n_pub)
    ]
    sub = Site(data.X.iloc[n_pub * rows :], data.y[n_pub * rows :])
    return Scenario(pubs, sub, data.schema, "classification", (0, 1), "accuracy")


def test_every_method_is_scored_with_its_budget() -> None:
    sc = with_budgets(_hyperplane_scenario(), [0.5, 1.0, 2.0])
    records = evaluate_fold(sc, seed=0, fold=1, config=TINY)
    by = {r["method"]: r for r in records}
    assert len(by) == 10 and all(0.0 <= r["score"] <= 1.0 for r in records)
    # PubSub-ML publishers spend their own budgets; the FL baselines the minimum (§8.2.1).
    assert 1.9 < by["PubSub-ML"]["epsilon"] <= 2.0
    for name in ("FedAvg(V)", "FedProx(F)", "FedAdam(V)"):
        assert 0.45 < by[name]["epsilon"] <= 0.5
    for name in ("PubSub-ML*", "Own", "Joint"):
        assert by[name]["epsilon"] == np.inf


def test_unknown_method_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown methods"):
        evaluate_fold(_hyperplane_scenario(), seed=0, fold=0, methods=["FedSGD"], config=TINY)


def test_shared_population_folds_never_train_on_the_subscribers_test_rows() -> None:
    sc = distributed_features(seed=1, max_rows=600)
    assert sc.subscriber.ids is not None
    for fold in range(5):
        trains, tr, te = _fold_rows(sc, seed=0, fold=fold, folds=5)
        test_ids = set(sc.subscriber.ids[te])
        assert test_ids.isdisjoint(sc.subscriber.ids[tr])
        for site, rows in zip(sc.publishers, trains, strict=True):
            assert site.ids is not None and test_ids.isdisjoint(site.ids[rows])
    assert set(sc.subscriber.X.columns).isdisjoint(["sex", "sample.yr"])  # A + C only


def test_non_iid_subscriber_is_a_ten_percent_donation() -> None:
    sc = non_iid_sites(seed=0)
    kept = sum(len(s.y) for s in sc.publishers)
    assert len(sc.publishers) == 4
    assert len(sc.subscriber.y) / (kept + len(sc.subscriber.y)) == pytest.approx(0.1, abs=0.01)


@pytest.mark.parametrize(
    "name",
    [
        "pubsub-scenarios",
        "pubsub-privacy",
        "pubsub-models",
        "pubsub-regression",
        "pubsub-nonprivate",
    ],
)
def test_experiment_smoke_run_writes_its_files(name: str, tmp_path: Path) -> None:
    from pubsubml.cli import app

    result = CliRunner().invoke(
        app, ["bench", name, "--smoke", "--folds", "2", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    for ext in ("csv", "md", "png"):
        assert (tmp_path / f"{name}.{ext}").stat().st_size > 0
    table = pd.read_csv(tmp_path / f"{name}.csv")
    assert {"seed", "fold", "method", "score"} <= set(table.columns)
    assert "±" in (tmp_path / f"{name}.md").read_text()


def test_bad_options_exit_with_a_clear_error(tmp_path: Path) -> None:
    from pubsubml.cli import app

    result = CliRunner().invoke(
        app, ["bench", "pubsub-models", "--folds", "1", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and "--folds" in result.output
    assert list(tmp_path.iterdir()) == []
