"""What ``"auto"`` resolves to in a DP-SGD network, from public inputs only (pubsub-ml.txt §8), and
the privacy parameters' names."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from sklearn.base import clone

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.learners import (
    DPMLPClassifier,
    DPMLPRegressor,
    DPSGDLinearRegression,
    DPSGDLogisticRegression,
    dp_sgd_defaults,
)
from pubsubml.learners.dpsgd_hyperparameters import DEPRECATED, privacy_target
from pubsubml.privacy.accountants import DEFAULT_DELTA


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    return X, (X[:, 0] + rng.normal(0, 0.1, n) > X[:, 1]).astype(int)


# ---- the networks ------------------------------------------------------------------------------
def test_private_network_auto_takes_the_dp_defaults() -> None:
    X, y = _data(600, 0)
    clf = DPMLPClassifier(classes=[0, 1], hidden_layer_sizes=(8,), epsilon=1.0, random_state=0)

    clf.fit(X, y)

    expected = dp_sgd_defaults(600, 1.0, 1e-5, 4, model="mlp")
    assert clf.hyperparameters_ == expected
    assert (clf.hyperparameters_.batch_size, clf.steps_) == (200, 90)


def test_network_defaults_do_not_depend_on_the_private_rows() -> None:
    (Xa, ya), (Xb, yb) = _data(600, 0), _data(600, 1)
    params: dict[str, Any] = {
        "classes": [0, 1],
        "hidden_layer_sizes": (8,),
        "epsilon": 1.0,
        "random_state": 0,
    }

    a = DPMLPClassifier(**params).fit(Xa, ya)
    b = DPMLPClassifier(**params).fit(Xb, 1 - yb)

    assert a.hyperparameters_ == b.hyperparameters_
    assert a.privacy_events_ == b.privacy_events_


def test_non_private_network_auto_keeps_the_former_setting() -> None:
    X, y = _data(250, 0)

    reg = DPMLPRegressor(hidden_layer_sizes=(8,), epochs=2, dp=False, random_state=0).fit(X, y)

    assert (reg.hyperparameters_.batch_size, reg.hyperparameters_.learning_rate) == (100, 1e-3)
    assert reg.steps_ == 2 * math.ceil(250 / 100)


def test_explicit_learning_rate_behaves_exactly_as_before() -> None:
    X, y = _data(300, 0)
    params: dict[str, Any] = {
        "classes": [0, 1],
        "hidden_layer_sizes": (8,),
        "epochs": 3,
        "batch_size": 50,
        "learning_rate": 1e-2,
        "noise_multiplier": 1.0,
        "random_state": 0,
    }

    clf = DPMLPClassifier(**params).fit(X, y)

    assert clf.hyperparameters_.learning_rate == 1e-2
    assert (clf.sample_rate_, clf.steps_) == (50 / 300, 3 * 6)


def test_a_learning_rate_set_alone_keeps_the_former_batch_of_100() -> None:
    X, y = _data(600, 0)

    clf = DPMLPClassifier(
        classes=[0, 1], hidden_layer_sizes=(8,), epochs=2, learning_rate=1e-2, noise_multiplier=1.0
    ).fit(X, y)

    assert (clf.hyperparameters_.batch_size, clf.hyperparameters_.learning_rate) == (100, 1e-2)
    assert (clf.sample_rate_, clf.steps_) == (100 / 600, 2 * 6)


# ---- the privacy parameters' one name, and the former names of the networks --------------------
_FORMER = {"classes": [0, 1], "hidden_layer_sizes": (8,), "epochs": 2, "random_state": 0}


def test_former_names_warn_and_train_the_same_model() -> None:
    X, y = _data(300, 0)
    new = DPMLPClassifier(**_FORMER, epsilon=1.0, delta=1e-4, noise_seed=0).fit(X, y)
    old = DPMLPClassifier(**_FORMER, target_epsilon=1.0, target_delta=1e-4, noise_seed=0)

    with pytest.warns(FutureWarning) as caught:
        old.fit(X, y)

    assert sorted(str(w.message).split(" was")[0] for w in caught) == [
        "target_delta",
        "target_epsilon",
    ]

    old_weights, new_weights = old.module_.state_dict(), new.module_.state_dict()
    assert old_weights.keys() == new_weights.keys()
    for name, weight in old_weights.items():
        torch.testing.assert_close(weight, new_weights[name], rtol=0, atol=0)
    assert (old.epsilon_, old.delta_, old.noise_multiplier_) == (
        new.epsilon_,
        new.delta_,
        new.noise_multiplier_,
    )
    assert old.privacy_events_ == new.privacy_events_


def test_former_names_plan_the_same_events_with_a_warning() -> None:
    new = DPMLPRegressor(hidden_layer_sizes=(8,), epsilon=2.0, delta=1e-6)
    old = DPMLPRegressor(hidden_layer_sizes=(8,), target_epsilon=2.0, target_delta=1e-6)

    with pytest.warns(FutureWarning, match="renamed") as caught:
        planned = old.planned_privacy_events(500, 3)

    assert len(caught) == 2

    assert planned == new.planned_privacy_events(500, 3)


def test_the_new_names_do_not_warn() -> None:
    X, y = _data(300, 0)

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        DPMLPClassifier(**_FORMER, epsilon=1.0, delta=1e-4).fit(X, y)


def test_former_names_are_parameters_that_clone_and_get_params_keep() -> None:
    est = DPMLPClassifier(**_FORMER, target_epsilon=1.5)

    params = est.get_params()
    copy = clone(est)

    assert params["target_epsilon"] == 1.5 and params["epsilon"] is None
    assert params["target_delta"] == DEPRECATED
    assert copy.get_params() == params
    assert clone(DPMLPRegressor()).get_params()["target_epsilon"] == DEPRECATED
    assert est.set_params(target_epsilon=DEPRECATED, epsilon=0.5).get_params()["epsilon"] == 0.5


@pytest.mark.parametrize(
    "params",
    [
        {"epsilon": 1.0, "target_epsilon": 2.0},
        {"epsilon": 1.0, "delta": 1e-6, "target_delta": 1e-4},
    ],
)
def test_a_parameter_and_its_former_name_together_are_refused(params: dict[str, Any]) -> None:
    X, y = _data(300, 0)
    clf = DPMLPClassifier(**_FORMER, **params)

    with pytest.warns(FutureWarning), pytest.raises(InvalidPrivacyParameterError, match="former"):
        clf.fit(X, y)
    assert not hasattr(clf, "module_")


def test_privacy_target_takes_the_former_names_when_given() -> None:
    assert privacy_target(None, DEFAULT_DELTA, DEPRECATED, DEPRECATED) == (None, DEFAULT_DELTA)
    with pytest.warns(FutureWarning):
        assert privacy_target(None, DEFAULT_DELTA, 3.0, 1e-6) == (3.0, 1e-6)
    with pytest.warns(FutureWarning):
        assert privacy_target(None, 1e-6, DEPRECATED, 1e-6) == (None, 1e-6)


def test_every_dp_sgd_learner_names_its_target_epsilon_and_delta() -> None:
    for cls in (DPMLPClassifier, DPMLPRegressor, DPSGDLogisticRegression, DPSGDLinearRegression):
        params = cls().get_params()
        assert {"epsilon", "delta"} <= params.keys(), cls.__name__
