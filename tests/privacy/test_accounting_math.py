"""Tests of pubsubml.privacy.accounting_math: ε against closed forms and dp-accounting."""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.stats import norm

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.accountant import compute_epsilon, pld_discretization_interval
from pubsubml.privacy.accounting_math import PLD_RESOLUTION
from pubsubml.privacy.events import DPEvent

DELTA = 1e-5
# The integer RDP orders of the ε estimate that sets the PLD grid step.
INTEGER_ORDERS = [*range(2, 64), 128, 256, 512, 1024]


def _analytic_gaussian_epsilon(sigma: float, delta: float) -> float:
    """Exact ε of the Gaussian mechanism (sensitivity 1, noise σ) at δ (Balle & Wang 2018)."""

    def excess(eps: float) -> float:
        return (
            norm.cdf(-eps * sigma + 1 / (2 * sigma))
            - math.exp(eps) * norm.cdf(-eps * sigma - 1 / (2 * sigma))
            - delta
        )

    return float(brentq(excess, 0.0, 100.0, xtol=1e-14))


def _one_two_five_below(wanted: float) -> float:
    """Largest m·10^e (m in 1, 2, 5) not above ``wanted``."""
    exponent = math.floor(math.log10(wanted))
    for mantissa in (5, 2, 1):
        if mantissa * 10.0**exponent <= wanted * (1 + 1e-9):
            return mantissa * 10.0**exponent
    return 10.0**exponent


def _sgd(sigma: float, q: float, steps: int) -> DPEvent:
    return DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=steps
    )


@pytest.mark.parametrize(("sigma", "count"), [(3.0, 1), (20.0, 50)])
def test_self_composed_gaussian_matches_the_analytic_gaussian(sigma: float, count: int) -> None:
    event = DPEvent(mechanism="gaussian", noise_multiplier=sigma, count=count)

    epsilon = compute_epsilon([event], DELTA)

    # k Gaussian releases of noise σ are one release of noise σ/√k; the PLD never understates.
    exact = _analytic_gaussian_epsilon(sigma / math.sqrt(count), DELTA)
    assert exact * (1 - 1e-9) <= epsilon <= exact * (1 + 1e-6)


@pytest.mark.parametrize(("scale", "delta"), [(2.0, 1e-5), (0.5, 1e-3), (1.0, 0.1)])
def test_single_laplace_matches_its_privacy_profile(scale: float, delta: float) -> None:
    event = DPEvent(mechanism="laplace", noise_multiplier=scale)

    epsilon = compute_epsilon([event], delta)

    # Laplace with scale b: δ(ε) = 1 − exp((ε − 1/b)/2), i.e. ε(δ) = 1/b + 2·ln(1 − δ).
    exact = 1 / scale + 2 * math.log1p(-delta)
    assert exact * (1 - 1e-9) <= epsilon <= exact + 1e-6


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


@pytest.mark.parametrize("sigma", [0.8, 5.0, 30.0, 100.0, 3000.0])
def test_pld_grid_step_follows_the_rdp_estimate(sigma: float) -> None:
    events = [DPEvent(mechanism="gaussian", noise_multiplier=sigma)]
    estimate = float(
        RdpAccountant(orders=INTEGER_ORDERS)
        .compose(dp_accounting.GaussianDpEvent(sigma))
        .get_epsilon(DELTA)
    )

    interval = pld_discretization_interval(events, DELTA)

    wanted = max(PLD_RESOLUTION * min(1.0, estimate), PLD_RESOLUTION / 100)
    assert interval == pytest.approx(_one_two_five_below(wanted), rel=1e-12)
    assert PLD_RESOLUTION / 100 <= interval <= PLD_RESOLUTION


def test_pld_grid_step_is_the_resolution_when_no_finite_estimate_exists() -> None:
    # δ below an (ε, δ) event's own δ: the RDP estimate is infinite.
    events = [DPEvent(mechanism="approx_dp", epsilon=0.5, delta=1e-3)]

    assert pld_discretization_interval(events, DELTA) == PLD_RESOLUTION
    assert pld_discretization_interval([], DELTA) == PLD_RESOLUTION


def test_extending_a_composition_equals_composing_it_from_scratch() -> None:
    # Every ε here is above 1, so the three prefixes share the grid step PLD_RESOLUTION.
    a = DPEvent(mechanism="laplace", noise_multiplier=1.0)
    b = DPEvent(mechanism="gaussian", noise_multiplier=3.0)
    c = DPEvent(mechanism="laplace", noise_multiplier=2.0, count=3)
    compute_epsilon([a], DELTA)
    compute_epsilon([a, b], DELTA)

    extended = compute_epsilon([a, b, c], DELTA)

    assert pld_discretization_interval([a, b, c], DELTA) == PLD_RESOLUTION
    reference = PLDAccountant(value_discretization_interval=PLD_RESOLUTION)
    reference.compose(dp_accounting.LaplaceDpEvent(1.0))
    reference.compose(dp_accounting.GaussianDpEvent(3.0))
    reference.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(2.0), 3))
    assert extended == pytest.approx(float(reference.get_epsilon(DELTA)), rel=1e-12)


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
