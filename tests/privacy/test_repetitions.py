"""Tests of pubsubml.privacy.repetitions: the law of the number of runs, its mean, its event."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.optimize import brentq

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.noise import SecureRandom
from pubsubml.privacy.repetitions import (
    repeat_and_select_event,
    sample_repetitions,
    truncated_negative_binomial_mean,
)

DRAWS = 10_000


def _empirical_pmf(mean: float, shape: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    draws = np.array([sample_repetitions(mean, shape, rng) for _ in range(DRAWS)])
    return np.bincount(draws, minlength=12)[:12] / DRAWS


def _assert_pmf(empirical: np.ndarray, expected: np.ndarray) -> None:
    # 5 standard errors of a binomial proportion per value of K.
    tolerance = 5 * np.sqrt(expected * (1 - expected) / DRAWS) + 1e-3
    assert np.all(np.abs(empirical - expected) <= tolerance), (empirical, expected)


def test_logarithmic_law_matches_scipy() -> None:
    mean = 4.0
    # E[K] = (1 − γ) / (γ·ln(1/γ)) for the logarithmic law (η = 0).
    gamma = brentq(lambda g: (1 - g) / (g * -math.log(g)) - mean, 1e-9, 1 - 1e-9)
    k = np.arange(12)

    empirical = _empirical_pmf(mean, 0.0, seed=3)

    _assert_pmf(empirical, stats.logser(1 - gamma).pmf(k))
    assert empirical[0] == 0.0


def test_shape_two_law_is_the_negative_binomial_conditioned_on_one_run() -> None:
    mean = 5.0
    # E[K] = 2 / (γ(1 + γ)) for η = 2, so γ solves γ² + γ − 2/mean = 0.
    gamma = (-1 + math.sqrt(1 + 8 / mean)) / 2
    k = np.arange(12)
    expected = np.where(k >= 1, stats.nbinom(2, gamma).pmf(k) / (1 - gamma**2), 0.0)

    empirical = _empirical_pmf(mean, 2.0, seed=4)

    _assert_pmf(empirical, expected)


@settings(max_examples=60, deadline=None)
@given(
    low=st.floats(0.01, 0.98),
    step=st.floats(0.005, 0.5),
    shape=st.sampled_from([0.0, 0.5, 1.0, 3.0]),
)
def test_mean_falls_as_gamma_grows_and_is_at_least_one(
    low: float, step: float, shape: float
) -> None:
    high = min(1.0, low + step)

    at_low = truncated_negative_binomial_mean(low, shape)
    at_high = truncated_negative_binomial_mean(high, shape)

    assert at_low > at_high >= 1.0 - 1e-12


@pytest.mark.parametrize("shape", [0.0, 1.0, 7.5])
def test_mean_is_one_at_gamma_one_and_one_over_gamma_when_geometric(shape: float) -> None:
    assert truncated_negative_binomial_mean(1.0, shape) == 1.0
    assert truncated_negative_binomial_mean(0.2, 1.0) == pytest.approx(5.0, rel=1e-12)


@pytest.mark.parametrize("gamma", [0.0, -0.5, 1.5])
def test_mean_refuses_gamma_outside_the_unit_interval(gamma: float) -> None:
    with pytest.raises(InvalidPrivacyParameterError, match="gamma"):
        truncated_negative_binomial_mean(gamma, 1.0)


@pytest.mark.parametrize(
    ("mean", "shape"),
    [(math.nan, 1.0), (math.inf, 1.0), (True, 1.0), ("2", 1.0), (2.0, math.nan), (2.0, math.inf)],
)
def test_sampling_refuses_malformed_laws(mean: Any, shape: Any) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        sample_repetitions(mean, shape, np.random.default_rng(0))


@pytest.mark.parametrize("rng", [np.random.RandomState(0), 0])
def test_sampling_needs_a_numpy_generator_or_a_secure_source(rng: Any) -> None:
    with pytest.raises(InvalidPrivacyParameterError, match="Generator"):
        sample_repetitions(3.0, 1.0, rng)


def test_sampling_draws_from_a_secure_source_by_default() -> None:
    draws = [sample_repetitions(6.0, 1.0) for _ in range(300)]
    assert min(draws) >= 1 and abs(np.mean(draws) - 6.0) < 1.5
    assert sample_repetitions(6.0, 1.0, SecureRandom()) >= 1


def test_sampling_is_reproducible_under_a_seed() -> None:
    def draws(seed: int) -> list[int]:
        rng = np.random.default_rng(seed)
        return [sample_repetitions(6.0, 1.0, rng) for _ in range(50)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


def test_selection_event_holds_one_run_and_its_law() -> None:
    train = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.1)
    score = DPEvent(mechanism="laplace", noise_multiplier=5.0)

    event = repeat_and_select_event([train, score], mean=4.0, shape=None)

    assert event == DPEvent(
        mechanism="repeat_and_select", events=(train, score), mean=4.0, shape=None
    )
    assert event.count == 1


def test_selection_event_refuses_no_runs_and_a_pure_dp_run() -> None:
    approx = DPEvent(mechanism="approx_dp", epsilon=1.0, delta=0.0)

    with pytest.raises(InvalidPrivacyParameterError):
        repeat_and_select_event([], mean=2.0, shape=1.0)
    with pytest.raises(InvalidPrivacyParameterError, match="approx_dp"):
        repeat_and_select_event([approx], mean=2.0, shape=1.0)
