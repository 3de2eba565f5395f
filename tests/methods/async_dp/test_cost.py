"""Cost of privacy: θ*, ψ, the bounds of Eq. 8–11, their fit and the forecast model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.linear_model import Ridge

from pubsubml.errors import DataValidationError
from pubsubml.methods.async_dp.cost import (
    CostOfPrivacyModel,
    FitnessStatistics,
    cost_of_privacy_bound,
    fit_alone_fitness,
    fit_cost_of_privacy,
    loglog_slope,
    optimal_parameters,
    relative_fitness,
    theorem2_bound,
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


def test_finite_horizon_bound_tends_to_eq_11() -> None:
    sizes, eps, n_owners = [1000, 2000, 500], [0.5, 1.0, 2.0], 3
    c1, c2 = 0.7, 3.0
    limit = cost_of_privacy_bound(sizes, eps, c1=math.sqrt(8 * n_owners) * c1, c2=8 * n_owners * c2)
    assert theorem2_bound(sizes, eps, horizon=10**9, c1=c1, c2=c2) == pytest.approx(limit, rel=1e-9)
    assert theorem2_bound(sizes, eps, horizon=10, c1=c1, c2=c2) > limit


def test_bound_scales_as_inverse_square_of_n_and_epsilon() -> None:
    n = np.array([1e3, 1e4, 1e5])
    values = [cost_of_privacy_bound([k] * 3, 1.0, c1=0.0, c2=5.0) for k in n]
    assert loglog_slope(n, values) == pytest.approx(-2.0)
    eps = np.array([0.1, 1.0, 10.0])
    values = [cost_of_privacy_bound([100] * 3, e, c1=0.0, c2=5.0) for e in eps]
    assert loglog_slope(eps, values) == pytest.approx(-2.0)


def test_fits_recover_known_constants() -> None:
    s = np.logspace(-12, -6, 7)
    assert fit_cost_of_privacy(s, 2e3 * np.sqrt(s) + 4e7 * s) == pytest.approx((2e3, 4e7), rel=1e-6)
    n, owners = np.array([1e3, 1e4, 3e3, 1e5]), np.array([2, 5, 10, 3])
    psi = (40.0 / n + 0.02) * (1 - 1 / owners)
    assert fit_alone_fitness(n, owners, psi) == pytest.approx((40.0, 0.02), rel=1e-6)
    with pytest.raises(DataValidationError):
        fit_cost_of_privacy([1e-6], [0.0])


def test_model_json_round_trip_and_forecast() -> None:
    model = CostOfPrivacyModel(c1=0.0, c2=1e9, alone_a=100.0, alone_b=0.05, horizon=1000,
                               calibration={"n_owners": [2, 20], "n_records": [1e3, 1e5], "epsilon": [1, 100]})  # fmt: skip
    again = CostOfPrivacyModel.from_json(model.to_json())
    assert again == model
    good = model.forecast(n_owners=10, n_records=10_000, epsilon=50.0)
    bad = model.forecast(n_owners=10, n_records=10_000, epsilon=1.0)
    assert good.pays and not bad.pays and good.psi_alone == pytest.approx((0.01 + 0.05) * 0.9)
    assert (
        not good.extrapolated
        and model.forecast(n_owners=50, n_records=10_000, epsilon=1.0).extrapolated
    )
    with pytest.raises(DataValidationError):
        CostOfPrivacyModel.from_json('{"c1": 1}')


def test_shipped_model_loads() -> None:
    model = CostOfPrivacyModel.load_default()
    assert model.horizon == 1000 and model.c1 >= 0 and model.c2 >= 0
    assert model.calibration["command"] == "pubsubml bench async-dp-calibrate"
