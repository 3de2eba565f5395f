"""The fitness of asynchronous DP learning: θ* (Eq. 1), f over pooled data (Eq. 2) and ψ (§5)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.linear_model import Ridge

from pubsubml.methods.async_dp.fitness import (
    FitnessStatistics,
    optimal_parameters,
    relative_fitness,
)


def test_theta_star_matches_ridge(rng: np.random.Generator) -> None:
    X, y = rng.normal(size=(200, 4)), rng.normal(size=200)
    reg = 0.05
    stats = FitnessStatistics.from_data(X, y, reg=reg)
    ridge = Ridge(alpha=reg * len(y), fit_intercept=False).fit(X, y)
    np.testing.assert_allclose(optimal_parameters(stats, theta_max=10.0), ridge.coef_, atol=1e-10)
    assert float(relative_fitness(ridge.coef_, stats, ridge.coef_)) == pytest.approx(0.0, abs=1e-12)


def test_theta_star_on_the_box_is_the_constrained_minimum(rng: np.random.Generator) -> None:
    X = rng.normal(size=(100, 3))
    y = X @ np.array([3.0, -2.0, 0.1]) + 0.1 * rng.normal(size=100)
    stats = FitnessStatistics.from_data(X, y, reg=1e-3)
    theta = optimal_parameters(stats, theta_max=1.0)
    ref = minimize(lambda t: float(stats.value(t)), np.zeros(3), bounds=[(-1, 1)] * 3, method="L-BFGS-B",
                   options={"ftol": 1e-14, "gtol": 1e-12})  # fmt: skip
    np.testing.assert_allclose(theta, ref.x, atol=1e-6)
    assert np.abs(theta).max() == pytest.approx(1.0)


def test_pooled_statistics_equal_statistics_of_the_union(rng: np.random.Generator) -> None:
    parts = [(rng.normal(size=(n, 2)), rng.normal(size=n)) for n in (5, 17)]
    pooled = FitnessStatistics.pooled(
        [FitnessStatistics.from_data(X, y, reg=0.1) for X, y in parts]
    )
    union = FitnessStatistics.from_data(
        np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), reg=0.1
    )
    theta = rng.normal(size=2)
    assert float(pooled.value(theta)) == pytest.approx(float(union.value(theta)))
