"""Tests of pubsubml.artifacts.privacy_record: DP event records and the ε recomputed from them."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError
from scipy.optimize import brentq
from scipy.stats import norm

from pubsubml.artifacts.privacy_record import (
    MAX_EVENTS,
    PrivacyRecord,
    check_privacy_record,
    summarize_events,
)
from pubsubml.errors import InvalidPrivacyParameterError, UntrustedArtifactError
from pubsubml.privacy.accountants import release_epsilon
from pubsubml.privacy.events import DPEvent

DELTA = 1e-5
SGD = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.2, sample_rate=0.02, count=50)


def _analytic_gaussian_epsilon(sigma: float, delta: float) -> float:
    """ε of one Gaussian release of sensitivity 1 (Balle & Wang 2018, Thm 8), by root finding."""

    def excess(eps: float) -> float:
        a, b = 1.0 / (2.0 * sigma), eps * sigma
        return float(norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b) - delta)

    return float(brentq(excess, 1e-9, 100.0, xtol=1e-12))


# ---- summarize_events -----------------------------------------------------------------------
def test_summary_of_identical_mechanisms() -> None:
    other = SGD.model_copy(update={"count": 30})

    summary = summarize_events([SGD, other])

    assert summary == {
        "mechanism": "subsampled_gaussian",
        "noise_multiplier": 1.2,
        "sample_rate": 0.02,
        "steps": 80,
    }


def test_summary_of_mixed_mechanisms_keeps_only_what_is_shared() -> None:
    gaussian = DPEvent(mechanism="gaussian", noise_multiplier=1.2)  # sample rate 1.0, ignored
    laplace = DPEvent(mechanism="laplace", noise_multiplier=3.0, count=4)

    assert summarize_events([SGD, gaussian]) == {
        "mechanism": None,
        "noise_multiplier": 1.2,
        "sample_rate": 0.02,
        "steps": 50,
    }
    assert summarize_events([gaussian, laplace]) == {
        "mechanism": None,
        "noise_multiplier": None,
        "sample_rate": None,
        "steps": None,
    }


def test_summary_of_no_events_is_empty() -> None:
    assert set(summarize_events([]).values()) == {None}


# ---- PrivacyRecord --------------------------------------------------------------------------
def test_private_record_survives_json() -> None:
    record = PrivacyRecord.from_events(
        [SGD], epsilon=3.5, delta=DELTA, accountant="rdp", data_scope=["2024-q1", "2024-q2"]
    )

    again = PrivacyRecord.model_validate_json(record.model_dump_json())

    assert again == record
    assert json.loads(record.model_dump_json())["epsilon"] == 3.5
    assert again.data_scope == ["2024-q1", "2024-q2"] and again.is_private


def test_non_private_record_reads_the_infinity_string() -> None:
    text = json.dumps({"events": [], "epsilon": "Infinity", "delta": 0.0})

    record = PrivacyRecord.model_validate_json(text)

    assert math.isinf(record.epsilon) and not record.is_private
    assert record.model_dump()["epsilon"] == math.inf  # only JSON uses the string


@pytest.mark.parametrize(
    ("epsilon", "delta", "message"),
    [
        (math.nan, DELTA, "epsilon must be > 0"),
        (0.0, DELTA, "epsilon must be > 0"),
        (1.0, -1e-9, "delta must be in"),
        (1.0, 1.0, "delta must be in"),
    ],
)
def test_out_of_range_parameters_are_rejected(epsilon: float, delta: float, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PrivacyRecord.from_events([SGD], epsilon=epsilon, delta=delta, accountant="pld")


def test_non_private_record_must_not_claim_an_accountant() -> None:
    with pytest.raises(ValidationError, match="non-private model"):
        PrivacyRecord.from_events([], epsilon=math.inf, delta=0.0, accountant="pure")
    with pytest.raises(ValidationError, match="non-private model"):
        PrivacyRecord.from_events([], epsilon=5.0, delta=0.0)


@pytest.mark.parametrize("scope", ["", "q1\nq2", "\x7f"])
def test_data_scope_entries_are_checked(scope: str) -> None:
    with pytest.raises(ValidationError, match="data_scope entry"):
        PrivacyRecord.from_events(
            [SGD], epsilon=2.0, delta=DELTA, accountant="pld", data_scope=[scope]
        )


def test_number_of_events_is_limited() -> None:
    events = [DPEvent(mechanism="approx_dp", epsilon=0.001, delta=0.0)] * (MAX_EVENTS + 1)

    with pytest.raises(ValidationError):
        PrivacyRecord.from_events(events, epsilon=2.0, delta=0.0, accountant="pure")


# ---- release_epsilon ------------------------------------------------------------------------
def test_pld_is_tight_for_one_gaussian_release() -> None:
    sigma = 2.0
    events = [DPEvent(mechanism="gaussian", noise_multiplier=sigma)]

    pld = release_epsilon(events, DELTA, "pld")
    rdp = release_epsilon(events, DELTA, "rdp")

    assert pld == pytest.approx(_analytic_gaussian_epsilon(sigma, DELTA), rel=1e-4)
    assert rdp > pld  # RDP is an upper bound, looser than the exact curve


def test_pure_composition_counts_add_remove_events_twice_beside_replace_one_events() -> None:
    approx = DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0, count=2)
    laplace = DPEvent(mechanism="laplace", noise_multiplier=4.0, neighbouring="replace_one")

    mixed = release_epsilon([approx, laplace], 0.0, "pure")

    assert mixed == pytest.approx(2 * 2 * 0.5 + 1 / 4.0)
    assert release_epsilon([approx], 0.0, "pure") == pytest.approx(1.0)


def test_pure_composition_refuses_approximate_dp_events() -> None:
    approx = DPEvent(mechanism="approx_dp", epsilon=0.5, delta=1e-6)

    with pytest.raises(InvalidPrivacyParameterError, match="not pure"):
        release_epsilon([approx], 0.0, "pure")


# ---- check_privacy_record -------------------------------------------------------------------
def test_non_private_records_check_as_infinite() -> None:
    record = PrivacyRecord.from_events([], epsilon=math.inf, delta=0.0)

    assert check_privacy_record(record) == math.inf


def test_check_returns_the_recomputed_epsilon_and_tolerates_rounding() -> None:
    epsilon = release_epsilon([SGD], DELTA, "rdp")
    rounded = PrivacyRecord.from_events(
        [SGD], epsilon=epsilon * (1 - 1e-7), delta=DELTA, accountant="rdp"
    )
    generous = PrivacyRecord.from_events([SGD], epsilon=2 * epsilon, delta=DELTA, accountant="rdp")

    assert check_privacy_record(rounded) == pytest.approx(epsilon, rel=1e-12)
    assert check_privacy_record(generous) == pytest.approx(epsilon, rel=1e-12)
    with pytest.raises(UntrustedArtifactError, match="rdp accountant"):
        check_privacy_record(rounded, rtol=1e-9)


def test_a_record_its_accountant_cannot_account_is_untrusted() -> None:
    gaussian = DPEvent(mechanism="gaussian", noise_multiplier=2.0)
    record = PrivacyRecord.from_events([gaussian], epsilon=1.0, delta=0.0, accountant="pure")

    with pytest.raises(UntrustedArtifactError, match="cannot be accounted"):
        check_privacy_record(record)
