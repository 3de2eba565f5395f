"""The random number of runs of a private selection, and its DP event (Papernot & Steinke 2022).

A private hyperparameter selection runs a DP mechanism K times, K drawn from a truncated negative
binomial law TNB(η, γ) independently of the data, and releases only the best run.  Theorem 2 of
Papernot & Steinke bounds its Rényi DP from the RDP of one run, which dp-accounting implements
(``dp_event.RepeatAndSelectDpEvent``).  :func:`sample_repetitions` draws K and
:func:`repeat_and_select_event` describes the whole selection as one
:class:`~pubsubml.privacy.events.DPEvent`.

This module imports numpy only (pure math).

References
----------
N. Papernot and T. Steinke, "Hyperparameter Tuning with Renyi Differential Privacy", ICLR 2022
(arXiv:2110.03620), Definition 1 (TNB), Theorem 2; pubsub-ml.txt §3.1 (every release accounted).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.noise import SecureRandom

__all__ = ["repeat_and_select_event", "sample_repetitions", "truncated_negative_binomial_mean"]

_BISECTION_STEPS = 200


def _check_law(mean: float, shape: float) -> tuple[float, float]:
    for name, value in (("mean", mean), ("shape", shape)):
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise InvalidPrivacyParameterError(f"{name} must be a number, got {value!r}")
    if not 1.0 <= mean < math.inf:
        raise InvalidPrivacyParameterError(
            f"the mean number of runs must be finite and >= 1, got {mean}"
        )
    if not 0.0 <= shape < math.inf:
        raise InvalidPrivacyParameterError(f"shape must be finite and >= 0, got {shape}")
    return float(mean), float(shape)


def truncated_negative_binomial_mean(gamma: float, shape: float) -> float:
    """E[K] for K ~ TNB(η = ``shape``, γ = ``gamma``) (Papernot & Steinke 2022, Definition 1).

    η(1 − γ) / (γ(1 − γ^η)) for η > 0; (1 − γ) / (γ ln(1/γ)) for η = 0 (logarithmic law);
    1/γ for η = 1 (geometric law); 1 at γ = 1.

    Examples
    --------
    >>> truncated_negative_binomial_mean(0.25, 1.0)
    4.0
    """
    if not 0.0 < gamma <= 1.0:
        raise InvalidPrivacyParameterError(f"gamma must be in (0, 1], got {gamma}")
    if gamma == 1.0:
        return 1.0
    if shape == 0.0:
        return (1.0 - gamma) / (gamma * -math.log(gamma))
    return shape * (1.0 - gamma) / (gamma * -math.expm1(shape * math.log(gamma)))


def _gamma_for(mean: float, shape: float) -> float:
    """γ with E[K] = ``mean`` (bisection; E[K] decreases in γ)."""
    if mean == 1.0:
        return 1.0
    lo, hi = 0.0, 1.0  # mean(lo) > target >= mean(hi)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if truncated_negative_binomial_mean(mid, shape) > mean:
            lo = mid
        else:
            hi = mid
    return hi


def sample_repetitions(
    mean: float, shape: float, rng: np.random.Generator | SecureRandom | None = None
) -> int:
    """Draw the number of runs K ~ TNB(η, γ) with E[K] = ``mean``, independently of any data.

    P[K = k] ∝ (1 − γ)^k · Γ(k + η) / (Γ(η) k!) for k ≥ 1 (the negative binomial conditioned on
    K ≥ 1; for η = 0 the logarithmic law (1 − γ)^k / (k ln(1/γ))), drawn by inverting its CDF.

    Parameters
    ----------
    mean : float
        E[K] ≥ 1.
    shape : float
        η ≥ 0 (0: logarithmic, 1: geometric).
    rng : numpy.random.Generator or SecureRandom, optional
        K is part of the mechanism's secret randomness: by default a fresh
        :class:`~pubsubml.privacy.noise.SecureRandom`; a seeded generator for simulations.

    Returns
    -------
    int
        K ≥ 1.

    Raises
    ------
    InvalidPrivacyParameterError
        On a mean below 1 or not finite, or a negative or infinite shape.

    Examples
    --------
    >>> sample_repetitions(1.0, 1.0, np.random.default_rng(0))
    1
    """
    mean, shape = _check_law(mean, shape)
    if rng is None:
        rng = SecureRandom()
    if not isinstance(rng, np.random.Generator | SecureRandom):
        raise InvalidPrivacyParameterError(
            f"rng must be None, a SecureRandom or a numpy.random.Generator, got {type(rng).__name__}"
        )
    gamma = _gamma_for(mean, shape)
    if gamma >= 1.0:
        return 1
    stay = 1.0 - gamma
    if shape == 0.0:
        p = stay / -math.log(gamma)
    else:
        p = shape * stay / math.expm1(-shape * math.log(gamma))
    u = float(rng.random()) if isinstance(rng, np.random.Generator) else float(rng.uniform(1)[0])
    k, cdf = 1, p
    while cdf < u and p > 0.0:
        p *= stay * (k + shape) / (k + 1)
        k += 1
        cdf += p
    return k


def repeat_and_select_event(
    events: Sequence[DPEvent], *, mean: float, shape: float | None
) -> DPEvent:
    """The DP event of repeating the composition of ``events`` K times and releasing the best run.

    Parameters
    ----------
    events : sequence of DPEvent
        What one run does (e.g. a DP-SGD training and a DP score), composed sequentially.
    mean : float
        E[K] ≥ 1.
    shape : float or None
        η ≥ 0 of the truncated negative binomial law of K; ``None`` for the Poisson law.

    Returns
    -------
    DPEvent
        ``DPEvent(mechanism="repeat_and_select", events=..., mean=..., shape=...)``.

    Raises
    ------
    InvalidPrivacyParameterError
        On no events, events without an RDP curve, or a malformed law.

    Examples
    --------
    >>> e = DPEvent(mechanism="gaussian", noise_multiplier=5.0)
    >>> repeat_and_select_event([e], mean=3.0, shape=1.0).mechanism
    'repeat_and_select'
    """
    return DPEvent(mechanism="repeat_and_select", events=tuple(events), mean=mean, shape=shape)
