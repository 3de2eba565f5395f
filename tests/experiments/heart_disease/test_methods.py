"""The models of the heart-disease benchmark: logistic models, own model, CUSTOMIZE, FL, scores."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.heart_disease.methods import (
    DELTA,
    SMOKE_TRAINING,
    TRAINING,
    ConstantClassifier,
    customize,
    fit_federated,
    fit_own,
    hospital_models,
    logistic,
    scores,
)
from pubsubml.experiments.heart_disease.splits import FLAMBY_SCHEMA, flamby_frames
from pubsubml.learners.dpsgd_linear import DPSGDLogisticRegression
from pubsubml.methods.pubsub.own_crossfit import CrossFitStore


class _Proba:
    def __init__(self, p: list[float]) -> None:
        self.p = np.asarray(p)

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        return np.column_stack([1 - self.p, self.p])


def test_the_full_training_is_the_linear_rules_100_steps_at_rate_0_2() -> None:
    assert TRAINING.steps == 100 and SMOKE_TRAINING.steps < 10
    assert TRAINING.learning_rate(FLAMBY_SCHEMA, 30) == pytest.approx(0.2)
    assert DELTA < 1 / 30


def test_scores_use_flambys_threshold_and_handle_one_class_tests() -> None:
    X = pd.DataFrame(index=range(4))
    s = scores(_Proba([0.5, 0.6, 0.4, 1.0]), X, np.array([1, 1, 0, 1]))
    assert s["correct"] == 3 and s["accuracy"] == 0.75  # p = 0.5 is "no disease"
    assert 0 <= s["auc"] <= 1 and math.isfinite(s["log_loss"])
    one = scores(_Proba([1.0, 0.0]), pd.DataFrame(index=range(2)), np.array([1, 1]))
    assert math.isnan(one["auc"]) and one["log_loss"] == pytest.approx(-np.log(1e-7) / 2)


def test_constant_classifier_predicts_the_training_shares() -> None:
    X = pd.DataFrame({"a": [0.0] * 4})
    model = ConstantClassifier().fit(X, [1, 1, 1, 0])
    np.testing.assert_allclose(model.predict_proba(X[:2]), [[0.25, 0.75]] * 2)
    assert model.predict(X).tolist() == [1] * 4


def test_logistic_models_with_and_without_dp() -> None:
    swiss = flamby_frames()["switzerland"]  # 30 rows, all with heart disease
    dp = logistic(FLAMBY_SCHEMA, epsilon=1.0, seed=0, n_rows=30)
    assert isinstance(dp, DPSGDLogisticRegression)
    assert dp.fit(swiss.X_train, swiss.y_train).epsilon_ <= 1.0 + 1e-9
    clear = logistic(FLAMBY_SCHEMA, epsilon=None, seed=0, training=SMOKE_TRAINING).fit(
        swiss.X_train, swiss.y_train
    )  # one class: trains on the public label set all the same
    assert clear.predict_proba(swiss.X_test).shape == (16, 2)


def test_hospital_models_are_black_boxes_over_each_hospitals_columns() -> None:
    frames = flamby_frames()
    data = {h: (s.X_train.drop(columns=["chol"]), s.y_train) for h, s in frames.items()}
    models = hospital_models(data, FLAMBY_SCHEMA, epsilon=None, seed=1, training=SMOKE_TRAINING)
    assert list(models) == list(frames)
    assert all("chol" not in m.input_features for m in models.values())
    proba = models["va"].predict_proba(frames["va"].X_test)  # extra columns are ignored
    assert proba.shape == (45, 2)


def test_a_one_class_subscriber_gets_a_constant_and_falls_back() -> None:
    swiss = flamby_frames()["switzerland"]
    own = fit_own(swiss.X_train, swiss.y_train, FLAMBY_SCHEMA, seed=0)
    assert isinstance(own, ConstantClassifier)
    model, fallback = customize(
        [], swiss.X_train, swiss.y_train, FLAMBY_SCHEMA, seed=0, store=CrossFitStore()
    )
    assert fallback and isinstance(model, ConstantClassifier)


def test_customize_fuses_the_published_models_with_the_own_one() -> None:
    frames = flamby_frames()
    data = {h: (s.X_train, s.y_train) for h, s in frames.items()}
    models = hospital_models(data, FLAMBY_SCHEMA, epsilon=1.0, seed=0, training=SMOKE_TRAINING)
    va = frames["va"]
    store = CrossFitStore()
    model, fallback = customize(
        [models[h] for h in ("cleveland", "hungary")],
        va.X_train,
        va.y_train,
        FLAMBY_SCHEMA,
        seed=0,
        store=store,
        kind="logistic",
    )
    assert isinstance(fallback, bool) and model.predict_proba(va.X_test).shape == (45, 2)


def test_federated_baselines_run_every_hospital_at_the_budget() -> None:
    frames = flamby_frames()
    clients = [(s.X_train, s.y_train) for s in frames.values()]
    fl = fit_federated(
        "FedAdam", clients, FLAMBY_SCHEMA, epsilon=1.0, seed=0, training=SMOKE_TRAINING
    )
    assert fl.epsilon_ <= 1.0 + 1e-9 and fl.participation_.tolist() == [2, 2, 2, 2]
    assert fl.tau == 1e-9 and fl.server_lr == 0.01 and fl.hidden_layer_sizes == ()
    clear = fit_federated(
        "FedProx", clients, FLAMBY_SCHEMA, epsilon=None, seed=0, training=SMOKE_TRAINING
    )
    assert math.isinf(clear.epsilon_) and clear.mu == 0.01
    with pytest.raises(ValueError, match="unknown federated"):
        fit_federated("Scaffold", clients, FLAMBY_SCHEMA, epsilon=None, seed=0)
