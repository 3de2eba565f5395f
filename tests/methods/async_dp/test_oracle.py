"""Tests of pubsubml.methods.async_dp.oracle: the owner's clipped mean gradient of Eq. 3."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.methods.async_dp.oracle import SquaredLossOracle


def _reference(X: np.ndarray, y: np.ndarray, theta: np.ndarray, clip: float) -> np.ndarray:
    """Eq. 3 one row at a time: each gradient scaled to L1 norm at most Ξ, then the mean."""
    rows = []
    for x_j, y_j in zip(X, y, strict=True):
        g = -2.0 * (y_j - theta @ x_j) * x_j
        norm = np.abs(g).sum()
        rows.append(g * min(1.0, clip / norm) if norm > 0 else g)
    return np.mean(rows, axis=0)


def _data(seed: int, n: int = 30, p: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, p))
    return X, X @ rng.uniform(-1, 1, p) + rng.normal(0, 0.5, n)


def test_clipped_gradient_matches_row_by_row_reference() -> None:
    X, y = _data(0)
    oracle = SquaredLossOracle(X, y, clip_norm=0.8, theta_max=1.0)
    assert not oracle.clipping_inactive
    for theta in np.random.default_rng(1).uniform(-1, 1, (10, 3)):
        np.testing.assert_allclose(
            oracle.mean_gradient(theta), _reference(X, y, theta, 0.8), atol=1e-12
        )


@pytest.mark.parametrize("clip", [0.8, 1e6])
def test_a_batch_of_queries_equals_the_queries_one_by_one(clip: float) -> None:
    X, y = _data(2)
    oracle = SquaredLossOracle(X, y, clip_norm=clip, theta_max=1.0)
    assert oracle.clipping_inactive == (clip > 1.0)
    thetas = np.random.default_rng(3).uniform(-1, 1, (6, 3))
    batch = oracle.mean_gradient(thetas)
    assert batch.shape == (6, 3)
    for theta, row in zip(thetas, batch, strict=True):
        np.testing.assert_allclose(row, oracle.mean_gradient(theta), atol=1e-12)
        np.testing.assert_allclose(row, _reference(X, y, theta, clip), atol=1e-12)


def test_sensitivity_and_sizes() -> None:
    X, y = _data(4, n=40, p=5)
    oracle = SquaredLossOracle(X, y, clip_norm=3.0, theta_max=2.0)
    assert (oracle.n_records, oracle.n_features) == (40, 5)
    assert oracle.sensitivity == pytest.approx(2 * 3.0 / 40)


def test_clipping_is_inactive_exactly_when_no_row_can_reach_the_clip_norm() -> None:
    # One row x = (0.5, -0.5), y = 0.5: the largest L1 gradient over Θ = [-1, 1]² is
    # 2(|y| + θ_max‖x‖₁)‖x‖₁ = 2·1.5·1 = 3.
    X, y = np.array([[0.5, -0.5]]), np.array([0.5])
    assert SquaredLossOracle(X, y, clip_norm=3.0, theta_max=1.0).clipping_inactive
    tight = SquaredLossOracle(X, y, clip_norm=3.0 - 1e-9, theta_max=1.0)
    assert not tight.clipping_inactive
    # The worst θ reaches the bound, and the clipped gradient there has L1 norm Ξ.
    worst = np.array([-1.0, 1.0])
    assert np.abs(tight.mean_gradient(worst)).sum() == pytest.approx(3.0 - 1e-9)


def test_rows_with_zero_residual_give_a_finite_zero_gradient() -> None:
    # y = θᵀx exactly at θ = (0.5, 0.5): every per-example gradient is 0, with clipping active.
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = X @ np.array([0.5, 0.5])
    oracle = SquaredLossOracle(X, y, clip_norm=0.1, theta_max=1.0)
    assert not oracle.clipping_inactive
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grad = oracle.mean_gradient([0.5, 0.5])
    np.testing.assert_array_equal(grad, [0.0, 0.0])


@pytest.mark.parametrize(
    ("X", "y"),
    [
        (np.zeros(3), np.zeros(3)),  # X not 2-D
        (np.zeros((0, 2)), np.zeros(0)),  # no rows
        (np.zeros((3, 0)), np.zeros(3)),  # no features
        (np.zeros((3, 2)), np.zeros(2)),  # y too short
        (np.zeros((3, 2)), np.zeros((3, 1))),  # y not 1-D
        (np.array([[0.0, math.nan]]), np.zeros(1)),
        (np.zeros((1, 2)), np.array([math.inf])),
        ([["a", "b"]], [0.0]),
    ],
)
def test_malformed_data_is_refused(X: object, y: object) -> None:
    with pytest.raises(DataValidationError):
        SquaredLossOracle(X, y, clip_norm=1.0, theta_max=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(("clip", "theta_max"), [(0.0, 1.0), (1.0, -1.0), (math.inf, 1.0)])
def test_bad_privacy_parameters_are_refused(clip: float, theta_max: float) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        SquaredLossOracle(np.zeros((2, 2)), np.zeros(2), clip_norm=clip, theta_max=theta_max)


@pytest.mark.parametrize("theta", [[0.0, 1.5], [0.0], [[[0.0, 0.0]]], [math.nan, 0.0]])
def test_queries_outside_theta_or_malformed_are_refused(theta: object) -> None:
    oracle = SquaredLossOracle(np.eye(2), np.zeros(2), clip_norm=1.0, theta_max=1.0)
    with pytest.raises(DataValidationError):
        oracle.mean_gradient(theta)  # type: ignore[arg-type]
