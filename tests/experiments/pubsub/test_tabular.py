"""The PubSub-ML evaluation: fold protocol, budgets per method, and every experiment's smoke run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pubsubml.data import hyperplane
from pubsubml.experiments.pubsub import compared as pubsub_methods
from pubsubml.experiments.pubsub.compared import (
    MethodConfig,
    Scenario,
    SimSite,
    _fold_rows,
    _joined,
    evaluate_fold,
    fit_federated,
    train_publishers,
)
from pubsubml.experiments.pubsub.scenarios import (
    distributed_features,
    non_iid_sites,
    with_budgets,
    with_learners,
)

TINY = MethodConfig(hidden_layer_sizes=(8,), epochs=2, fl_rounds=2, fine_tune_epochs=2)


def _hyperplane_scenario(n_pub: int = 3, rows: int = 200, sub_rows: int = 100) -> Scenario:
    data = hyperplane(n_pub * rows + sub_rows, seed=5)
    pubs = [
        SimSite(data.X.iloc[i * rows : (i + 1) * rows], data.y[i * rows : (i + 1) * rows])
        for i in range(n_pub)
    ]
    sub = SimSite(data.X.iloc[n_pub * rows :], data.y[n_pub * rows :])
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


def test_each_publisher_trains_its_own_model_type_to_its_own_budget() -> None:
    budgets = [0.25, 0.5, 1.0, 2.0]
    sc = with_learners(
        with_budgets(_hyperplane_scenario(n_pub=4), budgets),
        ["mlp", "logistic", "naive_bayes", "forest"],
    )
    trains, _, _ = _fold_rows(sc, seed=0, fold=0, folds=5)
    assert [len(t) for t in trains] == [160] * 4  # publishers train on 80 % of their rows
    models = train_publishers(sc, trains, TINY, dp=True, seed=0)
    kinds = ["DPMLPClassifier", "DPLogisticRegression", "DPGaussianNB", "DPRandomForestClassifier"]
    assert [type(m.estimator).__name__ for m in models] == kinds
    for model, budget in zip(models, budgets, strict=True):
        assert 0.95 * budget < model.estimator.epsilon_ <= budget


def test_subscriber_splits_60_20_20(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, int] = {}

    class Recording(pubsub_methods.Customizer):
        def fit(self, X: pd.DataFrame, y: np.ndarray) -> Recording:
            super().fit(X, y)
            seen["fit"], seen["tra"], seen["cus"] = (
                len(X),
                len(self.train_index_),
                len(self.fusion_index_),
            )
            return self

    monkeypatch.setattr(pubsub_methods, "Customizer", Recording)
    sc = _hyperplane_scenario(sub_rows=500)
    paper = replace(TINY, customizer="paper", own_model="paper")
    (record,) = evaluate_fold(sc, seed=0, fold=2, methods=["PubSub-ML"], config=paper)
    assert 0.0 <= record["score"] <= 1.0
    # 20 % test; of the other 80 %: Tra 60 % and Cus 20 % of all the subscriber's rows
    assert seen["fit"] == 400 and seen["tra"] == 300 and seen["cus"] == 100
    assert record["own_choice"] == "paper" and isinstance(record["fallback"], bool)


def test_own_is_the_same_learner_as_the_customizers_own_model() -> None:
    sc = _hyperplane_scenario(sub_rows=300)
    records = evaluate_fold(sc, seed=0, fold=0, methods=["Own", "PubSub-ML"], config=TINY)
    by = {r["method"]: r for r in records}
    # the default: an OwnLearner chosen by cross-validation, for Own and inside CUSTOMIZE
    assert by["Own"]["own_choice"] in ("mlp", "forest", "logistic")
    assert by["PubSub-ML"]["own_choice"] in ("mlp", "forest", "logistic")
    paper = evaluate_fold(
        sc, seed=0, fold=0, methods=["Own"], config=replace(TINY, own_model="paper")
    )
    assert paper[0]["own_choice"] == "paper"
    with pytest.raises(ValueError, match="unknown own model"):
        evaluate_fold(sc, seed=0, fold=0, methods=["Own"], config=replace(TINY, own_model="svm"))


def test_fl_baselines_can_add_their_noise_at_the_server() -> None:
    sc = _hyperplane_scenario()
    clients = [(sc.schema.extend(s.X), s.y) for s in sc.publishers]
    local = fit_federated(sc, "FedAvg", clients, TINY, seed=0)
    central = fit_federated(sc, "FedAvg", clients, replace(TINY, fl_dp="central"), seed=0)
    assert local.privacy_unit_ == "record" and central.privacy_unit_ == "client"
    assert 0.95 < central.epsilon_ <= 1.0
    # per-class options override the ones built from the config
    prox = fit_federated(
        sc, "FedProx", clients, replace(TINY, fl_options={"DPFedProx": {"dp": "central"}}), seed=0
    )
    assert prox.privacy_unit_ == "client"
    records = evaluate_fold(
        sc, seed=0, fold=0, methods=["FedAdam(V)"], config=replace(TINY, fl_dp="central")
    )
    assert 0.95 < records[0]["epsilon"] <= 1.0


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


def test_joint_pools_a_shared_population_by_row_id() -> None:
    from pubsubml.data import load_flchain

    sc = distributed_features(seed=1, max_rows=600)
    trains, tr, te = _fold_rows(sc, seed=0, fold=0, folds=5)
    X, y, X_eval = _joined(sc, trains, tr, te)
    assert sc.subscriber.ids is not None
    train_ids = np.unique(
        np.concatenate(
            [*(s.ids[t] for s, t in zip(sc.publishers, trains, strict=True)), sc.subscriber.ids[tr]]
        )
    )
    assert not set(train_ids) & set(sc.subscriber.ids[te])
    # one row per patient with every group of columns, as in the data before it was split
    full = load_flchain()
    numeric = ["age", "kappa", "lambda", "creatinine", "sample.yr"]
    np.testing.assert_allclose(X[numeric], full.X.iloc[train_ids][numeric].astype(float))
    np.testing.assert_array_equal(y, full.y[train_ids])
    np.testing.assert_allclose(
        X_eval[numeric], full.X.iloc[sc.subscriber.ids[te]][numeric].astype(float)
    )


def test_non_iid_subscriber_is_a_ten_percent_donation() -> None:
    sc = non_iid_sites(seed=0)
    kept = sum(len(s.y) for s in sc.publishers)
    assert len(sc.publishers) == 4
    assert len(sc.subscriber.y) / (kept + len(sc.subscriber.y)) == pytest.approx(0.1, abs=0.01)


@pytest.mark.slow
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
    for args in (
        ["pubsub-regression", "--fl-dp", "server"],
        ["pubsub-models", "--fl-dp", "central"],
    ):
        result = CliRunner().invoke(app, ["bench", *args, "--smoke", "--out-dir", str(tmp_path)])
        assert result.exit_code == 2 and "--fl-dp" in result.output
    for args in (
        ["pubsub-privacy", "--turns", "3"],
        ["pubsub-models", "--turns", "3"],
        ["pubsub-scenarios", "--turns", "3", "--smoke"],
    ):
        result = CliRunner().invoke(app, ["bench", *args, "--out-dir", str(tmp_path)])
        assert result.exit_code == 2 and "--turns" in result.output
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_that_is_a_file_fails_before_the_run(tmp_path: Path) -> None:
    from pubsubml.cli import app

    blocker = tmp_path / "results"
    blocker.write_text("not a folder")
    for name in ("pubsub-regression", "pubsub-noisy", "stacking-quantity"):
        result = CliRunner().invoke(
            app, ["bench", name, "--smoke", "--out-dir", str(blocker / "sub")]
        )
        assert result.exit_code == 2 and "is not a folder" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


@pytest.mark.slow
def test_central_dp_smoke_run_records_the_mode(tmp_path: Path) -> None:
    from pubsubml.cli import app

    args = ["bench", "pubsub-regression", "--smoke", "--folds", "2", "--fl-dp", "central"]
    result = CliRunner().invoke(app, [*args, "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "pubsub-regression.csv")
    assert set(table["fl_dp"]) == {"central"}
    assert "central DP" in (tmp_path / "pubsub-regression.md").read_text()
