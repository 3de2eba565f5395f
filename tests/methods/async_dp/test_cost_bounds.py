"""The cost of privacy: the bounds of Eq. 8–11 (Theorem 2) and their fitted constants."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pubsubml.errors import DataValidationError
from pubsubml.methods.async_dp.cost_bounds import (
    cost_of_privacy_bound,
    fit_alone_fitness,
    fit_cost_of_privacy,
    loglog_slope,
    theorem2_bound,
)


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
