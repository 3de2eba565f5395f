"""Cost of privacy of asynchronous DP learning: relative fitness, Theorem 2's bound and its fit.

Pure math first (fitness, θ*, ψ, the bounds of Eq. 8–11, the fits), then the fitted model used for
the collaboration forecast of §6 (:class:`CostOfPrivacyModel`, stored as JSON, never pickled).

References
----------
async-dp-cost-of-privacy.txt §4 (Theorem 2, Eq. 8–11), §5 (relative fitness ψ(θ) = f(θ)/f(θ*) − 1,
Fig. 4–6, 10), §6 (forecasts for a data market).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from pydantic import BaseModel, ConfigDict, ValidationError
from scipy.optimize import lsq_linear, nnls

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError

__all__ = [
    "DEFAULT_MODEL_RESOURCE",
    "CostOfPrivacyModel",
    "FitnessStatistics",
    "Forecast",
    "cost_of_privacy_bound",
    "default_model_path",
    "fit_alone_fitness",
    "fit_cost_of_privacy",
    "fit_owner_scaling",
    "loglog_slope",
    "optimal_parameters",
    "privacy_term",
    "relative_fitness",
    "theorem2_bound",
]

#: File name of the fitted model shipped in ``pubsubml.methods``.
DEFAULT_MODEL_RESOURCE = "forecast.json"


def default_model_path() -> Path:
    """Where the shipped forecast model lives (``pubsubml/methods/async_dp/forecast.json``).

    Written by ``pubsubml bench async-dp-calibrate`` at full size and read by
    :meth:`CostOfPrivacyModel.load_default` (§6: forecasts for a data market).

    Examples
    --------
    >>> default_model_path().name
    'forecast.json'
    """
    return Path(str(resources.files("pubsubml.methods.async_dp").joinpath(DEFAULT_MODEL_RESOURCE)))


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


@dataclasses.dataclass(frozen=True)
class Forecast:
    """Predicted relative fitness of a collaboration and of one owner alone.

    Attributes
    ----------
    psi_collaboration : float
        Predicted E ψ(θ_L,T) of Algorithm 1 (Eq. 11 with fitted constants).
    psi_alone : float
        Predicted ψ(θ*_1) of a non-private model trained on one owner's data.
    pays : bool
        ``psi_collaboration < psi_alone``: joining is expected to give a better model.
    extrapolated : bool
        True if the query lies outside the calibration ranges.
    """

    psi_collaboration: float
    psi_alone: float
    pays: bool
    extrapolated: bool


class CostOfPrivacyModel(BaseModel):
    """Fitted constants of the cost-of-privacy bound and of the alone baseline (JSON).

    Parameters
    ----------
    c1, c2 : float
        c̄1, c̄2 of Eq. 11 for ψ of the collaboration.
    owner_exponent : float, default=0.0
        γ of :func:`fit_owner_scaling`: the constants scale as N^γ (0: the same for every N).
    alone_a, alone_b : float
        a, b of :func:`fit_alone_fitness`.
    horizon : int
        T the constants were measured at.
    calibration : dict
        How the constants were produced (data, Ξ, λ, θ_max, ρ rule, ranges, command).

    Examples
    --------
    >>> model = CostOfPrivacyModel(c1=0.0, c2=1e5, alone_a=10.0, alone_b=0.0, horizon=1000,
    ...                            calibration={"n_records": [1e3, 1e5], "epsilon": [0.1, 10],
    ...                                         "n_owners": [2, 10]})
    >>> model.forecast(n_owners=5, n_records=10_000, epsilon=1.0).pays
    True
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    c1: float
    c2: float
    owner_exponent: float = 0.0
    alone_a: float
    alone_b: float
    horizon: int
    calibration: dict[str, Any]

    def predict_collaboration(self, *, n_owners: int, n_records: float, epsilon: float) -> float:
        """N^γ·(c̄1√S + c̄2 S) (Eq. 11) for N owners of n_i = n records each with ε_i = ε."""
        bound = cost_of_privacy_bound([n_records] * n_owners, epsilon, c1=self.c1, c2=self.c2)
        return float(n_owners**self.owner_exponent * bound)

    def predict_alone(self, *, n_owners: int, n_records: float) -> float:
        """(a/n_1 + b)(1 − 1/N)."""
        return (self.alone_a / n_records + self.alone_b) * (1.0 - 1.0 / n_owners)

    def forecast(self, *, n_owners: int, n_records: int, epsilon: float) -> Forecast:
        """Forecast ψ of joining N owners of n records each at budget ε vs staying alone (§6).

        Raises
        ------
        InvalidPrivacyParameterError
            On N < 1, n < 1 or ε ≤ 0.
        """
        if isinstance(n_owners, bool) or not isinstance(n_owners, int) or n_owners < 1:
            raise InvalidPrivacyParameterError(f"n_owners must be an int >= 1, got {n_owners!r}")
        if not n_records >= 1 or not 0 < epsilon < math.inf:
            raise InvalidPrivacyParameterError("n_records must be >= 1 and epsilon finite and > 0")
        collab = self.predict_collaboration(n_owners=n_owners, n_records=n_records, epsilon=epsilon)
        alone = self.predict_alone(n_owners=n_owners, n_records=n_records)
        ranges = {"n_owners": n_owners, "n_records": n_records, "epsilon": epsilon}
        outside = False
        for key, value in ranges.items():
            lo_hi = self.calibration.get(key)
            if isinstance(lo_hi, list | tuple) and len(lo_hi) == 2:
                outside |= not float(lo_hi[0]) <= float(value) <= float(lo_hi[1])
        return Forecast(collab, alone, bool(collab < alone), outside)

    def to_json(self) -> str:
        """Indented JSON text."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> CostOfPrivacyModel:
        """Parse :meth:`to_json` output.

        Raises
        ------
        DataValidationError
            On malformed JSON or fields.
        """
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise DataValidationError(f"invalid cost-of-privacy model JSON: {exc}") from exc

    @classmethod
    def load_default(cls) -> CostOfPrivacyModel:
        """The model shipped with the package (``pubsubml/methods/async_dp/forecast.json``).

        Raises
        ------
        DataValidationError
            If the file is missing or malformed.
        """
        try:
            text = (
                resources.files("pubsubml.methods.async_dp")
                .joinpath(DEFAULT_MODEL_RESOURCE)
                .read_text()
            )
        except FileNotFoundError as exc:
            raise DataValidationError(
                f"{DEFAULT_MODEL_RESOURCE} is missing; run `pubsubml bench async-dp-calibrate`"
            ) from exc
        return cls.from_json(text)
