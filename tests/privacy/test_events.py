"""Tests of pubsubml.privacy.events: DPEvent validation, immutability and JSON round trips."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.events import MAX_INNER_EVENTS, DPEvent

GAUSS = DPEvent(mechanism="gaussian", noise_multiplier=2.0)


@pytest.mark.parametrize(
    "fields",
    [
        {"mechanism": "gaussian", "noise_multiplier": 1.0, "count": 0},
        {"mechanism": "gaussian", "noise_multiplier": 1.0, "count": -3},
        {"mechanism": "gaussian"},
        {"mechanism": "gaussian", "noise_multiplier": 0.0},
        {"mechanism": "gaussian", "noise_multiplier": math.inf},
        {"mechanism": "laplace", "noise_multiplier": -1.0},
        {"mechanism": "gaussian", "noise_multiplier": 1.0, "sample_rate": 0.5},
        {"mechanism": "laplace", "noise_multiplier": 1.0, "sample_rate": 0.5},
        {"mechanism": "subsampled_gaussian", "noise_multiplier": 1.0, "sample_rate": 0.0},
        {"mechanism": "subsampled_gaussian", "noise_multiplier": 1.0, "sample_rate": 1.5},
        {"mechanism": "approx_dp", "delta": 0.0},
        {"mechanism": "approx_dp", "epsilon": 0.0, "delta": 0.0},
        {"mechanism": "approx_dp", "epsilon": math.inf, "delta": 0.0},
        {"mechanism": "approx_dp", "epsilon": 1.0},
        {"mechanism": "approx_dp", "epsilon": 1.0, "delta": 1.0},
        {"mechanism": "approx_dp", "epsilon": 1.0, "delta": -1e-9},
        {"mechanism": "exponential", "noise_multiplier": 1.0},
        {"mechanism": "gaussian", "noise_multiplier": 1.0, "count": "many"},
        {"mechanism": "gaussian", "noise_multiplier": 1.0, "sensitivity": 2.0},
    ],
)
def test_malformed_events_raise_the_privacy_error(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        DPEvent(**fields)


def test_selection_inner_events_must_be_add_remove() -> None:
    inner = DPEvent(mechanism="gaussian", noise_multiplier=1.0, neighbouring="replace_one")

    with pytest.raises(InvalidPrivacyParameterError, match="add/remove"):
        DPEvent(mechanism="repeat_and_select", events=(inner,), mean=2.0)


def test_selection_holds_up_to_the_maximum_number_of_inner_events() -> None:
    event = DPEvent(
        mechanism="repeat_and_select", events=(GAUSS,) * MAX_INNER_EVENTS, mean=2.0, shape=0.0
    )

    assert len(event.events or ()) == MAX_INNER_EVENTS


def test_replace_one_is_accepted_for_single_releases() -> None:
    for mechanism in ("gaussian", "laplace"):
        event = DPEvent(mechanism=mechanism, noise_multiplier=1.0, neighbouring="replace_one")
        assert event.neighbouring == "replace_one"


def test_events_are_immutable() -> None:
    with pytest.raises(ValidationError):
        GAUSS.count = 5  # type: ignore[misc]
    assert GAUSS.count == 1


def test_equal_events_are_interchangeable_as_keys() -> None:
    same = DPEvent(mechanism="gaussian", noise_multiplier=2.0, count=1)
    other = DPEvent(mechanism="gaussian", noise_multiplier=2.0, count=2)

    assert same == GAUSS and hash(same) == hash(GAUSS)
    assert other != GAUSS
    assert len({GAUSS, same, other}) == 2


@settings(max_examples=50, deadline=None)
@given(
    sigma=st.floats(1e-3, 1e3),
    q=st.floats(1e-6, 1.0),
    count=st.integers(1, 10**6),
)
def test_dp_sgd_events_round_trip_through_json(sigma: float, q: float, count: int) -> None:
    event = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=count
    )

    again = DPEvent.model_validate_json(event.model_dump_json())

    assert again == event


def test_approx_dp_accepts_delta_zero_and_a_selection_keeps_its_poisson_law() -> None:
    pure = DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0)
    selection = DPEvent(mechanism="repeat_and_select", events=(GAUSS,), mean=3.0)

    assert pure.delta == 0.0
    assert selection.shape is None
    assert "shape" not in selection.model_dump(mode="json")
    assert DPEvent.model_validate_json(selection.model_dump_json()) == selection
