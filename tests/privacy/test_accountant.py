"""Tests of pubsubml.privacy.accountant: ε against independent dp-accounting computations."""

from __future__ import annotations

import json
import math

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

import pubsubml.privacy
import pubsubml.privacy.accountant as accountant_module
from pubsubml.errors import InvalidPrivacyParameterError, UnknownAccountantError
from pubsubml.privacy import (
    DPEvent,
    PLDPrivacyAccountant,
    PrivacyAccountant,
    RDPPrivacyAccountant,
    check_delta,
    check_epsilon,
    compute_epsilon,
    create_accountant,
    pld_discretization_interval,
    register_accountant,
)

DELTA = 1e-5


def _sgd(sigma: float, q: float, steps: int) -> DPEvent:
    return DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=steps
    )


def _independent_pld(events: list[dp_accounting.DpEvent], interval: float) -> float:
    accountant = PLDAccountant(value_discretization_interval=interval)
    for event in events:
        accountant.compose(event)
    return float(accountant.get_epsilon(DELTA))


def test_all_names_exist() -> None:
    assert pubsubml.privacy.__all__ == sorted(pubsubml.privacy.__all__)
    for name in pubsubml.privacy.__all__:
        assert hasattr(pubsubml.privacy, name)
    for name in accountant_module.__all__:
        assert hasattr(accountant_module, name)


def test_reported_epsilon_equals_dp_accounting_over_the_steps_that_ran() -> None:
    # Prepare: 3 epochs of 20 steps at q=0.05, then 10 steps with another σ.
    accountant = PrivacyAccountant()
    for _ in range(3):
        accountant.step(noise_multiplier=2.0, sample_rate=0.05, steps=20)
    accountant.step(noise_multiplier=3.0, sample_rate=0.05, steps=10)

    # Execute
    epsilon = accountant.get_epsilon(DELTA)

    # Assert: same steps, composed by dp-accounting's own PLD accountant on the same grid.
    interval = pld_discretization_interval(accountant.events, DELTA)
    reference = _independent_pld(
        [
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(2.0)), 60
            ),
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(3.0)), 10
            ),
        ],
        interval,
    )
    assert [e.count for e in accountant.events] == [60, 10]
    assert epsilon == pytest.approx(reference, rel=1e-12)


def test_rdp_epsilon_equals_dp_accounting_rdp() -> None:
    accountant = PrivacyAccountant(backend="rdp")
    accountant.step(noise_multiplier=1.1, sample_rate=0.01, steps=300)
    reference = RdpAccountant().compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 300
        )
    )
    assert accountant.get_epsilon(DELTA) == pytest.approx(reference.get_epsilon(DELTA), rel=1e-12)


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


def test_repeated_events_merge_and_empty_is_zero() -> None:
    a, b = _sgd(2.0, 0.01, 10), _sgd(3.0, 0.01, 10)
    assert compute_epsilon([], DELTA) == 0.0
    assert compute_epsilon([a, b, a], DELTA) == compute_epsilon([_sgd(2.0, 0.01, 20), b], DELTA)
    # Composition is commutative: another order agrees up to floating-point rounding.
    assert compute_epsilon([b, a, a], DELTA) == pytest.approx(
        compute_epsilon([a, b, a], DELTA), rel=1e-9
    )


def test_state_dict_json_round_trip() -> None:
    # Prepare
    accountant = PrivacyAccountant()
    accountant.step(noise_multiplier=1.3, sample_rate=0.05, steps=40)
    accountant.record(DPEvent(mechanism="approx_dp", epsilon=0.1, delta=0.0))

    # Execute
    text = json.dumps(accountant.state_dict())
    restored = PrivacyAccountant()
    restored.load_state_dict(json.loads(text))

    # Assert
    assert restored.events == accountant.events
    assert restored.get_epsilon(DELTA) == accountant.get_epsilon(DELTA)


@pytest.mark.parametrize(
    "state",
    [
        {"backend": "rdp", "events": []},
        {"backend": "pld"},
        {"backend": "pld", "events": [{"mechanism": "gaussian", "noise_multiplier": -1}]},
        {"backend": "pld", "events": "nope"},
    ],
)
def test_bad_state_is_refused_and_changes_nothing(state: dict[str, object]) -> None:
    accountant = PrivacyAccountant()
    accountant.step(noise_multiplier=1.0, sample_rate=0.1, steps=3)
    before = list(accountant.events)
    with pytest.raises(InvalidPrivacyParameterError):
        accountant.load_state_dict(state)
    assert accountant.events == before


def test_bad_step_records_nothing() -> None:
    accountant = PrivacyAccountant()
    for kwargs in (
        {"noise_multiplier": 0.0, "sample_rate": 0.1},
        {"noise_multiplier": 1.0, "sample_rate": 1.5},
    ):
        with pytest.raises(InvalidPrivacyParameterError):
            accountant.step(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidPrivacyParameterError):
        accountant.step(noise_multiplier=1.0, sample_rate=0.1, steps=0)
    assert accountant.events == []


def test_registry() -> None:
    assert isinstance(create_accountant("pld"), PLDPrivacyAccountant)
    assert isinstance(create_accountant("rdp"), RDPPrivacyAccountant)
    with pytest.raises(UnknownAccountantError, match="no accountant registered"):
        create_accountant("moments")
    with pytest.raises(InvalidPrivacyParameterError):
        register_accountant("pld", PLDPrivacyAccountant)
    with pytest.raises(UnknownAccountantError):
        PrivacyAccountant(backend="moments")  # type: ignore[arg-type]
    with pytest.raises(UnknownAccountantError):
        compute_epsilon([], DELTA, backend="moments")  # type: ignore[arg-type]


def test_register_new_accountant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accountant_module, "_ACCOUNTANTS", dict(accountant_module._ACCOUNTANTS))

    class Conservative(PrivacyAccountant):
        def __init__(self) -> None:
            super().__init__(backend="rdp")

    register_accountant("conservative", Conservative)
    assert isinstance(create_accountant("conservative"), Conservative)
    with pytest.raises(InvalidPrivacyParameterError):
        register_accountant("other", dict)  # type: ignore[arg-type]


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

    from pubsubml.privacy.accountant import check_epsilon

    check_epsilon(np.float32(0.5))
    check_epsilon(np.int64(2))
