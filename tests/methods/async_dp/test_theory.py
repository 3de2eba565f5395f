"""Tests of pubsubml.methods.async_dp.theory: Ξ, the Laplace scale, Π_Θ, θ checks, step sizes."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.methods.async_dp.theory import (
    check_count,
    check_positive,
    check_theta,
    choose_rho,
    gradient_norm_bound,
    laplace_noise_scale,
    project,
    step_sizes,
)


def test_gradient_norm_bound_is_the_supremum_over_the_public_domain() -> None:
    # Prepare: x with ‖x‖₁ ≤ 1.5, |y| ≤ 0.8, θ in the box ‖θ‖∞ ≤ 0.6, p = 3.
    x1, y_max, theta_max = 1.5, 0.8, 0.6
    rng = np.random.default_rng(0)
    # Execute
    bound = gradient_norm_bound(x_l1_bound=x1, y_abs_bound=y_max, theta_max=theta_max)
    # Assert: no point of the domain exceeds it ...
    x = rng.uniform(-1, 1, (5000, 3))
    x *= (x1 * rng.random((5000, 1))) / np.abs(x).sum(axis=1, keepdims=True)
    y = rng.uniform(-y_max, y_max, 5000)
    theta = rng.uniform(-theta_max, theta_max, (5000, 3))
    grads = -2 * (y - np.sum(theta * x, axis=1))[:, None] * x
    assert np.abs(grads).sum(axis=1).max() <= bound
    # ... and a corner of the domain reaches it: x = (x1, 0, 0), y = y_max, θ = −θ_max.
    corner = np.array([x1, 0.0, 0.0])
    worst = -2 * (y_max - np.full(3, -theta_max) @ corner) * corner
    assert np.abs(worst).sum() == pytest.approx(bound)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"x_l1_bound": 0.0, "y_abs_bound": 1.0, "theta_max": 1.0},
        {"x_l1_bound": 1.0, "y_abs_bound": -1.0, "theta_max": 1.0},
        {"x_l1_bound": 1.0, "y_abs_bound": 1.0, "theta_max": math.inf},
    ],
)
def test_gradient_norm_bound_rejects_non_positive_bounds(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        gradient_norm_bound(**kwargs)


def test_laplace_scale_is_sensitivity_over_per_answer_epsilon() -> None:
    # b = (2Ξ/n) / (ε/T): doubling T doubles it, doubling n or ε halves it.
    base = laplace_noise_scale(clip_norm=2.0, horizon=10, n_records=50, epsilon=0.4)
    assert base == pytest.approx((2 * 2.0 / 50) / (0.4 / 10))
    assert laplace_noise_scale(
        clip_norm=2.0, horizon=20, n_records=50, epsilon=0.4
    ) == pytest.approx(2 * base)
    assert laplace_noise_scale(
        clip_norm=2.0, horizon=10, n_records=100, epsilon=0.8
    ) == pytest.approx(base / 4)
    numpy_scalars: dict[str, Any] = {
        "horizon": np.int64(10),
        "n_records": np.int32(50),
        "epsilon": np.float32(0.4),
    }
    assert laplace_noise_scale(clip_norm=2.0, **numpy_scalars) == pytest.approx(base)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"horizon": True},
        {"horizon": 0},
        {"horizon": 2.0},
        {"n_records": 0},
        {"n_records": "50"},
        {"epsilon": 0.0},
        {"epsilon": math.nan},
        {"clip_norm": -1.0},
    ],
)
def test_laplace_scale_rejects_bad_arguments(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"clip_norm": 1.0, "horizon": 5, "n_records": 10, "epsilon": 1.0}
    with pytest.raises(InvalidPrivacyParameterError):
        laplace_noise_scale(**(args | kwargs))  # type: ignore[arg-type]


def test_projection_is_the_nearest_point_of_the_box() -> None:
    rng = np.random.default_rng(1)
    theta = rng.normal(0, 2, (200, 4))
    original = theta.copy()
    proj = project(theta, 0.7)
    np.testing.assert_array_equal(theta, original)  # the input is left alone
    assert np.abs(proj).max() <= 0.7
    np.testing.assert_array_equal(project(proj, 0.7), proj)  # idempotent
    # Nearest point: no point of the box is closer to θ than Π_Θ(θ).
    others = rng.uniform(-0.7, 0.7, (500, 4))
    for t, p in zip(theta[:20], proj[:20], strict=True):
        assert np.linalg.norm(t - p) <= np.linalg.norm(t - others, axis=1).min() + 1e-12
    with pytest.raises(InvalidPrivacyParameterError):
        project(theta, 0.0)


def test_check_theta_accepts_points_and_batches_inside_the_box() -> None:
    one = check_theta([1.0, -1.0], 2, 1.0)  # the border belongs to Θ
    many = check_theta(np.zeros((3, 2), dtype=np.float32), 2, 1.0)
    assert one.dtype == many.dtype == np.float64
    assert one.shape == (2,) and many.shape == (3, 2)


@pytest.mark.parametrize(
    "theta",
    [
        [0.0, 0.0, 0.0],  # wrong width
        np.zeros((2, 2, 2)),  # too many axes
        0.5,  # a scalar
        [0.0, math.inf],
        [math.nan, 0.0],
        [1.0 + 1e-9, 0.0],  # just outside Θ
        ["a", "b"],
    ],
)
def test_check_theta_rejects_bad_points(theta: object) -> None:
    with pytest.raises(DataValidationError):
        check_theta(theta, 2, 1.0)  # type: ignore[arg-type]


def test_check_positive_and_check_count_validate_types_and_ranges() -> None:
    half: Any = np.float32(0.5)
    four: Any = np.int64(4)
    assert check_positive("x", half) == pytest.approx(0.5)
    assert type(check_positive("x", 3)) is float
    assert check_count("n", four) == 4 and type(check_count("n", four)) is int
    for bad in (True, 0, -1.0, math.inf, math.nan, "1", None):
        with pytest.raises(InvalidPrivacyParameterError, match="x"):
            check_positive("x", bad)  # type: ignore[arg-type]
    for bad_count in (False, 0, -2, 1.0, "3"):
        with pytest.raises(InvalidPrivacyParameterError, match="n must be"):
            check_count("n", bad_count)  # type: ignore[arg-type]


@pytest.mark.parametrize(("n", "t", "rho", "sigma"), [(1, 1, 1.0, 1.0), (5, 37, 0.3, 2e-3)])
def test_step_sizes_follow_appendix_b(n: int, t: int, rho: float, sigma: float) -> None:
    s = step_sizes(n_owners=n, horizon=t, rho=rho, strong_convexity=sigma)
    assert s.alpha * t**2 == pytest.approx(rho)
    assert s.alpha_learner * sigma == pytest.approx(s.alpha)
    assert s.alpha_owner == pytest.approx(n * s.alpha_learner)
    assert 2 * n * s.eta == pytest.approx(1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_owners": 0},
        {"horizon": 1.5},
        {"rho": 0.0},
        {"strong_convexity": -1.0},
    ],
)
def test_step_sizes_reject_bad_parameters(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"n_owners": 2, "horizon": 3, "rho": 1.0, "strong_convexity": 1.0}
    with pytest.raises(InvalidPrivacyParameterError):
        step_sizes(**(args | kwargs))  # type: ignore[arg-type]


def test_choose_rho_sets_the_contraction_exponent() -> None:
    # exp(−ρh/(σT(N + 1))) must equal exp(−contraction) for every combination.
    for h, n, t, sigma, c in itertools.product((0.1, 3.0), (1, 4), (10, 250), (1e-3, 0.5), (1, 8)):
        rho = choose_rho(curvature=h, n_owners=n, horizon=t, strong_convexity=sigma, contraction=c)
        assert rho * h / (sigma * t * (n + 1)) == pytest.approx(c)
    with pytest.raises(InvalidPrivacyParameterError, match="curvature"):
        choose_rho(curvature=0.0, n_owners=1, horizon=1, strong_convexity=1.0)
    with pytest.raises(InvalidPrivacyParameterError, match="contraction"):
        choose_rho(curvature=1.0, n_owners=1, horizon=1, strong_convexity=1.0, contraction=-1.0)
