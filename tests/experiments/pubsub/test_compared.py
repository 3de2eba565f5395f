"""Every method on one fold: the fold protocol, budgets per method, FL baselines, external tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.data import hyperplane
from pubsubml.experiments.pubsub import compared as pubsub_methods
from pubsubml.experiments.pubsub import site_models as pubsub_models
from pubsubml.experiments.pubsub.compared import (
    MethodConfig,
    Scenario,
    SimSite,
    _fold_rows,
    _joined,
    evaluate_fold,
    fit_federated,
    paper_protocol,
)
from pubsubml.experiments.pubsub.consortium import with_budgets
from pubsubml.experiments.pubsub.tabular.scenarios import distributed_features
from pubsubml.methods.pubsub import own_crossfit
from pubsubml.methods.pubsub.own_crossfit import CrossFitStore

HyperplaneScenario = Callable[..., Scenario]  # the conftest fixture's factory


# ---- budgets and methods ---------------------------------------------------------------------
def test_every_method_is_scored_with_its_budget(
    hyperplane_scenario: HyperplaneScenario, tiny_config: MethodConfig
) -> None:
    sc = with_budgets(hyperplane_scenario(), [0.5, 1.0, 2.0])
    records = evaluate_fold(sc, seed=0, fold=1, config=tiny_config)
    by = {r["method"]: r for r in records}
    assert len(by) == 10 and all(0.0 <= r["score"] <= 1.0 for r in records)
    # PubSub-ML publishers spend their own budgets; the FL baselines the minimum (§8.2.1).
    assert 1.9 < by["PubSub-ML"]["epsilon"] <= 2.0
    for name in ("FedAvg(V)", "FedProx(F)", "FedAdam(V)"):
        assert 0.45 < by[name]["epsilon"] <= 0.5
    for name in ("PubSub-ML*", "Own", "Joint"):
        assert by[name]["epsilon"] == np.inf


def test_subscriber_splits_60_20_20(
    monkeypatch: pytest.MonkeyPatch,
    hyperplane_scenario: HyperplaneScenario,
    tiny_config: MethodConfig,
) -> None:
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
    sc = hyperplane_scenario(sub_rows=500)
    paper = replace(tiny_config, customizer="paper", own_model="paper")
    (record,) = evaluate_fold(sc, seed=0, fold=2, methods=["PubSub-ML"], config=paper)
    assert 0.0 <= record["score"] <= 1.0
    # 20 % test; of the other 80 %: Tra 60 % and Cus 20 % of all the subscriber's rows
    assert seen["fit"] == 400 and seen["tra"] == 300 and seen["cus"] == 100
    assert record["own_choice"] == "paper" and isinstance(record["fallback"], bool)


def test_own_is_the_same_learner_as_the_customizers_own_model(
    hyperplane_scenario: HyperplaneScenario, tiny_config: MethodConfig
) -> None:
    sc = hyperplane_scenario(sub_rows=300)
    records = evaluate_fold(sc, seed=0, fold=0, methods=["Own", "PubSub-ML"], config=tiny_config)
    by = {r["method"]: r for r in records}
    # the default: an OwnLearner chosen by cross-validation, for Own and inside CUSTOMIZE
    assert by["Own"]["own_choice"] in ("mlp", "forest", "logistic")
    assert by["PubSub-ML"]["own_choice"] in ("mlp", "forest", "logistic")
    paper = evaluate_fold(
        sc, seed=0, fold=0, methods=["Own"], config=replace(tiny_config, own_model="paper")
    )
    assert paper[0]["own_choice"] == "paper"
    with pytest.raises(ValueError, match="unknown own model"):
        evaluate_fold(
            sc, seed=0, fold=0, methods=["Own"], config=replace(tiny_config, own_model="svm")
        )


def test_own_and_both_pubsub_methods_cross_fit_the_own_model_once_per_fold(
    monkeypatch: pytest.MonkeyPatch,
    hyperplane_scenario: HyperplaneScenario,
    tiny_config: MethodConfig,
) -> None:
    computed: list[int] = []
    real = own_crossfit._cross_fit

    def counted(*args: Any, **kwargs: Any) -> own_crossfit.OwnCrossFit:
        computed.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(own_crossfit, "_cross_fit", counted)
    sc = hyperplane_scenario(sub_rows=300)
    methods = ["PubSub-ML", "PubSub-ML*", "Own"]
    together = evaluate_fold(sc, seed=0, fold=0, methods=methods, config=tiny_config)
    assert len(computed) == 1
    one_by_one = [
        evaluate_fold(sc, seed=0, fold=0, methods=[m], config=tiny_config)[0] for m in methods
    ]
    assert len(computed) == 4
    for a, b in zip(together, one_by_one, strict=True):
        assert {k: v for k, v in a.items() if k != "seconds"} == {
            k: v for k, v in b.items() if k != "seconds"
        }
    store = CrossFitStore()  # shared by calls on the same subscriber: one cross-fit in all
    shared = [
        evaluate_fold(sc, seed=0, fold=0, methods=[m], config=tiny_config, cross_fits=store)[0]
        for m in methods
    ]
    assert len(computed) == 5 and store.hits == 2
    # A method that reused the cross-fit is timed as if it had run it.
    ((_, cross_fit_seconds),) = store.results.values()
    assert all(r["seconds"] >= cross_fit_seconds for r in shared)


def test_fl_baselines_can_add_their_noise_at_the_server(
    hyperplane_scenario: HyperplaneScenario, tiny_config: MethodConfig
) -> None:
    sc = hyperplane_scenario()
    clients = [(sc.schema.extend(s.X), s.y) for s in sc.publishers]
    local = fit_federated(sc, "FedAvg", clients, tiny_config, seed=0)
    central = fit_federated(sc, "FedAvg", clients, replace(tiny_config, fl_dp="central"), seed=0)
    assert local.privacy_unit_ == "record" and central.privacy_unit_ == "client"
    assert 0.95 < central.epsilon_ <= 1.0
    # per-class options override the ones built from the config
    prox = fit_federated(
        sc,
        "FedProx",
        clients,
        replace(tiny_config, fl_options={"DPFedProx": {"dp": "central"}}),
        seed=0,
    )
    assert prox.privacy_unit_ == "client"
    records = evaluate_fold(
        sc, seed=0, fold=0, methods=["FedAdam(V)"], config=replace(tiny_config, fl_dp="central")
    )
    assert 0.95 < records[0]["epsilon"] <= 1.0


def test_unknown_method_is_rejected(
    hyperplane_scenario: HyperplaneScenario, tiny_config: MethodConfig
) -> None:
    with pytest.raises(ValueError, match="unknown methods"):
        evaluate_fold(hyperplane_scenario(), seed=0, fold=0, methods=["FedSGD"], config=tiny_config)


# ---- folds over a shared population (Scenarios 3-4) ----------------------------------------
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


def test_row_ids_must_be_given_by_every_site_or_none(
    hyperplane_scenario: HyperplaneScenario, tiny_config: MethodConfig
) -> None:
    sc = hyperplane_scenario(n_pub=2, rows=50, sub_rows=50)
    with_ids = replace(sc.subscriber, ids=np.arange(50))
    half = replace(sc, subscriber=with_ids)
    with pytest.raises(ValueError, match="either every site has row ids or none has"):
        evaluate_fold(half, seed=0, fold=0, methods=["Own"], config=tiny_config)


# ---- the external test set -------------------------------------------------------------------
def _external(n_sub: int = 80, n_test: int = 400) -> Scenario:
    data = hyperplane(2 * 150 + n_sub + n_test, seed=9)
    cut = np.cumsum([150, 150, n_sub])

    def site(a: int, b: int) -> SimSite:
        return SimSite(data.X.iloc[a:b].reset_index(drop=True), data.y[a:b])

    return Scenario(
        publishers=[site(0, cut[0]), site(cut[0], cut[1])],
        subscriber=site(cut[1], cut[2]),
        schema=data.schema,
        task="classification",
        classes=(0, 1),
        metric="accuracy",
        test=site(cut[2], len(data)),
    )


def test_external_test_trains_every_site_on_all_its_rows() -> None:
    sc = _external()
    trains, tr, te = _fold_rows(sc, seed=0, fold=3, folds=5)
    assert [len(t) for t in trains] == [150, 150] and len(tr) == 80 and len(te) == 0
    shared = Scenario(
        publishers=[SimSite(p.X, p.y, ids=np.arange(len(p.y))) for p in sc.publishers],
        subscriber=SimSite(sc.subscriber.X, sc.subscriber.y, ids=np.arange(80)),
        schema=sc.schema,
        task="classification",
        classes=(0, 1),
        metric="accuracy",
        test=sc.test,
    )
    with pytest.raises(ValueError, match="row ids"):
        _fold_rows(shared, seed=0, fold=0, folds=5)


def test_external_test_refuses_a_negative_repeat_index() -> None:
    with pytest.raises(ValueError, match="repeat index must be >= 0, got -1"):
        evaluate_fold(_external(), seed=0, fold=-1, methods=["Own"])


def test_evaluate_fold_scores_on_the_external_test_set(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Majority:  # stands in for OwnLearner: records what it is fitted and scored on
        def __init__(self, **params: Any) -> None:
            seen["params"] = params

        def fit(self, X: pd.DataFrame, y: np.ndarray) -> Majority:
            seen["fit_rows"] = len(X)
            self.label_ = int(np.bincount(y).argmax())
            self.choice_ = "majority"
            return self

        def predict(self, X: pd.DataFrame) -> np.ndarray:
            seen["scored_rows"] = len(X)
            return np.full(len(X), self.label_)

        def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
            proba = np.zeros((len(X), 2))
            proba[:, self.label_] = 1.0
            return proba

    monkeypatch.setattr(pubsub_models, "OwnLearner", Majority)
    sc = _external()
    assert sc.test is not None
    (record,) = evaluate_fold(sc, seed=1, fold=0, methods=["Own"], config=MethodConfig())
    assert seen["fit_rows"] == 80 and seen["scored_rows"] == 400
    assert seen["params"]["kind"] == "auto"
    label = int(np.bincount(sc.subscriber.y).argmax())
    assert record["score"] == pytest.approx(float(np.mean(sc.test.y == label)))
    assert record["own_choice"] == "majority" and record["epsilon"] == np.inf


def test_the_papers_protocol_ranks_candidates_by_the_scenarios_metric() -> None:
    assert paper_protocol("one_minus_mse") == {
        "cv": "holdout",
        "fusion_model": "linear",
        "train_split": 0.75,
        "fusion_split": 0.25,
        "selection_metric": "mse",
    }
    assert paper_protocol("f1_minority")["selection_metric"] == "f1_minority"
