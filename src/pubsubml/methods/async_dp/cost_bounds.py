"""The cost of privacy of asynchronous DP learning: Theorem 2's bounds and their fitted constants.

The finite-horizon bound of Eq. 8–9 and its large-horizon form Eq. 10–11, written in the privacy
term S = Σ_i 1/(n²ε_i²); the constants c̄1, c̄2 fitted to measured relative fitness (and their
dependence on the number of owners N), and the fitness of one owner's non-private model alone,
which the forecast of §6 compares the collaboration with.

References
----------
async-dp-cost-of-privacy.txt §4 (Theorem 2, Eq. 8–11), Appendix B (the constants), §5 (Fig. 10:
the fitted bound), §6 (forecasts for a data market).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import nnls

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError

__all__ = [
    "cost_of_privacy_bound",
    "fit_alone_fitness",
    "fit_cost_of_privacy",
    "fit_owner_scaling",
    "loglog_slope",
    "privacy_term",
    "theorem2_bound",
]


def _sizes_and_budgets(n_records: ArrayLike, epsilons: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.atleast_1d(np.asarray(n_records, dtype=np.float64))
    budgets = np.broadcast_to(np.asarray(epsilons, dtype=np.float64), sizes.shape)
    if sizes.ndim != 1 or np.any(sizes < 1) or not np.all(np.isfinite(sizes)):
        raise InvalidPrivacyParameterError("n_records must be a list of sizes >= 1")
    if np.any(~(budgets > 0)) or np.any(np.isnan(budgets)):
        raise InvalidPrivacyParameterError("every epsilon must be > 0")
    return sizes, budgets


def privacy_term(n_records: ArrayLike, epsilons: ArrayLike) -> float:
    """S = Σ_i 1/(n² ε_i²) with n = Σ_i n_i, the quantity Eq. 10–11 are written in.

    Examples
    --------
    >>> privacy_term([10, 10], [1.0, 1.0])
    0.005
    """
    sizes, budgets = _sizes_and_budgets(n_records, epsilons)
    total = sizes.sum()
    return float(np.sum(1.0 / (total**2 * budgets**2)))


def theorem2_bound(
    n_records: ArrayLike, epsilons: ArrayLike, *, horizon: int, c1: float, c2: float
) -> float:
    """The finite-horizon bound of Eq. 8 (or Eq. 9 with primed constants).

    c1·√(1/T² + N·Σ_i (2√2/(nε_i))²) + c2·(1/T² + N·Σ_i (2√2/(nε_i))²).  The factor 2√2 comes from
    the Laplace noise's standard deviation √2·2ΞT/(n_iε_i) weighted by n_i/n (Appendix B), with Ξ
    absorbed into the constants (the proof bounds Ξ/(Ξ_g + Ξ) by 1).

    Notes
    -----
    The extracted text of Eq. 8 is partly garbled; this is its reading that agrees with the stated
    constants of Eq. 10–11 (c̄1 = √(8N)c1, c̄2 = 8N·c2), to which it reduces as T → ∞.

    Examples
    --------
    >>> round(theorem2_bound([10, 10], [1.0, 1.0], horizon=10**6, c1=0.0, c2=1.0), 6)
    0.08
    """
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise InvalidPrivacyParameterError(f"horizon must be an int >= 1, got {horizon!r}")
    sizes, _ = _sizes_and_budgets(n_records, epsilons)
    inner = 1.0 / horizon**2 + 8.0 * sizes.size * privacy_term(n_records, epsilons)
    return c1 * math.sqrt(inner) + c2 * inner


def cost_of_privacy_bound(
    n_records: ArrayLike, epsilons: ArrayLike, *, c1: float, c2: float
) -> float:
    """The large-horizon bound of Eq. 10–11: c̄1·√S + c̄2·S with S = Σ_i 1/(n²ε_i²).

    Parameters
    ----------
    n_records : array-like of shape (N,)
        n_i of every owner.
    epsilons : float or array-like of shape (N,)
        ε_i.
    c1, c2 : float
        c̄1, c̄2 ≥ 0 (fitted with :func:`fit_cost_of_privacy`).

    Examples
    --------
    >>> round(cost_of_privacy_bound([100, 100, 100], 1.0, c1=0.0, c2=9.0e3), 9)
    0.3
    """
    s = privacy_term(n_records, epsilons)
    return c1 * math.sqrt(s) + c2 * s


def _nonnegative_fit(columns: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Non-negative least squares in relative error: rows divided by the target."""
    if columns.shape[0] != target.shape[0] or target.shape[0] < columns.shape[1]:
        raise DataValidationError("need at least as many measurements as constants")
    if np.any(~(target > 0)) or not np.all(np.isfinite(target)) or not np.all(np.isfinite(columns)):
        raise DataValidationError("measurements must be finite and > 0")
    coef, _ = nnls(columns / target[:, None], np.ones_like(target))
    return np.asarray(coef, dtype=np.float64)


