"""Tests of pubsubml.privacy.accountants.composition: grouping, neighbouring relations, conversion."""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dp_accounting.rdp import RdpAccountant

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.accountants.composition import (
    group_events,
    is_mixed,
    neighbouring_of,
    replace_one_epsilon,
)
from pubsubml.privacy.events import DPEvent

DELTA = 1e-5


def _sgd(sigma: float, q: float, steps: int) -> DPEvent:
    return DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=steps
    )


def test_repeated_events_merge_and_empty_is_zero() -> None:
    a, b = _sgd(2.0, 0.01, 10), _sgd(3.0, 0.01, 10)
    assert compute_epsilon([], DELTA) == 0.0
    assert compute_epsilon([a, b, a], DELTA) == compute_epsilon([_sgd(2.0, 0.01, 20), b], DELTA)
    # Composition is commutative: another order agrees up to floating-point rounding.
    assert compute_epsilon([b, a, a], DELTA) == pytest.approx(
        compute_epsilon([a, b, a], DELTA), rel=1e-9
    )


@pytest.mark.parametrize("bad", [object(), {"mechanism": "gaussian", "noise_multiplier": 1.0}])
def test_a_composition_holding_a_non_event_is_refused(bad: object) -> None:
    good = DPEvent(mechanism="gaussian", noise_multiplier=1.0)

    with pytest.raises(InvalidPrivacyParameterError, match="expected a DPEvent"):
        compute_epsilon([good, bad], DELTA)  # type: ignore[list-item]


def test_mixed_laplace_pair_halves_the_add_remove_noise() -> None:
    add = DPEvent(mechanism="laplace", noise_multiplier=4.0)
    rep = DPEvent(mechanism="laplace", noise_multiplier=8.0, neighbouring="replace_one")

    mixed = compute_epsilon([add, rep], DELTA)

    halved = DPEvent(mechanism="laplace", noise_multiplier=2.0, neighbouring="replace_one")
    assert mixed == compute_epsilon([halved, rep], DELTA)


def test_mixed_dp_sgd_part_keeps_a_group_privacy_guarantee_within_its_delta_share() -> None:
    # RDP backend: both parts end up as (ε, δ) events, so the result is 2·ε_A + ε_other.
    sgd = _sgd(2.0, 0.05, 50)
    other = DPEvent(mechanism="approx_dp", epsilon=0.3, delta=0.0, neighbouring="replace_one")

    mixed = compute_epsilon([sgd, other], DELTA, backend="rdp")

    eps_a = (mixed - 0.3) / 2
    reference = RdpAccountant().compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(2.0)), 50
        )
    )
    # (ε_A, δ_A) holds with (1 + e^ε_A)·δ_A ≤ δ/2, and δ_A < δ/2 costs at least ε at δ/2.
    assert float(reference.get_epsilon(DELTA / (2 * (1 + math.exp(eps_a))))) <= eps_a + 1e-9
    assert eps_a >= float(reference.get_epsilon(DELTA / 2))


def test_grouping_merges_counts_in_order_of_first_occurrence() -> None:
    a, b = _sgd(2.0, 0.01, 10), _sgd(3.0, 0.01, 5)

    grouped = group_events([a, b, a, b, b])

    assert grouped == (_sgd(2.0, 0.01, 20), _sgd(3.0, 0.01, 15))
    assert group_events([a]) == (a,) and group_events([]) == ()


def test_neighbouring_relation_of_a_composition() -> None:
    add = DPEvent(mechanism="laplace", noise_multiplier=2.0)
    rep = DPEvent(mechanism="laplace", noise_multiplier=2.0, neighbouring="replace_one")

    assert neighbouring_of([add]) == "add_remove" and not is_mixed([add])
    assert neighbouring_of([rep]) == "replace_one" and not is_mixed([rep, rep])
    assert neighbouring_of([add, rep]) == "replace_one" and is_mixed([add, rep])
    assert neighbouring_of([]) == "add_remove"


def test_replace_one_conversion_uses_the_given_accountant() -> None:
    calls: list[tuple[tuple[DPEvent, ...], float]] = []

    def total_epsilon(events: tuple[DPEvent, ...], delta: float) -> float:
        calls.append((events, delta))
        return sum(float(e.epsilon or 0.0) * e.count for e in events)

    add = DPEvent(mechanism="approx_dp", epsilon=0.25, delta=0.0)
    rep = DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0, neighbouring="replace_one")

    epsilon = replace_one_epsilon((add, rep), DELTA, total_epsilon)

    assert epsilon == pytest.approx(0.5 + 2 * 0.25)
    assert all(delta < DELTA for _, delta in calls[:-1]) and calls[-1][1] == DELTA
