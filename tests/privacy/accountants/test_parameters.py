"""Tests of pubsubml.privacy.accountants.parameters: the checks of ε and δ."""

from __future__ import annotations

import math

import pytest

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.accountants.parameters import DEFAULT_DELTA, check_delta, check_epsilon
from pubsubml.privacy.events import DPEvent

DELTA = 1e-5


def _sgd(sigma: float, q: float, steps: int) -> DPEvent:
    return DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=steps
    )


@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.inf, math.nan, "1"])
def test_bad_epsilon_rejected(epsilon: float) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        check_epsilon(epsilon)


@pytest.mark.parametrize(
    ("delta", "n"),
    [
        (0.0, None),
        (1.0, None),
        (1.5, None),
        (-1e-5, None),
        (math.nan, None),
        (1e-3, 1000),
        (0.01, 500),
        (1e-5, 0),
    ],
)
def test_bad_delta_rejected(delta: float, n: int | None) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        check_delta(delta, n)


def test_good_parameters_pass() -> None:
    check_epsilon(0.1)
    check_delta(1e-5, 500)
    with pytest.raises(InvalidPrivacyParameterError):
        compute_epsilon([_sgd(1.0, 0.1, 1)], 1.0)


def test_epsilon_may_be_a_numpy_scalar() -> None:
    import numpy as np

    check_epsilon(np.float32(0.5))
    check_epsilon(np.int64(2))


def test_default_delta_is_below_one_over_n_for_sites_of_up_to_99999_records() -> None:
    check_delta(DEFAULT_DELTA, 99_999)
    with pytest.raises(InvalidPrivacyParameterError):
        check_delta(DEFAULT_DELTA, 100_000)