def fit_cost_of_privacy(terms: ArrayLike, psi: ArrayLike) -> tuple[float, float]:
    """Fit c̄1, c̄2 ≥ 0 of Eq. 11 to measured mean relative fitness ψ at privacy terms S.

    Minimizes Σ ((c̄1√S + c̄2 S − ψ)/ψ)² (relative error, since ψ spans decades).

    Raises
    ------
    DataValidationError
        On fewer than two points, or non-positive values.

    Examples
    --------
    >>> s = np.array([1e-4, 1e-3, 1e-2])
    >>> [round(c, 6) for c in fit_cost_of_privacy(s, 0.5 * np.sqrt(s) + 3.0 * s)]
    [0.5, 3.0]
    """
    s = np.asarray(terms, dtype=np.float64).ravel()
    target = np.asarray(psi, dtype=np.float64).ravel()
    if np.any(~(s > 0)):
        raise DataValidationError("privacy terms must be > 0")
    c1, c2 = _nonnegative_fit(np.column_stack([np.sqrt(s), s]), target)
    return float(c1), float(c2)


def fit_owner_scaling(
    terms: ArrayLike, psi: ArrayLike, n_owners: ArrayLike, *, exponents: ArrayLike | None = None
) -> tuple[float, float, float]:
    """Fit ψ ≈ N^γ·(c̄1√S + c̄2 S): Eq. 11 with constants that depend on the number of owners N.

    Theorem 2 holds "for any N" with constants that grow with N (Appendix B: c̄2 = 8N·c2 and
    c2 ∝ N²√(N + 1)); one forecast across N needs that dependence, modelled here as N^γ.  γ is
    chosen on a grid, and c̄1, c̄2 ≥ 0 by non-negative least squares in relative error.

    Returns
    -------
    (c1, c2, gamma) : tuple of float

    Examples
    --------
    >>> s, n = np.array([1e-4, 1e-3, 1e-2, 1e-3]), np.array([2, 2, 4, 8])
    >>> [round(c, 6) for c in fit_owner_scaling(s, n**1.5 * (2.0 * s), n)]
    [0.0, 2.0, 1.5]
    """
    s = np.asarray(terms, dtype=np.float64).ravel()
    owners = np.asarray(n_owners, dtype=np.float64).ravel()
    target = np.asarray(psi, dtype=np.float64).ravel()
    if np.any(~(s > 0)) or np.any(owners < 1) or owners.shape != s.shape:
        raise DataValidationError(
            "privacy terms must be > 0 and n_owners >= 1, one per measurement"
        )
    grid = (
        np.linspace(-1.0, 4.0, 501)
        if exponents is None
        else np.asarray(exponents, dtype=np.float64)
    )
    best: tuple[float, float, float, float] | None = None
    for gamma in grid:
        columns = owners[:, None] ** gamma * np.column_stack([np.sqrt(s), s])
        c1, c2 = _nonnegative_fit(columns, target)
        error = float(np.sum(((columns @ [c1, c2]) / target - 1.0) ** 2))
        if best is None or error < best[0] - 1e-15:
            best = (error, float(c1), float(c2), round(float(gamma), 10))
    assert best is not None
    return best[1], best[2], best[3]


def fit_alone_fitness(
    n_records: ArrayLike, n_owners: ArrayLike, psi: ArrayLike
) -> tuple[float, float]:
    """Fit ψ(θ*_1) ≈ (a/n_1 + b)(1 − 1/N): the non-private model trained on one owner's data.

    a/n_1 is the estimation error of a model fitted on n_1 records, b the mismatch between one
    owner's data and the pool; both vanish for N = 1, where θ*_1 = θ*.

    Examples
    --------
    >>> n, big_n = np.array([1e3, 1e4, 1e3]), np.array([2, 4, 8])
    >>> [round(c, 6) for c in fit_alone_fitness(n, big_n, (50 / n + 0.1) * (1 - 1 / big_n))]
    [50.0, 0.1]
    """
    sizes = np.asarray(n_records, dtype=np.float64).ravel()
    owners = np.asarray(n_owners, dtype=np.float64).ravel()
    target = np.asarray(psi, dtype=np.float64).ravel()
    if np.any(owners < 2):
        raise DataValidationError("fit_alone_fitness needs N >= 2 (ψ is 0 for N = 1)")
    share = 1.0 - 1.0 / owners
    a, b = _nonnegative_fit(np.column_stack([share / sizes, share]), target)
    return float(a), float(b)


def loglog_slope(x: ArrayLike, y: ArrayLike) -> float:
    """Least-squares slope of log y against log x.

    Examples
    --------
    >>> round(loglog_slope([1, 10, 100], [1, 1e-2, 1e-4]), 6)
    -2.0
    """
    lx = np.log(np.asarray(x, dtype=np.float64))
    ly = np.log(np.asarray(y, dtype=np.float64))
    return float(np.polyfit(lx, ly, 1)[0])
