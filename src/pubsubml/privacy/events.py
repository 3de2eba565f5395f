"""DP events: the description of one privacy-relevant release, independent of any accountant.

A :class:`DPEvent` records *what actually ran* (mechanism, noise multiplier, sample rate, number of
compositions) so that ε can be recomputed by an accountant at any time, by the releasing site, the
registry and any subscriber.  Events are plain JSON through pydantic.

A ``repeat_and_select`` event holds other events: a randomized selection that repeats a DP
mechanism a random number of times and releases only the best run (Papernot & Steinke,
"Hyperparameter tuning with Renyi differential privacy", ICLR 2022).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pubsubml.errors import InvalidPrivacyParameterError

__all__ = ["DPEvent", "Mechanism", "Neighbouring", "NoiseKind"]

Mechanism = Literal["subsampled_gaussian", "gaussian", "laplace", "approx_dp", "repeat_and_select"]
#: The neighbouring relation a guarantee holds for: datasets that differ by adding or removing one
#: record, or by replacing one record.
Neighbouring = Literal["add_remove", "replace_one"]
#: Where a release's randomness came from: a secure source nobody can regenerate, or a seed (a
#: simulation); see :mod:`pubsubml.privacy.noise`.
NoiseKind = Literal["secure", "seeded"]
#: Most events one ``repeat_and_select`` event may hold (cards are untrusted input).
MAX_INNER_EVENTS = 64
# Mechanisms without an RDP curve here, which a repeat_and_select event cannot hold.
_NO_INNER = ("approx_dp", "repeat_and_select")
# Mechanisms accounted for add/remove neighbours only.
_ADD_REMOVE_ONLY = ("subsampled_gaussian", "repeat_and_select")


def _is_none(value: Any) -> bool:
    return value is None


def _is_add_remove(value: Any) -> bool:
    return value == "add_remove"


class DPEvent(BaseModel):
    """One DP release, self-composed ``count`` times.

    Parameters
    ----------
    mechanism : {"subsampled_gaussian", "gaussian", "laplace", "approx_dp", "repeat_and_select"}
        ``subsampled_gaussian`` is a DP-SGD step: Poisson sampling with rate ``sample_rate`` then the
        Gaussian mechanism with ``noise_multiplier`` = σ / sensitivity.  ``gaussian`` and ``laplace``
        are single releases; for Laplace, ``noise_multiplier`` = scale b / L1 sensitivity.
        ``approx_dp`` is a mechanism known only by its (ε, δ) guarantee (e.g. a diffprivlib model).
        ``repeat_and_select`` runs the sequential composition of ``events`` K times, K random
        with mean ``mean`` and shape ``shape``, and releases only the best run (Papernot &
        Steinke 2022; dp-accounting's ``RepeatAndSelectDpEvent``).
    noise_multiplier : float, optional
        Noise scale relative to the sensitivity (Gaussian: σ/Δ₂, Laplace: b/Δ₁).
    sample_rate : float, default=1.0
        Poisson sampling probability q (only for ``subsampled_gaussian``).
    count : int, default=1
        Number of times the mechanism ran (e.g. DP-SGD steps).
    epsilon, delta : float, optional
        The guarantee of an ``approx_dp`` mechanism.
    events : tuple of DPEvent, optional
        ``repeat_and_select`` only: the mechanisms of one run, composed sequentially (at most
        :data:`MAX_INNER_EVENTS`, none of them ``approx_dp`` or ``repeat_and_select``, which have
        no RDP curve here).
    mean : float, optional
        ``repeat_and_select`` only: the mean number of runs E[K] ≥ 1.
    shape : float, optional
        ``repeat_and_select`` only: the shape η ≥ 0 of the truncated negative binomial law of K
        (η = 0 logarithmic, η = 1 geometric); ``None`` for the Poisson law (η = ∞, which JSON
        cannot hold).
    neighbouring : {"add_remove", "replace_one"}, default="add_remove"
        The neighbouring relation the noise was calibrated for: ``noise_multiplier`` (or ε, δ of
        an ``approx_dp`` event) is relative to the sensitivity over datasets that differ by
        adding or removing one record (DP-SGD, pubsub-ml.txt §3.1 Definition 1), or by replacing
        one (diffprivlib's models, answers normalised by a known n).  Events of both relations
        compose only after conversion (:func:`~pubsubml.privacy.accountants.release.release_epsilon`).
        Left out of the JSON when ``"add_remove"``.  ``subsampled_gaussian`` and
        ``repeat_and_select`` events must be ``"add_remove"``: no accountant here handles
        Poisson subsampling under replace-one.

    Raises
    ------
    InvalidPrivacyParameterError
        On a non-positive noise multiplier, a sample rate outside (0, 1], a count below 1, an
        ``approx_dp`` event with ε ≤ 0 or δ outside [0, 1), or a malformed ``repeat_and_select``
        event; and on fields that the mechanism does not use.

    References
    ----------
    pubsub-ml.txt §3.1 (Definition 1); Papernot & Steinke, ICLR 2022 (Theorems 2 and 6).

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
    # Left out of the JSON when unset, so other events serialize exactly as before these fields
    # existed and cards signed then still verify.
    events: tuple[DPEvent, ...] | None = Field(default=None, exclude_if=_is_none)
    mean: float | None = Field(default=None, exclude_if=_is_none)
    shape: float | None = Field(default=None, exclude_if=_is_none)
    neighbouring: Neighbouring = Field(default="add_remove", exclude_if=_is_add_remove)

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
        if self.neighbouring == "replace_one" and self.mechanism in _ADD_REMOVE_ONLY:
            raise InvalidPrivacyParameterError(
                f"{self.mechanism} events are accounted for add/remove neighbours only: no "
                "accountant here handles Poisson subsampling under replace-one"
            )
        if self.mechanism == "repeat_and_select":
            return self._check_repeat_and_select()
        if self.events is not None or self.mean is not None or self.shape is not None:
            raise InvalidPrivacyParameterError(
                f"events, mean and shape apply only to repeat_and_select, not to {self.mechanism}"
            )
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

    def _check_repeat_and_select(self) -> DPEvent:
        unused = (self.noise_multiplier, self.epsilon, self.delta)
        if any(v is not None for v in unused) or self.sample_rate != 1.0:
            raise InvalidPrivacyParameterError(
                "a repeat_and_select event is described by events, mean and shape only"
            )
        if not self.events or len(self.events) > MAX_INNER_EVENTS:
            raise InvalidPrivacyParameterError(
                f"repeat_and_select needs 1 to {MAX_INNER_EVENTS} inner events, got "
                f"{len(self.events or ())}"
            )
        if any(e.neighbouring != "add_remove" for e in self.events):
            raise InvalidPrivacyParameterError(
                "the inner events of repeat_and_select must be add/remove events"
            )
        nested = [e.mechanism for e in self.events if e.mechanism in _NO_INNER]
        if nested:
            raise InvalidPrivacyParameterError(
                f"repeat_and_select is accounted by RDP: its inner events cannot be {nested[0]}"
            )
        if self.mean is None or not 1.0 <= self.mean < math.inf:
            raise InvalidPrivacyParameterError(
                f"repeat_and_select needs a finite mean number of runs >= 1, got {self.mean}"
            )
        if self.shape is not None and not 0.0 <= self.shape < math.inf:
            raise InvalidPrivacyParameterError(
                f"shape must be finite and >= 0 (None for Poisson), got {self.shape}"
            )
        return self
