"""The repeat_and_select DP event, its accounting, and the law of the number of runs."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import dp_accounting
import numpy as np
import pytest
from dp_accounting.dp_event import RepeatAndSelectDpEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsubml.artifacts.privacy_record import PrivacyRecord, check_privacy_record
from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.privacy.repetitions import (
    repeat_and_select_event,
    sample_repetitions,
    truncated_negative_binomial_mean,
)

logging.getLogger("absl").setLevel(logging.ERROR)
TRAIN = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.1, sample_rate=0.2, count=150)
SCORE = DPEvent(mechanism="gaussian", noise_multiplier=10.0)


def _reference(mean: float, shape: float, count: int = 1, delta: float = 1e-5) -> float:
    """ε of the same selection straight from dp-accounting's RDP accountant."""
    one_run = dp_accounting.ComposedDpEvent(
        [
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(0.2, dp_accounting.GaussianDpEvent(1.1)), 150
            ),
            dp_accounting.GaussianDpEvent(10.0),
        ]
    )
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(RepeatAndSelectDpEvent(one_run, mean, shape), count)
    return float(accountant.get_epsilon(delta))


# ---- accounting ------------------------------------------------------------------------------
@pytest.mark.parametrize(("mean", "shape"), [(1.0, 1.0), (5.0, 1.0), (5.0, 0.0), (10.0, None)])
@pytest.mark.parametrize("backend", ["pld", "rdp"])
def test_epsilon_is_dp_accountings_repeat_and_select(
    mean: float, shape: float | None, backend: Any
) -> None:
    event = repeat_and_select_event([TRAIN, SCORE], mean=mean, shape=shape)

    epsilon = compute_epsilon([event], 1e-5, backend=backend)

    assert epsilon == pytest.approx(_reference(mean, math.inf if shape is None else shape))


def test_selection_costs_more_than_one_run_and_grows_with_the_mean() -> None:
    one_run = compute_epsilon([TRAIN, SCORE], 1e-5, backend="rdp")

    costs = [
        compute_epsilon([repeat_and_select_event([TRAIN, SCORE], mean=m, shape=1.0)], 1e-5)
        for m in (1.0, 3.0, 10.0)
    ]

    assert one_run < costs[0] < costs[1] < costs[2]


def test_count_composes_independent_selections() -> None:
    event = repeat_and_select_event([TRAIN, SCORE], mean=3.0, shape=1.0)

    twice = compute_epsilon([event.model_copy(update={"count": 2})], 1e-5)

    assert twice == pytest.approx(_reference(3.0, 1.0, count=2))
    assert twice == compute_epsilon([event, event], 1e-5)


def test_composition_with_other_events_is_accounted_by_rdp() -> None:
    event = repeat_and_select_event([TRAIN, SCORE], mean=3.0, shape=1.0)
    other = DPEvent(mechanism="gaussian", noise_multiplier=20.0)

    pld = compute_epsilon([event, other], 1e-5, backend="pld")

    assert pld == compute_epsilon([event, other], 1e-5, backend="rdp")
    assert pld > compute_epsilon([event], 1e-5)


def test_ledger_charges_a_selection_like_any_release() -> None:
    event = repeat_and_select_event([TRAIN, SCORE], mean=3.0, shape=1.0)
    ledger = PrivacyLedger(site="s", epsilon_budget=50.0, delta=1e-5)

    spent = ledger.charge(Release(release_id="search", events=(event,)))

    assert spent == pytest.approx(_reference(3.0, 1.0))
    assert PrivacyLedger.from_json(ledger.to_json()).spent_epsilon() == spent


