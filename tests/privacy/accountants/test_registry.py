"""Tests of pubsubml.privacy.accountants.registry: one factory over a registry of backends."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import pubsubml.privacy.accountants.registry as registry_module
from pubsubml.errors import InvalidPrivacyParameterError, UnknownAccountantError
from pubsubml.privacy import (
    DPEvent,
    PLDPrivacyAccountant,
    PrivacyAccountant,
    PurePrivacyAccountant,
    RDPPrivacyAccountant,
    compute_epsilon,
    create_accountant,
    register_accountant,
    release_epsilon,
)
from pubsubml.privacy.accountants import ApproximateDPAccountant, accountant_class

DELTA = 1e-5


class _Doubled(PrivacyAccountant):
    """A backend of its own: twice the RDP ε (a deliberately loose bound)."""

    @classmethod
    def mechanism(cls) -> str:
        return "doubled"

    @classmethod
    def epsilon_of(cls, events: Sequence[DPEvent], delta: float) -> float:
        return 2.0 * RDPPrivacyAccountant.epsilon_of(events, delta)


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the registry, so that registering in a test leaves the others unchanged."""
    monkeypatch.setattr(registry_module, "_ACCOUNTANTS", dict(registry_module._ACCOUNTANTS))


def test_the_three_backends_are_registered() -> None:
    assert isinstance(create_accountant("pld"), PLDPrivacyAccountant)
    assert isinstance(create_accountant("rdp"), RDPPrivacyAccountant)
    assert isinstance(create_accountant("pure"), PurePrivacyAccountant)
    assert create_accountant("pld") is not create_accountant("pld")  # a fresh one each time
    assert accountant_class("rdp") is RDPPrivacyAccountant


def test_an_unknown_mechanism_is_a_clear_error() -> None:
    with pytest.raises(UnknownAccountantError, match=r"no accountant registered as 'moments'"):
        create_accountant("moments")
    with pytest.raises(UnknownAccountantError, match=r"known: \['pld', 'pure', 'rdp'\]"):
        accountant_class("moments")
    with pytest.raises(UnknownAccountantError):
        compute_epsilon([], DELTA, backend="moments")  # type: ignore[arg-type]
    with pytest.raises(UnknownAccountantError):
        release_epsilon([], DELTA, accountant="moments")
    with pytest.raises(UnknownAccountantError):
        create_accountant(["pld"])  # type: ignore[arg-type]


@pytest.mark.usefixtures("scratch_registry")
def test_registering_a_backend_is_one_subclass() -> None:
    event = DPEvent(mechanism="gaussian", noise_multiplier=4.0)

    register_accountant("doubled", _Doubled)

    accountant = create_accountant("doubled")
    accountant.record(event)
    rdp = compute_epsilon([event], DELTA, backend="rdp")
    assert isinstance(accountant, _Doubled)
    assert accountant.get_epsilon(DELTA) == 2.0 * rdp
    assert release_epsilon([event], DELTA, accountant="doubled") == 2.0 * rdp
    assert accountant.state_dict()["backend"] == "doubled"


@pytest.mark.usefixtures("scratch_registry")
def test_an_approximate_dp_backend_inherits_grouping_and_the_replace_one_conversion() -> None:
    class Halved(ApproximateDPAccountant):
        @classmethod
        def mechanism(cls) -> str:
            return "halved"

        @classmethod
        def grouped_epsilon(cls, events: tuple[DPEvent, ...], delta: float) -> float:
            return 0.5 * PLDPrivacyAccountant.grouped_epsilon(events, delta)

    register_accountant("halved", Halved)
    laplace = DPEvent(mechanism="laplace", noise_multiplier=2.0)

    assert release_epsilon([laplace, laplace], DELTA, accountant="halved") == 0.5 * (
        release_epsilon([laplace.model_copy(update={"count": 2})], DELTA)
    )
    with pytest.raises(InvalidPrivacyParameterError):
        release_epsilon([laplace], 0.0, accountant="halved")


@pytest.mark.usefixtures("scratch_registry")
def test_registering_refuses_taken_names_abstract_classes_and_mismatched_names() -> None:
    with pytest.raises(InvalidPrivacyParameterError, match="already registered"):
        register_accountant("pld", PLDPrivacyAccountant)
    with pytest.raises(InvalidPrivacyParameterError, match="not a concrete"):
        register_accountant("other", dict)  # type: ignore[arg-type]
    with pytest.raises(InvalidPrivacyParameterError, match="not a concrete"):
        register_accountant("approximate", ApproximateDPAccountant)  # type: ignore[type-abstract]
    with pytest.raises(InvalidPrivacyParameterError, match="register it under that name"):
        register_accountant("conservative", _Doubled)
    with pytest.raises(InvalidPrivacyParameterError, match="non-empty"):
        register_accountant("", _Doubled)
    with pytest.raises(UnknownAccountantError):
        create_accountant("conservative")
