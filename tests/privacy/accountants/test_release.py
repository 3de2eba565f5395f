"""Tests of pubsubml.privacy.accountants.release: the one ε of a release, wherever it is shown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import pubsubml.privacy.accountants.registry as registry_module
from pubsubml.artifacts.export import privacy_record_of
from pubsubml.artifacts.privacy_record import PrivacyRecord, check_privacy_record
from pubsubml.errors import InvalidPrivacyParameterError, UntrustedArtifactError
from pubsubml.privacy.accountants import (
    PLDPrivacyAccountant,
    PurePrivacyAccountant,
    RDPPrivacyAccountant,
    compute_epsilon,
    default_accountant,
    release_epsilon,
)
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release

DELTA = 1e-5
SGD = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.2, sample_rate=0.02, count=80)
GAUSSIAN = DPEvent(mechanism="gaussian", noise_multiplier=6.0)
PURE = DPEvent(mechanism="approx_dp", epsilon=0.4, delta=0.0, neighbouring="replace_one")


def test_the_default_accountant_follows_delta() -> None:
    assert default_accountant(0.0) == "pure"
    assert default_accountant(DELTA) == "pld"
    assert release_epsilon([SGD], DELTA) == PLDPrivacyAccountant.epsilon_of([SGD], DELTA)
    assert release_epsilon([PURE, PURE], 0.0) == PurePrivacyAccountant.epsilon_of([PURE] * 2, 0.0)
    assert release_epsilon([SGD], DELTA, "rdp") == RDPPrivacyAccountant.epsilon_of([SGD], DELTA)


def test_compute_epsilon_is_the_release_epsilon_of_an_approximate_dp_backend() -> None:
    events = [SGD, GAUSSIAN]
    assert compute_epsilon(events, DELTA) == release_epsilon(events, DELTA, "pld")
    assert compute_epsilon(events, DELTA, backend="rdp") == release_epsilon(events, DELTA, "rdp")
    with pytest.raises(InvalidPrivacyParameterError):
        compute_epsilon([PURE], 0.0)  # the (ε, δ) accountants need δ in (0, 1)


@dataclass
class _Spy:
    """Which accountants computed ε, and of what."""

    calls: list[tuple[str, tuple[DPEvent, ...], float]] = field(default_factory=list)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> _Spy:
    """The registry's three backends, each recording the compositions it is asked for."""
    seen = _Spy()
    spied: dict[str, Any] = {}
    for name, cls in registry_module._ACCOUNTANTS.items():

        def epsilon_of(
            events: Sequence[DPEvent], delta: float, _cls: Any = cls, _name: str = name
        ) -> float:
            seen.calls.append((_name, tuple(events), delta))
            return float(_cls.epsilon_of(events, delta))

        spied[name] = type(cls.__name__, (cls,), {"epsilon_of": staticmethod(epsilon_of)})
    monkeypatch.setattr(registry_module, "_ACCOUNTANTS", spied)
    return seen


def test_the_site_ledger_charges_the_release_epsilon(spy: _Spy) -> None:
    ledger = PrivacyLedger(site="h1", epsilon_budget=10.0, delta=DELTA)

    spent = ledger.charge(Release(release_id="m1", events=(SGD, GAUSSIAN)))

    assert spent == release_epsilon([SGD, GAUSSIAN], DELTA)
    assert spy.calls[0] == ("pld", (SGD, GAUSSIAN), DELTA)
    rdp = PrivacyLedger(site="h1", epsilon_budget=10.0, delta=DELTA, backend="rdp")
    assert rdp.charge(Release(release_id="m1", events=(SGD,))) == release_epsilon(
        [SGD], DELTA, "rdp"
    )


@dataclass
class _Fitted:
    privacy_events_: list[DPEvent]
    delta_: float
    epsilon_: float
    accountant_: str | None = None


@pytest.mark.parametrize(
    ("events", "delta", "accountant"),
    [([SGD, GAUSSIAN], DELTA, "pld"), ([SGD], DELTA, "rdp"), ([PURE, PURE], 0.0, "pure")],
)
def test_the_card_record_and_its_check_report_the_release_epsilon(
    spy: _Spy, events: list[DPEvent], delta: float, accountant: str
) -> None:
    epsilon = release_epsilon(events, delta, accountant)
    fitted = _Fitted(events, delta, epsilon, "rdp" if accountant == "rdp" else None)

    record = privacy_record_of(fitted)
    checked = check_privacy_record(record)

    assert record.epsilon == checked == epsilon
    assert record.accountant == accountant
    assert [name for name, _, _ in spy.calls] == [accountant] * 3
    assert {(evs, d) for _, evs, d in spy.calls} == {(tuple(events), delta)}


def test_a_record_that_understates_the_release_epsilon_is_refused() -> None:
    epsilon = release_epsilon([SGD], DELTA)
    record = PrivacyRecord.from_events([SGD], epsilon=epsilon * 0.99, delta=DELTA, accountant="pld")

    with pytest.raises(UntrustedArtifactError, match="claims"):
        check_privacy_record(record)