# ---- the event -----------------------------------------------------------------------------
def test_json_round_trip_and_the_card_record() -> None:
    event = repeat_and_select_event([TRAIN, SCORE], mean=4.0, shape=None)
    epsilon = compute_epsilon([event], 1e-5)

    record = PrivacyRecord.from_events([event], epsilon=epsilon, delta=1e-5, accountant="pld")
    parsed = PrivacyRecord.model_validate_json(record.model_dump_json())

    assert DPEvent.model_validate_json(event.model_dump_json()) == event
    assert parsed == record and check_privacy_record(parsed) == pytest.approx(epsilon)
    understated = record.model_copy(update={"epsilon": epsilon / 2})
    with pytest.raises(ValueError, match="claims"):
        check_privacy_record(understated)


def test_other_events_serialize_as_before() -> None:
    assert json.loads(TRAIN.model_dump_json()) == {
        "mechanism": "subsampled_gaussian",
        "noise_multiplier": 1.1,
        "sample_rate": 0.2,
        "count": 150,
        "epsilon": None,
        "delta": None,
    }


@pytest.mark.parametrize(
    "fields",
    [
        {"events": (), "mean": 2.0, "shape": 1.0},
        {"events": (TRAIN,), "mean": 0.5, "shape": 1.0},
        {"events": (TRAIN,), "mean": math.inf, "shape": 1.0},
        {"events": (TRAIN,), "mean": 2.0, "shape": -1.0},
        {"events": (TRAIN,), "mean": 2.0, "shape": math.inf},
        {"events": (DPEvent(mechanism="approx_dp", epsilon=1.0, delta=0.0),), "mean": 2.0},
        {"events": (TRAIN,), "mean": 2.0, "noise_multiplier": 1.0},
        {"events": (TRAIN,) * 65, "mean": 2.0},
    ],
)
def test_malformed_repeat_and_select_events_raise(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        DPEvent(mechanism="repeat_and_select", **fields)


def test_nested_selections_and_stray_fields_raise() -> None:
    inner = repeat_and_select_event([TRAIN], mean=2.0, shape=1.0)

    with pytest.raises(InvalidPrivacyParameterError, match="repeat_and_select"):
        repeat_and_select_event([inner], mean=2.0, shape=1.0)
    with pytest.raises(InvalidPrivacyParameterError, match="only to repeat_and_select"):
        DPEvent(mechanism="gaussian", noise_multiplier=1.0, mean=2.0)


# ---- the number of runs ----------------------------------------------------------------------
@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 3.0])
def test_the_law_has_the_requested_mean_and_support(shape: float) -> None:
    rng = np.random.default_rng(0)

    draws = np.array([sample_repetitions(5.0, shape, rng) for _ in range(20000)])

    assert draws.min() >= 1
    assert draws.mean() == pytest.approx(5.0, rel=0.05)


def test_geometric_law_matches_its_pmf() -> None:
    rng = np.random.default_rng(1)

    draws = np.array([sample_repetitions(4.0, 1.0, rng) for _ in range(40000)])

    for k in (1, 2, 3, 6):
        assert np.mean(draws == k) == pytest.approx(0.25 * 0.75 ** (k - 1), abs=0.01)


@settings(max_examples=50, deadline=None)
@given(gamma=st.floats(0.01, 1.0), shape=st.sampled_from([0.0, 0.5, 1.0, 2.0]))
def test_mean_formula_matches_dp_accounting(gamma: float, shape: float) -> None:
    from dp_accounting.rdp.rdp_privacy_accountant import _truncated_negative_binomial_mean

    ours = truncated_negative_binomial_mean(gamma, shape)

    assert ours == pytest.approx(_truncated_negative_binomial_mean(gamma, shape), rel=1e-9)


def test_mean_one_is_a_single_run() -> None:
    rng = np.random.default_rng(0)

    assert {sample_repetitions(1.0, s, rng) for s in (0.0, 1.0, 2.0) for _ in range(50)} == {1}


@pytest.mark.parametrize(("mean", "shape"), [(0.0, 1.0), (-1.0, 1.0), (0.5, 1.0), (2.0, -1.0)])
def test_bad_laws_raise(mean: float, shape: float) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        sample_repetitions(mean, shape, np.random.default_rng(0))
