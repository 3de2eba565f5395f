"""Tests of pubsubml.privacy.accountants.pure: basic composition of pure ε-DP events at δ = 0."""

from __future__ import annotations

import pytest

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.accountants import create_accountant, release_epsilon
from pubsubml.privacy.accountants.pure import PurePrivacyAccountant
from pubsubml.privacy.events import DPEvent


def test_basic_composition_adds_the_epsilons_of_approx_dp_and_laplace_events() -> None:
    approx = DPEvent(mechanism="approx_dp", epsilon=0.25, delta=0.0, count=2)
    laplace = DPEvent(mechanism="laplace", noise_multiplier=4.0, count=3)

    epsilon = PurePrivacyAccountant.epsilon_of([approx, laplace], 0.0)

    assert epsilon == 2 * 0.25 + 3 / 4.0
    assert PurePrivacyAccountant.epsilon_of([], 0.0) == 0.0


def test_a_mixed_composition_counts_the_add_remove_events_twice() -> None:
    add = DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0)
    rep = DPEvent(mechanism="approx_dp", epsilon=0.25, delta=0.0, neighbouring="replace_one")

    assert PurePrivacyAccountant.epsilon_of([add, rep], 0.0) == 2 * 0.5 + 0.25
    assert PurePrivacyAccountant.epsilon_of([add, add], 0.0) == 1.0


def test_the_sum_is_taken_in_event_order_without_grouping() -> None:
    # Three 0.1s summed one by one, not 3 × 0.1: the ε a card has always recorded.
    tenth = DPEvent(mechanism="approx_dp", epsilon=0.1, delta=0.0)

    assert PurePrivacyAccountant.epsilon_of([tenth] * 3, 0.0) == 0.1 + 0.1 + 0.1


@pytest.mark.parametrize(
    "event",
    [
        DPEvent(mechanism="gaussian", noise_multiplier=1.0),
        DPEvent(mechanism="approx_dp", epsilon=0.5, delta=1e-6),
        DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.1),
    ],
)
def test_an_event_that_is_not_pure_dp_is_refused(event: DPEvent) -> None:
    with pytest.raises(InvalidPrivacyParameterError, match="not pure"):
        PurePrivacyAccountant.epsilon_of([event], 0.0)


def test_pure_accounting_is_at_delta_zero_only() -> None:
    event = DPEvent(mechanism="laplace", noise_multiplier=2.0)
    with pytest.raises(InvalidPrivacyParameterError, match="δ = 0"):
        PurePrivacyAccountant.epsilon_of([event], 1e-5)
    accountant = create_accountant("pure")
    accountant.record(event)
    assert accountant.get_epsilon(0.0) == release_epsilon([event], 0.0) == 0.5
