"""Tests of pubsubml.privacy.accountants.rdp: RDP ε against dp-accounting's RdpAccountant."""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dp_accounting.rdp import RdpAccountant
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.accountants.rdp import (
    DEFAULT_ORDERS,
    INTEGER_ORDERS,
    RDPPrivacyAccountant,
    rdp_epsilon,
)
from pubsubml.privacy.events import DPEvent

DELTA = 1e-5


def _sgd(sigma: float, q: float, steps: int) -> DPEvent:
    return DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=steps
    )


def test_rdp_epsilon_equals_dp_accounting_rdp() -> None:
    accountant = RDPPrivacyAccountant()
    accountant.step(noise_multiplier=1.1, sample_rate=0.01, steps=300)
    reference = RdpAccountant().compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 300
        )
    )
    assert accountant.get_epsilon(DELTA) == pytest.approx(reference.get_epsilon(DELTA), rel=1e-12)


def test_approx_dp_event() -> None:
    pure = DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0)
    approx = DPEvent(mechanism="approx_dp", epsilon=0.5, delta=1e-6)
    gaussian = DPEvent(mechanism="gaussian", noise_multiplier=10.0)

    # PLD: a lone (ε, δ) mechanism reports at most its ε (one grid step of rounding).
    assert 0.0 < compute_epsilon([pure], DELTA) <= 0.5 + 1e-4
    # δ below the mechanism's own δ: no finite ε.
    assert compute_epsilon([approx], 1e-7) == math.inf
    # RDP: basic composition, ε_RDP(δ − δ_i) + ε_i.
    rdp_part = RdpAccountant().compose(dp_accounting.GaussianDpEvent(10.0))
    expected = float(rdp_part.get_epsilon(DELTA - 1e-6)) + 0.5
    assert compute_epsilon([gaussian, approx], DELTA, backend="rdp") == pytest.approx(expected)
    assert compute_epsilon([approx], 1e-7, backend="rdp") == math.inf
    assert compute_epsilon([gaussian, approx], DELTA) < expected


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.tuples(
            st.floats(0.01, 3.0),
            st.sampled_from([0.0, 1e-7, 1e-6]),
            st.integers(1, 4),
        ),
        min_size=1,
        max_size=4,
    ),
    spare=st.floats(0.05, 10.0),
)
def test_rdp_composes_approx_dp_events_by_basic_composition(
    parts: list[tuple[float, float, int]], spare: float
) -> None:
    events = [DPEvent(mechanism="approx_dp", epsilon=e, delta=d, count=k) for e, d, k in parts]
    total_epsilon = math.fsum(e * k for e, _, k in parts)
    total_delta = math.fsum(d * k for _, d, k in parts)

    enough = compute_epsilon(events, total_delta + spare * 1e-6, backend="rdp")

    assert enough == pytest.approx(total_epsilon, rel=1e-12)
    if total_delta > 0:
        short = compute_epsilon(events, total_delta * 0.999, backend="rdp")
        assert short == math.inf


def test_integer_orders_are_among_the_default_orders() -> None:
    assert set(INTEGER_ORDERS) <= set(DEFAULT_ORDERS)
    event = (_sgd(1.0, 0.01, 100),)
    assert rdp_epsilon(event, DELTA, INTEGER_ORDERS) >= rdp_epsilon(event, DELTA, DEFAULT_ORDERS)
