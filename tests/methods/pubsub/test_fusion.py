"""Tests of pubsubml.methods.pubsub.fusion: centred log-odds, the penalty choice, StackedFusion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit, logit, softmax
from sklearn.exceptions import NotFittedError

from pubsubml.methods.pubsub.fusion import (
    StackedFusion,
    centred_log_odds,
    choose_penalty,
    pooled_log_loss,
)


def _binary(p: np.ndarray) -> np.ndarray:
    return np.column_stack([1 - p, p])


def test_centred_log_odds_are_half_the_logit_for_two_classes() -> None:
    p = np.array([0.1, 0.5, 0.8])
    z = centred_log_odds(_binary(p))
    np.testing.assert_allclose(z[:, 1], logit(p) / 2)
    np.testing.assert_allclose(z[:, 0], -logit(p) / 2)
    # Centred over the classes; softmax of the centred log-probabilities gives them back.
    proba = np.random.default_rng(0).dirichlet([1, 2, 3], 20)
    proba = np.clip(proba, 1e-2, None) / np.clip(proba, 1e-2, None).sum(1, keepdims=True)
    z3 = centred_log_odds(proba)
    np.testing.assert_allclose(z3.sum(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(softmax(z3, axis=1), proba)


def test_centred_log_odds_floor_zero_probabilities() -> None:
    z = centred_log_odds(np.array([[0.0, 1.0]]), floor=1e-3)
    np.testing.assert_allclose(z[0], [math.log(1e-3) / 2, -math.log(1e-3) / 2])
    assert np.all(np.isfinite(centred_log_odds(np.array([[0.0, 0.0, 1.0]]))))


def test_choose_penalty_breaks_ties_towards_the_stronger_penalty() -> None:
    same = np.array([0.3, 0.5, 0.4])
    rows = {0.01: same.copy(), 1.0: same.copy(), math.inf: same + 1.0}
    assert choose_penalty(rows, "min") == 1.0
    assert choose_penalty(rows, "1se") == 1.0  # ∞ is worse on every row: not within one SE


def test_weights_amplify_an_underconfident_own_model() -> None:
    # The labels follow logit = 2·z_own: the unpenalised own weight must find a ≈ 2, which a
    # pool of probabilities could not.
    rng = np.random.default_rng(1)
    z = rng.normal(0, 1, 3000)
    y = (rng.random(3000) < expit(2 * z)).astype(int)
    own = centred_log_odds(_binary(expit(z)))  # columns ± z/2
    noise = centred_log_odds(rng.dirichlet([1, 1], 3000))
    f = StackedFusion(block_width=2, penalties=[0.0]).fit(np.hstack([own, noise]), y)
    assert f.penalty_ == 0.0 and not f.fallback_ and f.cv_losses_ == {}
    assert f.weights_[0] == pytest.approx(2.0, abs=0.2)
    assert abs(f.weights_[1]) < 0.1


def test_a_linear_layer_on_the_meta_features_gives_the_same_logits() -> None:
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 200)
    M = np.hstack([centred_log_odds(rng.dirichlet([1, 1, 1], 200)) for _ in range(3)])
    f = StackedFusion(block_width=3, penalties=[0.01], random_state=0).fit(M, y)
    assert f.coef_.shape == (3, 9) and f.classes_.tolist() == [0, 1, 2]
    raw = f.decision_function(M)
    np.testing.assert_allclose(raw, M @ f.coef_.T + f.intercept_, atol=1e-12)
    np.testing.assert_allclose(f.predict_proba(M), softmax(raw, axis=1))
    np.testing.assert_array_equal(f.predict(M), raw.argmax(axis=1))
    assert np.all(f.weights_ >= 0)


def test_regression_weights_are_non_negative_least_squares() -> None:
    # y = 0.7·own + 0.2·o₁ − 0.5·o₂ + 0.1: the negative weight is cut to 0, the rest refitted.
    rng = np.random.default_rng(3)
    out = rng.normal(size=(400, 3))
    y = out @ [0.7, 0.2, -0.5] + 0.1 + rng.normal(0, 0.01, 400)
    f = StackedFusion(task="regression", penalties=[0.0]).fit(out, y)
    assert 0.0 <= f.weights_[2] < 1e-9 and f.coef_.shape == (1, 3)
    design = np.column_stack([out[:, :2], np.ones(400)])
    reference = np.linalg.lstsq(design, y, rcond=None)[0]  # the fit with o₂ left out
    np.testing.assert_allclose(f.weights_[:2], reference[:2], atol=1e-6)
    np.testing.assert_allclose(f.intercept_, reference[2:], atol=1e-6)
    np.testing.assert_allclose(f.predict(out), out @ f.weights_ + f.intercept_[0])
    with pytest.raises(AttributeError):
        f.predict_proba(out)


def test_regression_with_an_infinite_penalty_is_the_own_output() -> None:
    rng = np.random.default_rng(4)
    out = rng.normal(size=(60, 2))
    f = StackedFusion(task="regression", penalties=[math.inf]).fit(out, rng.normal(size=60))
    assert f.fallback_ and f.weights_.tolist() == [1.0, 0.0] and f.intercept_.tolist() == [0.0]
    np.testing.assert_array_equal(f.predict(out), out[:, 0])


def test_too_few_rows_for_cross_validation_take_the_strongest_penalty() -> None:
    rng = np.random.default_rng(5)
    M = centred_log_odds(rng.dirichlet([1, 1], 8))
    f = StackedFusion(block_width=2, cv=5).fit(np.hstack([M, M]), np.array([0, 1] * 4))
    assert f.cv_losses_ == {} and math.isinf(f.penalty_) and f.fallback_


def test_without_an_own_model_the_infinite_penalty_is_left_out() -> None:
    rng = np.random.default_rng(6)
    M = centred_log_odds(rng.dirichlet([1, 1], 40))
    y = rng.integers(0, 2, 40)
    f = StackedFusion(block_width=2, own_first=False, penalties=[math.inf]).fit(M, y)
    assert f.penalty_ == 1.0 and not f.fallback_
    g = StackedFusion(block_width=2, own_first=False, penalties=[0.1, 1.0, math.inf], cv=2)
    g.fit(M, y)
    assert set(g.cv_losses_) == {0.1, 1.0}
    assert g.penalty_ == min(g.cv_losses_, key=lambda lam: g.cv_losses_[lam])


@pytest.mark.parametrize(
    ("kwargs", "M", "match"),
    [
        ({"task": "ranking"}, np.zeros((10, 2)), "task"),
        ({"block_width": 2, "penalties": [-1.0]}, np.zeros((10, 2)), "penalties"),
        ({"block_width": 1}, np.zeros((10, 2)), "block_width"),
        ({"block_width": 2, "penalties": [0.1]}, np.zeros((10, 3)), "blocks of width 2"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], M: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        StackedFusion(**kwargs).fit(M, np.array([0, 1] * 5))  # type: ignore[arg-type]


def test_an_unfitted_fusion_cannot_predict() -> None:
    with pytest.raises(NotFittedError):
        StackedFusion(block_width=2).predict(np.zeros((1, 2)))


def test_two_classes_pool_by_difference_with_the_loss_and_gradient_of_the_full_form() -> None:
    rng = np.random.default_rng(3)
    n, m = 40, 7
    Z = rng.normal(size=(n, m, 2))  # not centred: the difference form must not rely on it
    onehot = np.eye(2)[rng.integers(0, 2, n)]
    pen = np.r_[0.0, np.ones(m - 1)]
    full = pooled_log_loss(Z, onehot, 0.3, pen, difference=False)
    diff = pooled_log_loss(Z, onehot, 0.3, pen)  # the default for two classes

    for _ in range(5):
        theta = rng.normal(size=m + 2)
        (loss_f, grad_f), (loss_d, grad_d) = full(theta), diff(theta)
        assert loss_d == pytest.approx(loss_f, rel=1e-12)
        np.testing.assert_allclose(grad_d, grad_f, rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="two classes"):
        pooled_log_loss(
            rng.normal(size=(n, m, 3)), np.eye(3)[np.zeros(n, int)], 1.0, pen, difference=True
        )
