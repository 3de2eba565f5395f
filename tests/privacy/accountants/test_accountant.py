"""Tests of pubsubml.privacy.accountants.accountant: the interface every accountant shares."""

from __future__ import annotations

import json

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant

import pubsubml.privacy
import pubsubml.privacy.accountants
from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy import (
    DPEvent,
    PLDPrivacyAccountant,
    PrivacyAccountant,
    RDPPrivacyAccountant,
    create_accountant,
    pld_discretization_interval,
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
    for name in pubsubml.privacy.accountants.__all__:
        assert hasattr(pubsubml.privacy.accountants, name)


def test_reported_epsilon_equals_dp_accounting_over_the_steps_that_ran() -> None:
    # Prepare: 3 epochs of 20 steps at q=0.05, then 10 steps with another σ.
    accountant = PLDPrivacyAccountant()
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


def test_state_dict_json_round_trip() -> None:
    # Prepare
    accountant = create_accountant("pld")
    accountant.step(noise_multiplier=1.3, sample_rate=0.05, steps=40)
    accountant.record(DPEvent(mechanism="approx_dp", epsilon=0.1, delta=0.0))

    # Execute
    text = json.dumps(accountant.state_dict())
    restored = create_accountant("pld")
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
    accountant = PLDPrivacyAccountant()
    accountant.step(noise_multiplier=1.0, sample_rate=0.1, steps=3)
    before = list(accountant.events)
    with pytest.raises(InvalidPrivacyParameterError):
        accountant.load_state_dict(state)
    assert accountant.events == before


def test_bad_step_records_nothing() -> None:
    accountant = RDPPrivacyAccountant()
    for kwargs in (
        {"noise_multiplier": 0.0, "sample_rate": 0.1},
        {"noise_multiplier": 1.0, "sample_rate": 1.5},
    ):
        with pytest.raises(InvalidPrivacyParameterError):
            accountant.step(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidPrivacyParameterError):
        accountant.step(noise_multiplier=1.0, sample_rate=0.1, steps=0)
    assert accountant.events == []


def test_the_interface_is_abstract_and_every_backend_names_itself() -> None:
    with pytest.raises(TypeError, match="abstract"):
        PrivacyAccountant()  # type: ignore[abstract]
    for name in ("pld", "rdp", "pure"):
        accountant = create_accountant(name)
        assert isinstance(accountant, PrivacyAccountant)
        assert accountant.mechanism() == accountant.backend == name
        assert accountant.state_dict() == {"backend": name, "events": []}


def test_get_epsilon_is_the_backends_epsilon_of_the_recorded_events() -> None:
    accountant = RDPPrivacyAccountant()
    accountant.step(noise_multiplier=1.5, sample_rate=0.02, steps=30)
    accountant.record(DPEvent(mechanism="gaussian", noise_multiplier=8.0))

    assert accountant.get_epsilon(DELTA) == RDPPrivacyAccountant.epsilon_of(
        accountant.events, DELTA
    )
    assert PLDPrivacyAccountant().get_epsilon(DELTA) == 0.0
