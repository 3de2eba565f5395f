"""Tests of pubsubml.audit.result: AuditResult's verdict, tightness and table row."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from pubsubml.audit.result import AuditResult


def _result(**changes: Any) -> AuditResult:
    fields: dict[str, Any] = {
        "target": "dpsgd-mlp",
        "variant": "correct",
        "claimed_epsilon": 2.0,
        "delta": 1e-5,
        "lower_bound": 0.5,
        "confidence": 0.95,
        "method": "one-run",
        "canary": "gradient",
        "canaries": 1000,
        "guesses": 100,
        "correct": 90,
        "runtime_s": 1.5,
        "details": {"steps": 30, "sigma": 1.1},
    }
    return AuditResult(**{**fields, **changes})


@pytest.mark.parametrize(
    ("lower_bound", "violated"), [(0.0, False), (1.99, False), (2.0, False), (2.01, True)]
)
def test_a_claim_is_violated_only_when_the_bound_exceeds_it(
    lower_bound: float, violated: bool
) -> None:
    assert _result(lower_bound=lower_bound).violated is violated


def test_an_infinite_claim_is_never_violated() -> None:
    assert not _result(claimed_epsilon=math.inf, lower_bound=50.0).violated


@pytest.mark.parametrize(
    ("claimed", "bound", "tightness"),
    [(2.0, 0.5, 0.25), (2.0, 3.0, 1.5), (math.inf, 3.0, 0.0), (0.0, 1.0, 0.0), (-1.0, 1.0, 0.0)],
)
def test_tightness_is_the_share_of_a_finite_positive_claim(
    claimed: float, bound: float, tightness: float
) -> None:
    assert _result(claimed_epsilon=claimed, lower_bound=bound).tightness == tightness


def test_a_row_holds_every_field_the_verdict_and_prefixed_details() -> None:
    result = _result(lower_bound=3.0)

    row = result.as_row()

    scalar = {f.name for f in dataclasses.fields(AuditResult)} - {"details"}
    assert set(row) == scalar | {"violated", "tightness", "detail_steps", "detail_sigma"}
    assert all(row[name] == getattr(result, name) for name in scalar)
    assert (row["violated"], row["tightness"]) == (True, 1.5)
    assert (row["detail_steps"], row["detail_sigma"]) == (30, 1.1)


def test_results_without_details_have_independent_empty_details() -> None:
    fields = {k: v for k, v in dataclasses.asdict(_result()).items() if k != "details"}
    first, second = AuditResult(**fields), AuditResult(**fields)

    first.details["note"] = "x"

    assert second.details == {} and "detail_note" not in second.as_row()


def test_a_result_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        _result().lower_bound = 9.0  # type: ignore[misc]
