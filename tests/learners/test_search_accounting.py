"""plan_search: a private search's checks and price, fixed before any training."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.learners import DPSGDLinearRegression, DPSGDLogisticRegression
from pubsubml.learners.search_accounting import HeldOutSplit, n_rows, plan_search
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.repetitions import repeat_and_select_event

X = np.random.default_rng(0).random((100, 3))
Y = (X[:, 0] > X[:, 1]).astype(int)
LAW = {"mean_repetitions": 2.0, "shape": 1.0, "validation_fraction": 0.2}


def _plan(estimator: object = None, grid: object = None, **law: object) -> object:
    est = (
        DPSGDLogisticRegression(classes=[0, 1], accountant="rdp")
        if estimator is None
        else estimator
    )
    params = {**LAW, "score_noise_multiplier": 10.0, **law}
    return plan_search(est, {"learning_rate": [0.1, 0.2]} if grid is None else grid, X, Y, **params)


def test_the_price_is_one_repeat_and_select_event_of_one_run_and_its_score() -> None:
    plan = _plan()

    train = DPSGDLogisticRegression(classes=[0, 1], accountant="rdp").planned_privacy_events(80, 3)
    score = DPEvent(mechanism="gaussian", noise_multiplier=10.0)
    event = repeat_and_select_event([*train, score], mean=2.0, shape=1.0)
    assert (plan.train_events, plan.score_event, plan.event) == (train, score, event)
    assert plan.epsilon == compute_epsilon([event], 1e-5, backend="rdp")
    assert (plan.n_val, plan.bounds, plan.accountant) == (20, None, "rdp")
    assert [c["learning_rate"] for c in plan.candidates] == [0.1, 0.2]


def test_a_regressor_is_scored_on_its_public_target_bounds() -> None:
    reg = DPSGDLinearRegression(target_bounds=(0.0, 3.0))

    plan = plan_search(
        reg, {"learning_rate": [0.1]}, X, X.sum(1), score_noise_multiplier=5.0, **LAW
    )

    assert plan.bounds == (0.0, 3.0)
    with pytest.raises(ValueError, match="target_bounds"):
        plan_search(DPSGDLinearRegression(), {}, X, X.sum(1), score_noise_multiplier=5.0, **LAW)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"estimator": LogisticRegression()}, TypeError, "DP-SGD"),
        ({"grid": {"random_state": [0]}}, ValueError, "random_state"),
        ({"grid": {"epochs": [1, 2]}}, InvalidPrivacyParameterError, "same DP events"),
        ({"mean_repetitions": 0.5}, InvalidPrivacyParameterError, "mean_repetitions"),
        ({"shape": -1.0}, ValueError, "shape"),
        ({"validation_fraction": 1.0}, ValueError, "validation_fraction"),
        ({"score_noise_multiplier": 0.0}, ValueError, "score_noise_multiplier"),
    ],
)
def test_bad_searches_are_refused_before_training(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        _plan(**kwargs)


def test_the_held_out_split_follows_the_random_order() -> None:
    order = np.random.default_rng(1).permutation(n_rows(X))

    split = HeldOutSplit.draw(X, Y, order, 20)

    np.testing.assert_array_equal(split.X_val, X[order[:20]])
    np.testing.assert_array_equal(split.y_train, Y[order[20:]])
