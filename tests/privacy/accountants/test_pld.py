"""Tests of pubsubml.privacy.accountants.pld: ε against closed forms and dp-accounting."""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant
from scipy.optimize import brentq
from scipy.stats import norm

from pubsubml.privacy.accountants import compute_epsilon, pld_discretization_interval
from pubsubml.privacy.accountants.pld import PLD_RESOLUTION, PLDPrivacyAccountant
from pubsubml.privacy.accountants.rdp import RDPPrivacyAccountant
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


def _independent_pld(events: list[dp_accounting.DpEvent], interval: float) -> float:
    accountant = PLDAccountant(value_discretization_interval=interval)
    for event in events:
        accountant.compose(event)
    return float(accountant.get_epsilon(DELTA))


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


def test_pld_is_accurate_against_a_fine_grid_and_pessimistic() -> None:
    # A 5x finer dp-accounting grid is closer to the exact ε; ours must not be below it.
    event = _sgd(2.0, 0.05, 100)
    fine = _independent_pld(
        [
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(2.0)), 100
            )
        ],
        pld_discretization_interval([event], DELTA) / 5,
    )
    epsilon = compute_epsilon([event], DELTA)
    assert fine <= epsilon <= fine * (1 + 2e-4)


@pytest.mark.parametrize(
    ("sigma", "q", "steps"), [(2.0, 0.05, 100), (4.0, 0.1, 20), (10.0, 1.0, 3)]
)
def test_pld_is_tighter_than_rdp(sigma: float, q: float, steps: int) -> None:
    events = [_sgd(sigma, q, steps)]
    assert compute_epsilon(events, DELTA) <= compute_epsilon(events, DELTA, backend="rdp")


def test_gaussian_and_laplace_match_dp_accounting() -> None:
    gaussian = DPEvent(mechanism="gaussian", noise_multiplier=4.0, count=3)
    laplace = DPEvent(mechanism="laplace", noise_multiplier=2.0, count=2)
    events = [gaussian, laplace]
    interval = pld_discretization_interval(events, DELTA)
    reference = _independent_pld(
        [
            dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(4.0), 3),
            dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(2.0), 2),
        ],
        interval,
    )
    assert compute_epsilon(events, DELTA) == pytest.approx(reference, rel=1e-12)


def test_a_composition_without_a_pld_is_accounted_by_rdp() -> None:
    inner = _sgd(2.0, 0.05, 40)
    selection = DPEvent(mechanism="repeat_and_select", events=(inner,), mean=3.0)

    assert PLDPrivacyAccountant.epsilon_of([selection, inner], DELTA) == (
        RDPPrivacyAccountant.epsilon_of([selection, inner], DELTA)
    )
