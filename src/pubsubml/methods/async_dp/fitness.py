"""The fitness of asynchronous DP learning: f, its optimum θ* and the relative fitness ψ.

f(θ) = λ‖θ‖² + (1/n) Σ (y − θᵀx)² (Eq. 2) over a data set, kept as sufficient statistics
(:class:`FitnessStatistics`, poolable over the owners' disjoint data); θ* minimizes it over the
box Θ = {‖θ‖∞ ≤ θ_max} (Eq. 1); ψ(θ) = f(θ)/f(θ*) − 1 is the relative fitness the cost of
privacy is measured in (§5).

References
----------
async-dp-cost-of-privacy.txt §2 (Eq. 1–2), §5 (relative fitness ψ, Fig. 4–6).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import lsq_linear

from pubsubml.errors import DataValidationError

__all__ = ["FitnessStatistics", "optimal_parameters", "relative_fitness"]


@dataclasses.dataclass(frozen=True)
class FitnessStatistics:
    """Sufficient statistics of f(θ) = λ‖θ‖² + (1/n) Σ (y − θᵀx)² over a data set (Eq. 2).

    Attributes
    ----------
    gram : ndarray of shape (p, p)
        XᵀX/n.
    moment : ndarray of shape (p,)
        Xᵀy/n.
    second : float
        yᵀy/n.
    n_records : int
    reg : float
        λ.

    Examples
    --------
    >>> stats = FitnessStatistics.from_data(np.ones((4, 1)), np.full(4, 2.0), reg=0.0)
    >>> float(stats.value(np.array([2.0])))
    0.0
    """

    gram: np.ndarray
    moment: np.ndarray
    second: float
    n_records: int
    reg: float

    @classmethod
    def from_data(cls, X: ArrayLike, y: ArrayLike, *, reg: float) -> FitnessStatistics:
        """Statistics of one data set.

        Raises
        ------
        DataValidationError
            On malformed or non-finite data, or λ < 0.
        """
        inputs = np.asarray(X, dtype=np.float64)
        targets = np.asarray(y, dtype=np.float64)
        if inputs.ndim != 2 or targets.shape != (inputs.shape[0],) or inputs.shape[0] < 1:
            raise DataValidationError("X must be (n, p) and y (n,) with n >= 1")
        if not (np.all(np.isfinite(inputs)) and np.all(np.isfinite(targets))):
            raise DataValidationError("X and y must be finite")
        if not 0.0 <= reg < math.inf:
            raise DataValidationError(f"reg must be finite and >= 0, got {reg}")
        n = inputs.shape[0]
        return cls(
            inputs.T @ inputs / n, inputs.T @ targets / n, float(targets @ targets / n), n, reg
        )

    @classmethod
    def pooled(cls, parts: Sequence[FitnessStatistics]) -> FitnessStatistics:
        """Statistics of the union of disjoint data sets (the fitness of Eq. 2 over ∪_i D_i).

        Raises
        ------
        DataValidationError
            On an empty list or parts with different λ or widths.
        """
        if not parts or len({(s.reg, s.gram.shape) for s in parts}) != 1:
            raise DataValidationError("pooled needs parts with the same reg and width")
        n = sum(s.n_records for s in parts)
        weights = [s.n_records / n for s in parts]
        return cls(
            np.sum([w * s.gram for w, s in zip(weights, parts, strict=True)], axis=0),
            np.sum([w * s.moment for w, s in zip(weights, parts, strict=True)], axis=0),
            float(sum(w * s.second for w, s in zip(weights, parts, strict=True))),
            n,
            parts[0].reg,
        )

    def value(self, theta: ArrayLike) -> np.ndarray:
        """f(θ) for θ of shape (..., p); returns shape (...)."""
        t = np.asarray(theta, dtype=np.float64)
        quad = np.einsum("...i,ij,...j->...", t, self.gram, t)
        return self.reg * np.sum(t * t, axis=-1) + quad - 2.0 * (t @ self.moment) + self.second


def optimal_parameters(stats: FitnessStatistics, *, theta_max: float) -> np.ndarray:
    """θ* = argmin over Θ = {‖θ‖∞ ≤ θ_max} of f (Eq. 1), the non-private optimum.

    The ridge solution (XᵀX/n + λI)θ = Xᵀy/n in closed form when it lies in Θ; otherwise the
    box-constrained least squares problem is solved exactly (bounded-variable least squares).

    Raises
    ------
    DataValidationError
        If f is not strictly convex (λ = 0 with a singular XᵀX).

    Examples
    --------
    >>> stats = FitnessStatistics.from_data(np.eye(2), np.array([1.0, 3.0]), reg=0.5)
    >>> optimal_parameters(stats, theta_max=5.0).tolist(), optimal_parameters(stats, theta_max=1.0).tolist()
    ([0.5, 1.5], [0.5, 1.0])
    """
    p = stats.gram.shape[0]
    hessian = stats.gram + stats.reg * np.eye(p)
    try:
        chol = np.linalg.cholesky(hessian)
    except np.linalg.LinAlgError as exc:
        raise DataValidationError("the fitness is not strictly convex (use reg > 0)") from exc
    theta = np.linalg.solve(hessian, stats.moment)
    if np.all(np.abs(theta) <= theta_max):
        return theta
    # θᵀHθ − 2bᵀθ = ‖Lᵀθ − L⁻¹b‖² − const with H = LLᵀ.
    target = np.linalg.solve(chol, stats.moment)
    result = lsq_linear(chol.T, target, bounds=(-theta_max, theta_max), method="bvls", tol=1e-12)
    return np.asarray(result.x, dtype=np.float64)


def relative_fitness(
    theta: ArrayLike, stats: FitnessStatistics, theta_star: ArrayLike
) -> np.ndarray:
    """ψ(θ) = f(θ)/f(θ*) − 1 (§5), for θ of shape (..., p).

    Examples
    --------
    >>> stats = FitnessStatistics.from_data(np.eye(2), np.array([1.0, 3.0]), reg=0.5)
    >>> float(relative_fitness(np.zeros(2), stats, np.array([0.5, 1.5])))
    1.0
    """
    return stats.value(theta) / float(stats.value(theta_star)) - 1.0
