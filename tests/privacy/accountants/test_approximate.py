"""Tests of pubsubml.privacy.accountants.approximate: δ checked, events grouped, ε cached."""

from __future__ import annotations

import math
from typing import ClassVar

import pytest

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.accountants.approximate import ApproximateDPAccountant
from pubsubml.privacy.accountants.pld import PLDPrivacyAccountant
from pubsubml.privacy.accountants.rdp import RDPPrivacyAccountant
from pubsubml.privacy.events import DPEvent

DELTA = 1e-5


class _Counting(ApproximateDPAccountant):
    """ε = Σ count/σ over grouped events, counting how often the backend is asked."""

    calls: ClassVar[list[tuple[DPEvent, ...]]] = []

    @classmethod
    def mechanism(cls) -> str:
        return "counting"

    @classmethod
    def grouped_epsilon(cls, events: tuple[DPEvent, ...], delta: float) -> float:
        cls.calls.append(events)
        return math.fsum(e.count / float(e.noise_multiplier or 1.0) for e in events)


@pytest.mark.parametrize("accountant", [PLDPrivacyAccountant, RDPPrivacyAccountant])
@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, math.nan])
def test_a_delta_outside_the_open_unit_interval_is_refused(
    accountant: type[ApproximateDPAccountant], delta: float
) -> None:
    with pytest.raises(InvalidPrivacyParameterError, match="delta"):
        accountant.epsilon_of([DPEvent(mechanism="gaussian", noise_multiplier=1.0)], delta)


def test_the_backend_sees_grouped_events_once_per_distinct_composition() -> None:
    _Counting.calls = []
    a = DPEvent(mechanism="gaussian", noise_multiplier=2.0)
    b = DPEvent(mechanism="laplace", noise_multiplier=4.0)

    first = _Counting.epsilon_of([a, b, a], DELTA)
    again = _Counting.epsilon_of([a, a, b], DELTA)  # grouped, the same composition
    empty = _Counting.epsilon_of([], DELTA)

    assert first == again == pytest.approx(2 / 2.0 + 1 / 4.0)
    assert empty == 0.0
    assert _Counting.calls == [(a.model_copy(update={"count": 2}), b)]


def test_a_mixed_composition_is_converted_before_the_backend_sees_it() -> None:
    _Counting.calls = []
    add = DPEvent(mechanism="laplace", noise_multiplier=4.0)
    rep = DPEvent(mechanism="laplace", noise_multiplier=8.0, neighbouring="replace_one")

    epsilon = _Counting.epsilon_of([add, rep], DELTA)

    assert epsilon == pytest.approx(1 / 2.0 + 1 / 8.0)  # the add/remove noise halved
    assert all(e.neighbouring == "replace_one" for group in _Counting.calls for e in group)
