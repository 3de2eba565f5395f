"""The models of the evaluation: Table 4's network, the publishers' models and the own model M^s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from pubsubml.experiments.pubsub.compared import _fold_rows
from pubsubml.experiments.pubsub.consortium import (
    MethodConfig,
    Scenario,
    SimSite,
    with_budgets,
    with_learners,
)
from pubsubml.experiments.pubsub.site_models import (
    network,
    own_model,
    publisher_learner,
    train_publishers,
)
from pubsubml.learners.mlp import DPMLPClassifier, DPMLPRegressor
from pubsubml.methods.pubsub.own import OwnLearner

HyperplaneScenario = Callable[..., Scenario]  # the conftest fixture's factory

pytestmark = pytest.mark.usefixtures("one_thread")


# ---- Table 4's network -----------------------------------------------------------------------
def test_network_follows_the_config_and_the_scenario(
    hyperplane_scenario: HyperplaneScenario,
) -> None:
    sc = replace(hyperplane_scenario(n_pub=1, rows=10, sub_rows=10), delta=1e-5)
    config = MethodConfig(hidden_layer_sizes=(7, 3), epochs=4, batch_size=32, lr=0.05)
    net = network(sc, sc.schema, config, dp=True, epsilon=0.5, random_state=11)
    assert isinstance(net, DPMLPClassifier)
    params = net.get_params()
    assert params["hidden_layer_sizes"] == (7, 3) and params["epochs"] == 4
    assert params["batch_size"] == 32 and params["learning_rate"] == 0.05
    assert params["delta"] == 1e-5 and params["epsilon"] == 0.5
    assert params["random_state"] == 11 and params["dp"] is True
    assert tuple(params["classes"]) == (0, 1)
    regression = replace(sc, task="regression", classes=None)
    assert isinstance(network(regression, sc.schema, config, dp=False), DPMLPRegressor)


def test_dp_defaults_leave_batch_and_learning_rate_to_the_learner_under_dp_only(
    hyperplane_scenario: HyperplaneScenario,
) -> None:
    sc = hyperplane_scenario(n_pub=1, rows=10, sub_rows=10)
    config = MethodConfig(batch_size=32, lr=0.05, dp_defaults=True)
    private = network(sc, sc.schema, config, dp=True).get_params()
    assert private["batch_size"] == "auto" and private["learning_rate"] == "auto"
    plain = network(sc, sc.schema, config, dp=False).get_params()
    assert plain["batch_size"] == 32 and plain["learning_rate"] == 0.05


# ---- the subscriber's own model --------------------------------------------------------------
def test_own_model_reads_only_the_subscribers_columns(
    hyperplane_scenario: HyperplaneScenario,
) -> None:
    sc = hyperplane_scenario(n_pub=1, rows=10, sub_rows=30)
    columns = ["x0", "x3", "x7"]
    sc = replace(sc, subscriber=SimSite(sc.subscriber.X[columns], sc.subscriber.y))
    paper = own_model(sc, MethodConfig(own_model="paper"), seed=4)
    assert isinstance(paper, DPMLPClassifier)
    assert paper.get_params()["dp"] is False and paper.get_params()["random_state"] == 4
    assert paper.get_params()["schema"].names == columns
    forest = own_model(sc, MethodConfig(own_model="forest"), seed=4)
    assert isinstance(forest, OwnLearner)
    assert forest.kind == "forest" and forest.random_state == 4
    assert forest.schema is not None and forest.schema.names == columns
    with pytest.raises(ValueError, match="unknown own model 'svm'; choose from"):
        own_model(sc, MethodConfig(own_model="svm"), seed=0)


# ---- the publishers' models ------------------------------------------------------------------
def test_publisher_learner_types() -> None:
    assert publisher_learner("classification", "mlp", dp=True) is None
    assert publisher_learner("classification", "sgd_linear", dp=True) == "dp_sgd_logistic"
    assert publisher_learner("regression", "sgd_linear", dp=True) == "dp_sgd_linear"
    assert publisher_learner("classification", "sgd_linear", dp=False) == "logistic_regression"
    assert publisher_learner("regression", "sgd_linear", dp=False) == "linear_regression"
    assert publisher_learner("classification", "forest", dp=False) is None  # the paper's network
    with pytest.raises(ValueError, match="unknown publisher learner"):
        publisher_learner("regression", "forest", dp=True)


def test_an_unknown_publisher_learner_lists_the_types_of_the_task() -> None:
    with pytest.raises(
        ValueError, match=r"'svm' for regression; choose from \['mlp', 'sgd_linear'\]"
    ):
        publisher_learner("regression", "svm", dp=True)


def test_each_publisher_trains_its_own_model_type_to_its_own_budget(
    hyperplane_scenario: HyperplaneScenario, tiny_config: MethodConfig
) -> None:
    budgets = [0.25, 0.5, 1.0, 2.0]
    sc = with_learners(
        with_budgets(hyperplane_scenario(n_pub=4), budgets),
        ["mlp", "logistic", "naive_bayes", "forest"],
    )
    trains, _, _ = _fold_rows(sc, seed=0, fold=0, folds=5)
    assert [len(t) for t in trains] == [160] * 4  # publishers train on 80 % of their rows
    models = train_publishers(sc, trains, tiny_config, dp=True, seed=0)
    kinds = ["DPMLPClassifier", "DPLogisticRegression", "DPGaussianNB", "DPRandomForestClassifier"]
    assert [type(m.estimator).__name__ for m in models] == kinds
    for model, budget in zip(models, budgets, strict=True):
        assert 0.95 * budget < model.estimator.epsilon_ <= budget


def test_publishers_keep_their_columns_and_the_seed_fixes_their_models(
    hyperplane_scenario: HyperplaneScenario, tiny_config: MethodConfig
) -> None:
    sc = hyperplane_scenario(n_pub=3, rows=60, sub_rows=60)
    columns = [["x0", "x1", "x2"], ["x3", "x4"], ["x0", "x1", "x2"]]
    sites = [
        SimSite(s.X[c], s.y, learner="naive_bayes")
        for s, c in zip(sc.publishers, columns, strict=True)
    ]
    sc = replace(sc, publishers=sites)
    trains = [np.arange(60)] * 3
    first = train_publishers(sc, trains, tiny_config, dp=True, seed=3)
    again = train_publishers(sc, trains, tiny_config, dp=True, seed=3)
    other = train_publishers(sc, trains, tiny_config, dp=True, seed=4)
    assert [m.input_features for m in first] == columns
    X = sc.subscriber.X
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert not np.allclose(first[0].predict_proba(X), other[0].predict_proba(X))


def test_publishers_trained_together_still_get_their_own_noise(
    hyperplane_scenario: HyperplaneScenario, tiny_config: MethodConfig
) -> None:
    sc = hyperplane_scenario(n_pub=1, rows=80, sub_rows=40)
    twin = sc.publishers[0]
    sc = replace(sc, publishers=[twin, twin])  # same rows, columns, model type and budget
    models = train_publishers(sc, [np.arange(80)] * 2, tiny_config, dp=True, seed=0)
    assert [type(m.estimator).__name__ for m in models] == ["DPMLPClassifier"] * 2
    X = sc.subscriber.X
    assert not np.allclose(models[0].predict_proba(X), models[1].predict_proba(X))


def test_non_private_publishers_have_no_budget(
    hyperplane_scenario: HyperplaneScenario, tiny_config: MethodConfig
) -> None:
    sc = with_learners(hyperplane_scenario(n_pub=2, rows=60, sub_rows=20), ["sgd_linear", "forest"])
    models = train_publishers(sc, [np.arange(60)] * 2, tiny_config, dp=False, seed=0)
    # sgd_linear has a non-private twin; forest falls back to Table 4's network without DP
    assert [type(m.estimator).__name__ for m in models] == ["LocalModel", "DPMLPClassifier"]
    assert type(models[0].estimator.estimator_).__name__ == "LogisticRegression"
    assert models[0].estimator.estimator_.max_iter == 1000
    assert all(m.estimator.epsilon_ == np.inf for m in models)
