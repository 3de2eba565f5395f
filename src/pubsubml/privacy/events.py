"""DP events: the description of one privacy-relevant release, independent of any accountant.

A :class:`DPEvent` records *what actually ran* (mechanism, noise multiplier, sample rate, number of
compositions) so that ε can be recomputed by an accountant at any time, by the releasing site, the
registry and any subscriber.  Events are plain JSON through pydantic.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pubsubml.errors import InvalidPrivacyParameterError

__all__ = ["DPEvent", "Mechanism"]

Mechanism = Literal["subsampled_gaussian", "gaussian", "laplace", "approx_dp"]


class DPEvent(BaseModel):
    """One DP release, self-composed ``count`` times.

    Parameters
    ----------
    mechanism : {"subsampled_gaussian", "gaussian", "laplace", "approx_dp"}
        ``subsampled_gaussian`` is a DP-SGD step: Poisson sampling with rate ``sample_rate`` then the
        Gaussian mechanism with ``noise_multiplier`` = σ / sensitivity.  ``gaussian`` and ``laplace``
        are single releases; for Laplace, ``noise_multiplier`` = scale b / L1 sensitivity.
        ``approx_dp`` is a mechanism known only by its (ε, δ) guarantee (e.g. a diffprivlib model).
    noise_multiplier : float, optional
        Noise scale relative to the sensitivity (Gaussian: σ/Δ₂, Laplace: b/Δ₁).
    sample_rate : float, default=1.0
        Poisson sampling probability q (only for ``subsampled_gaussian``).
    count : int, default=1
        Number of times the mechanism ran (e.g. DP-SGD steps).
    epsilon, delta : float, optional
        The guarantee of an ``approx_dp`` mechanism.

    Raises
    ------
    InvalidPrivacyParameterError
        On a non-positive noise multiplier, a sample rate outside (0, 1], a count below 1, or an
        ``approx_dp`` event with ε ≤ 0 or δ outside [0, 1).

    Examples
    --------
    >>> DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.01, count=100).count
    100
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mechanism: Mechanism
    noise_multiplier: float | None = Field(default=None)
    sample_rate: float = 1.0
    count: int = 1
    epsilon: float | None = None
    delta: float | None = None

    def __init__(self, **data: Any) -> None:
        # pydantic wraps errors raised in validators into ValidationError; surface the documented one.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidPrivacyParameterError(f"invalid DPEvent: {exc}") from exc

    @model_validator(mode="after")
    def _check(self) -> DPEvent:
        if self.count < 1:
            raise InvalidPrivacyParameterError(f"count must be >= 1, got {self.count}")
        if self.mechanism == "approx_dp":
            if self.epsilon is None or not self.epsilon > 0 or self.epsilon == float("inf"):
                raise InvalidPrivacyParameterError(
                    f"approx_dp event needs a finite epsilon > 0, got {self.epsilon}"
                )
            if self.delta is None or not 0.0 <= self.delta < 1.0:
                raise InvalidPrivacyParameterError(
                    f"approx_dp event needs delta in [0, 1), got {self.delta}"
                )
            return self
        if self.noise_multiplier is None or not 0 < self.noise_multiplier < float("inf"):
            raise InvalidPrivacyParameterError(
                f"{self.mechanism} event needs a finite noise_multiplier > 0, got {self.noise_multiplier}"
            )
        if not 0.0 < self.sample_rate <= 1.0:
            raise InvalidPrivacyParameterError(
                f"sample_rate must be in (0, 1], got {self.sample_rate}"
            )
        if self.mechanism != "subsampled_gaussian" and self.sample_rate != 1.0:
            raise InvalidPrivacyParameterError(
                f"sample_rate applies only to subsampled_gaussian, got {self.sample_rate}"
            )
        return self
