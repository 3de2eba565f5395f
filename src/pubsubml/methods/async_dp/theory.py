"""Pure math of asynchronous DP learning: Ξ, the Laplace scale, Π_Θ and the step sizes.

Imports numpy only (STYLE: pure math first, then state).

References
----------
async-dp-cost-of-privacy.txt §3 (Eq. 5–7, Assumption 2, Theorem 1), Appendix B (η = 1/(2N),
α_L = α_i/N = α/σ, α = ρ/T²).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.typing import ArrayLike

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError

__all__ = [
    "StepSizes",
    "check_count",
    "check_positive",
    "check_theta",
    "choose_rho",
    "gradient_norm_bound",
    "laplace_noise_scale",
    "project",
    "step_sizes",
]


def check_positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise InvalidPrivacyParameterError(f"{name} must be a number, got {value!r}")
    if not 0.0 < float(value) < math.inf:
        raise InvalidPrivacyParameterError(f"{name} must be finite and > 0, got {value}")
    return float(value)


def check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InvalidPrivacyParameterError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


def gradient_norm_bound(*, x_l1_bound: float, y_abs_bound: float, theta_max: float) -> float:
    """Ξ = sup over Θ and the public data domain of ‖∇_θ (y − θᵀx)²‖₁ (Assumption 2).

    ∇_θ ℓ = −2(y − θᵀx)x, and |y − θᵀx| ≤ |y| + θ_max‖x‖₁ on Θ = {‖θ‖∞ ≤ θ_max}, so
    Ξ = 2(y_max + θ_max·x₁)·x₁ with x₁ ≥ ‖x‖₁ and y_max ≥ |y| taken from public bounds.

    Raises
    ------
    InvalidPrivacyParameterError
        On a non-positive bound.

    Examples
    --------
    >>> gradient_norm_bound(x_l1_bound=2.0, y_abs_bound=1.0, theta_max=1.0)
    12.0
    """
    x1 = check_positive("x_l1_bound", x_l1_bound)
    y1 = check_positive("y_abs_bound", y_abs_bound)
    return 2.0 * (y1 + check_positive("theta_max", theta_max) * x1) * x1


def laplace_noise_scale(*, clip_norm: float, horizon: int, n_records: int, epsilon: float) -> float:
    """The Laplace scale 2ΞT/(n_i ε_i) of Theorem 1.

    Raises
    ------
    InvalidPrivacyParameterError
        On a non-positive argument.

    Examples
    --------
    >>> laplace_noise_scale(clip_norm=3.0, horizon=100, n_records=1000, epsilon=0.5)
    1.2
    """
    for name, count in (("horizon", horizon), ("n_records", n_records)):
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
            raise InvalidPrivacyParameterError(f"{name} must be an int >= 1, got {count!r}")
    return (
        2.0
        * check_positive("clip_norm", clip_norm)
        * horizon
        / (n_records * check_positive("epsilon", epsilon))
    )


def project(theta: ArrayLike, theta_max: float) -> np.ndarray:
    """Π_Θ: Euclidean projection onto Θ = {‖θ‖∞ ≤ θ_max} (coordinate-wise clipping).

    Examples
    --------
    >>> project(np.array([2.0, -0.5, -3.0]), 1.0).tolist()
    [1.0, -0.5, -1.0]
    """
    bound = check_positive("theta_max", theta_max)
    return np.clip(np.asarray(theta, dtype=np.float64), -bound, bound)


def check_theta(theta: ArrayLike, n_features: int, theta_max: float) -> np.ndarray:
    """θ as float64 of shape (p,) or (r, p), finite and inside Θ.

    Raises
    ------
    DataValidationError
        On a non-numeric, non-finite, wrongly shaped θ or one outside Θ.
    """
    try:
        point = np.asarray(theta, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataValidationError(f"theta must be numeric: {exc}") from exc
    if point.ndim not in (1, 2) or point.shape[-1] != n_features:
        raise DataValidationError(f"theta must have shape (p,) or (r, p) with p={n_features}")
    if not np.all(np.isfinite(point)):
        raise DataValidationError("theta contains NaN or infinite values")
    if np.any(np.abs(point) > theta_max):
        raise DataValidationError(f"theta lies outside Θ = {{‖θ‖∞ ≤ {theta_max:g}}}")
    return point


@dataclasses.dataclass(frozen=True)
class StepSizes:
    """Constant step sizes of Algorithm 1 (Appendix B).

    Attributes
    ----------
    alpha : float
        α = ρ/T².
    alpha_learner : float
        α_L = α/σ, the learner's step on its own cost f_L = (1 − ηN)g.
    alpha_owner : float
        α_i = N·α/σ, the step of every owner copy (Eq. 5: Nρ/(σT²)).
    eta : float
        η = 1/(2N), the share of the regularizer carried by each owner's cost f_i.
    """

    alpha: float
    alpha_learner: float
    alpha_owner: float
    eta: float


def step_sizes(*, n_owners: int, horizon: int, rho: float, strong_convexity: float) -> StepSizes:
    """The step sizes of Appendix B: η = 1/(2N), α_L = α_i/N = α/σ, α = ρ/T².

    With these choices α_L·σ_L = α_i·σ_i = α/2 and α_L·γ_L = α_i·γ_i = α/σ, so the constants
    δ_{α,σ} and δ_{α,γ} of Appendix B vanish.

    Raises
    ------
    InvalidPrivacyParameterError
        On N < 1, T < 1, ρ ≤ 0 or σ ≤ 0.

    Examples
    --------
    >>> s = step_sizes(n_owners=2, horizon=10, rho=1.0, strong_convexity=0.5)
    >>> s.alpha, s.alpha_learner, s.alpha_owner, s.eta
    (0.01, 0.02, 0.04, 0.25)
    """
    n = check_count("n_owners", n_owners)
    t = check_count("horizon", horizon)
    alpha = check_positive("rho", rho) / t**2
    sigma = check_positive("strong_convexity", strong_convexity)
    return StepSizes(
        alpha=alpha, alpha_learner=alpha / sigma, alpha_owner=n * alpha / sigma, eta=0.5 / n
    )


def choose_rho(
    *,
    curvature: float,
    n_owners: int,
    horizon: int,
    strong_convexity: float,
    contraction: float = 5.0,
) -> float:
    """ρ such that T iterations cover ``contraction`` units of gradient time at ``curvature``.

    On average one iteration moves the mean of the N + 1 models by (α/σ)/(N + 1) times the gradient
    of f (Eq. 5–7 with the steps of :func:`step_sizes`), so T iterations shrink an error along a
    direction of curvature h by about exp(−ρh/(σT(N + 1))).  Setting that exponent to ``contraction``
    gives ρ = contraction·σ·T·(N + 1)/h.  The stationary error due to the DP noise grows with ρ, so
    a small contraction trades residual optimization error for less noise.

    Parameters
    ----------
    curvature : float
        A *public* estimate h > 0 of the curvature of f (e.g. 2·λ_max(E[xxᵀ]) of a public reference
        sample, or of the known feature distribution); never a statistic of the owners' data.
    n_owners, horizon : int
        N and T.
    strong_convexity : float
        σ of the regularizer g.
    contraction : float, default=5.0

    Returns
    -------
    float
        ρ.

    Raises
    ------
    InvalidPrivacyParameterError
        On a non-positive parameter.

    Examples
    --------
    >>> choose_rho(curvature=2.0, n_owners=3, horizon=100, strong_convexity=0.01)
    10.0
    """
    h = check_positive("curvature", curvature)
    sigma = check_positive("strong_convexity", strong_convexity)
    n = check_count("n_owners", n_owners)
    t = check_count("horizon", horizon)
    return check_positive("contraction", contraction) * sigma * t * (n + 1) / h
