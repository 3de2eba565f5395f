"""The owner-side gradient of Eq. 3 for linear regression, with per-example L1 clipping.

This is the exact (noise-free) part of a data owner's answer in Algorithm 1; it never leaves the
owner without the Laplace noise added by :func:`pubsubml.methods.async_dp.learner.answer_gradient_query`.

References
----------
async-dp-cost-of-privacy.txt §3 (Eq. 1–3, Assumption 2: Ξ bounds the per-example gradient norm),
Appendix A (sensitivity 2Ξ/n_i), §5.1.2 (linear regression with squared loss).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from pubsubml.errors import DataValidationError
from pubsubml.methods.async_dp.theory import check_positive, check_theta

__all__ = ["SquaredLossOracle"]


class SquaredLossOracle:
    """Q_i(D_i; θ) = (1/n_i) Σ clip₁(∇_θ (y − θᵀx)², Ξ) over one owner's private rows (Eq. 3).

    Parameters
    ----------
    X : array-like of shape (n_i, p)
    y : array-like of shape (n_i,)
    clip_norm : float
        Ξ: every per-example gradient is scaled to L1 norm at most Ξ.
    theta_max : float
        θ_max of Θ; queries outside Θ are refused.

    Attributes
    ----------
    n_records, n_features : int
    sensitivity : float
        2Ξ/n_i, the L1 sensitivity of the mean under replacing one record (Appendix A).
    clipping_inactive : bool
        True when no row can ever be clipped for any θ in Θ (2(|y_j| + θ_max‖x_j‖₁)‖x_j‖₁ ≤ Ξ for
        every row j); the gradient is then computed from X^T X and X^T y, with the same value.

    Raises
    ------
    DataValidationError
        On malformed or non-finite data.
    InvalidPrivacyParameterError
        On Ξ ≤ 0 or θ_max ≤ 0.

    Examples
    --------
    >>> oracle = SquaredLossOracle(np.eye(2), np.array([1.0, 0.0]), clip_norm=100.0, theta_max=1.0)
    >>> oracle.mean_gradient(np.zeros(2)).tolist(), oracle.clipping_inactive
    ([-1.0, 0.0], True)
    """

    def __init__(self, X: ArrayLike, y: ArrayLike, *, clip_norm: float, theta_max: float) -> None:
        try:
            inputs = np.asarray(X, dtype=np.float64)
            targets = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DataValidationError(f"X and y must be numeric: {exc}") from exc
        if inputs.ndim != 2 or inputs.shape[0] < 1 or inputs.shape[1] < 1:
            raise DataValidationError(
                f"X must have shape (n, p) with n, p >= 1, got {inputs.shape}"
            )
        if targets.shape != (inputs.shape[0],):
            raise DataValidationError(
                f"y must have shape ({inputs.shape[0]},), got {targets.shape}"
            )
        if not (np.all(np.isfinite(inputs)) and np.all(np.isfinite(targets))):
            raise DataValidationError("X and y must be finite")
        self.clip_norm = check_positive("clip_norm", clip_norm)
        self.theta_max = check_positive("theta_max", theta_max)
        self.n_records, self.n_features = inputs.shape
        self.sensitivity = 2.0 * self.clip_norm / self.n_records
        self._X = inputs
        self._y = targets
        self._l1 = np.abs(inputs).sum(axis=1)
        worst = 2.0 * (np.abs(targets) + self.theta_max * self._l1) * self._l1
        self.clipping_inactive = bool(np.all(worst <= self.clip_norm))
        if self.clipping_inactive:
            self._gram = inputs.T @ inputs / self.n_records
            self._moment = inputs.T @ targets / self.n_records

    def mean_gradient(self, theta: ArrayLike) -> np.ndarray:
        """The clipped mean gradient at θ (exact, noise-free: never release it as is).

        Parameters
        ----------
        theta : array-like of shape (p,) or (r, p)

        Returns
        -------
        ndarray of the same shape as ``theta``

        Raises
        ------
        DataValidationError
            On a malformed θ or one outside Θ.
        """
        point = check_theta(theta, self.n_features, self.theta_max)
        if self.clipping_inactive:
            return 2.0 * (point @ self._gram - self._moment)
        batch = np.atleast_2d(point)  # (r, p)
        residual = self._X @ batch.T - self._y[:, None]  # (n, r)
        norms = 2.0 * np.abs(residual) * self._l1[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(norms > self.clip_norm, self.clip_norm / norms, 1.0)
        grads = 2.0 * (self._X.T @ (factor * residual)).T / self.n_records  # (r, p)
        return grads.reshape(point.shape)
