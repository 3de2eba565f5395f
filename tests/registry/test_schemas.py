"""Tests of pubsubml.registry.schemas: the validation rules of the registry's JSON bodies."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from pubsubml.registry.schemas import (
    ContributionReport,
    ErrorBody,
    FeatureList,
    LedgerPublic,
    ScopeRegister,
    SiteBase,
    SiteCreate,
    SitePublic,
    SubscriptionCreate,
    TokenRotate,
    check_site_name,
)

KEY = base64.b64encode(bytes(range(32))).decode()
MODEL = "0123456789abcdef" * 2


def _site(**changes: Any) -> dict[str, Any]:
    return {
        "name": "hospital-1",
        "roles": "both",
        "public_key": KEY,
        "epsilon_budget": 2.0,
        "delta_budget": 1e-5,
        **changes,
    }


# ---- site names -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a", "A", "h_1-b", "a" + "x" * 63])
def test_valid_site_names(name: str) -> None:
    assert check_site_name(name) == name
    assert SiteBase(**_site(name=name)).name == name


@pytest.mark.parametrize(
    "name", ["", "1a", "-a", "_a", "a b", "a/b", "a.b", "a" + "x" * 64, "é", "a\x00"]
)
def test_invalid_site_names(name: str) -> None:
    with pytest.raises(ValueError, match="invalid site name"):
        check_site_name(name)
    with pytest.raises(ValidationError):
        SiteBase(**_site(name=name))


def test_a_site_name_must_be_a_string() -> None:
    with pytest.raises(ValueError, match="invalid site name '7'"):
        check_site_name(7)  # type: ignore[arg-type]


def test_a_trailing_newline_is_not_part_of_a_valid_site_name() -> None:
    with pytest.raises(ValueError, match="invalid site name"):
        check_site_name("hospital\n")
    with pytest.raises(ValidationError, match="invalid site name"):
        SubscriptionCreate(channel="age", task="classification", site="b\n")


# ---- sites ------------------------------------------------------------------------------
def test_a_subscriber_needs_no_key_but_a_publisher_does() -> None:
    assert SiteBase(**_site(roles="subscriber", public_key=None)).public_key is None

    for roles in ("publisher", "both"):
        with pytest.raises(ValidationError, match="needs its Ed25519 public_key"):
            SiteBase(**_site(roles=roles, public_key=None))


@pytest.mark.parametrize(
    "key",
    [
        KEY[:-1],  # no padding
        KEY.replace("=", "A"),
        base64.urlsafe_b64encode(b"\xff" * 32).decode(),  # url-safe alphabet
        base64.b64encode(bytes(33)).decode(),
        " " + KEY,
        KEY + "\n",
    ],
)
def test_public_keys_must_be_standard_base64_of_32_bytes(key: str) -> None:
    with pytest.raises(ValidationError, match="public_key must be the standard base64"):
        SiteBase(**_site(public_key=key))


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("epsilon_budget", 0.0, "greater than 0"),
        ("epsilon_budget", float("inf"), "must be finite"),
        ("epsilon_budget", float("nan"), "greater than 0"),
        ("delta_budget", 0.0, "greater than 0"),
        ("delta_budget", 1.0, "less than 1"),
        ("roles", "admin", "roles"),
        ("token", "x", "Extra inputs"),
    ],
)
def test_site_budget_and_role_rules(field: str, value: Any, fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        SiteBase(**_site(**{field: value}))


@pytest.mark.parametrize(("days", "ok"), [(None, True), (1, True), (3650, True), (0, False)])
def test_token_lifetimes(days: int | None, ok: bool) -> None:
    if ok:
        assert SiteCreate(**_site(token_expires_in_days=days)).token_expires_in_days == days
        assert TokenRotate(expires_in_days=days).expires_in_days == days
    else:
        with pytest.raises(ValidationError):
            SiteCreate(**_site(token_expires_in_days=days))
        with pytest.raises(ValidationError):
            TokenRotate(expires_in_days=days)
    with pytest.raises(ValidationError):
        TokenRotate(expires_in_days=3651)


def test_site_public_reads_attributes_of_a_row() -> None:
    now = datetime(2025, 1, 2, tzinfo=UTC)
    row = SimpleNamespace(**_site(), key_id="k" * 64, created_at=now, token_created_at=now)

    public = SitePublic.model_validate(row)

    assert public.name == "hospital-1" and public.key_id == "k" * 64
    assert public.token_expires_at is None and public.token_revoked_at is None
    assert "token" not in public.model_dump()


# ---- subscriptions ----------------------------------------------------------------------
def test_subscription_defaults() -> None:
    sub = SubscriptionCreate(channel="age & sex", task="classification")

    assert sub.site is None and sub.classes is None


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"task": "regression", "classes": [0, 1]}, "regression subscription takes no classes"),
        ({"classes": [0, 0]}, "unique"),
        ({"classes": ["a", "b", "a"]}, "unique"),
        ({"site": "../x"}, "invalid site name"),
        ({"channel": ""}, "at least 1 character"),
        ({"channel": "a" * 8193}, "at most 8192"),
        ({"classes": list(range(1025))}, "at most 1024"),
        ({"task": "ranking"}, "task"),
        ({"extra": 1}, "Extra inputs"),
    ],
)
def test_invalid_subscriptions(changes: dict[str, Any], fragment: str) -> None:
    body = {"channel": "age", "task": "classification", **changes}

    with pytest.raises(ValidationError, match=fragment):
        SubscriptionCreate(**body)


def test_labels_of_different_types_are_distinct() -> None:
    sub = SubscriptionCreate(channel="age", task="classification", classes=[1, "1", 2.5])

    assert sub.classes == [1, "1", 2.5]


def test_regression_without_classes_and_a_named_site() -> None:
    sub = SubscriptionCreate(channel="age", task="regression", site="b")

    assert (sub.task, sub.site, sub.classes) == ("regression", "b", None)


# ---- scopes -----------------------------------------------------------------------------
def test_scope_label_boundaries() -> None:
    labels = ["x" * 128, "2024-01 é", *[f"c{i}" for i in range(254)]]

    assert ScopeRegister(scopes=labels).scopes == labels


@pytest.mark.parametrize("labels", [["x" * 129], ["line\nbreak"], ["nul\x00"], []])
def test_invalid_scope_labels(labels: list[str]) -> None:
    with pytest.raises(ValidationError):
        ScopeRegister(scopes=labels)


# ---- contributions ----------------------------------------------------------------------
def test_contribution_scores_may_sum_to_one_within_rounding() -> None:
    ids = [f"{i:032x}" for i in range(3)]
    scores = dict(zip(ids, [0.5, 0.25, 0.25 + 5e-7], strict=True))

    assert ContributionReport(subscriber="b", scores=scores).scores == scores
    assert ContributionReport(subscriber="b", scores={}).scores == {}


@pytest.mark.parametrize(
    ("scores", "fragment"),
    [
        ({MODEL: 0.6, "f" * 32: 0.4 + 1e-5}, "sum to at most 1"),
        ({MODEL: float("nan")}, "finite"),
        ({MODEL: float("inf")}, "finite"),
        ({MODEL: 1.5}, r"in \[0, 1\]"),
        ({MODEL.upper(): 0.1}, "invalid model id"),
        ({MODEL[:-1]: 0.1}, "invalid model id"),
        ({MODEL + "0": 0.1}, "invalid model id"),
    ],
)
def test_invalid_contribution_scores(scores: dict[str, float], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        ContributionReport(subscriber="b", scores=scores)


def test_contribution_subscriber_must_be_a_site_name() -> None:
    with pytest.raises(ValidationError, match="invalid site name"):
        ContributionReport(subscriber="b c", scores={MODEL: 0.1})


def test_a_model_id_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ValidationError, match="invalid model id"):
        ContributionReport(subscriber="b", scores={MODEL + "\n": 0.1})


# ---- other bodies -----------------------------------------------------------------------
def test_feature_list_size_limit() -> None:
    feature = {"name": "f", "lower": 0.0, "upper": 1.0, "default": 0.5}

    assert len(FeatureList(features=[feature] * 4096).features) == 4096
    with pytest.raises(ValidationError, match="at most 4096"):
        FeatureList(features=[feature] * 4097)


def test_ledger_defaults() -> None:
    ledger = LedgerPublic(
        site="a",
        epsilon_budget=1.0,
        delta_budget=1e-5,
        spent_epsilon=0.0,
        remaining_epsilon=1.0,
        releases=[],
    )

    assert ledger.neighbouring == "add_remove" and ledger.scopes == []


def test_error_body_shape() -> None:
    body = ErrorBody(error="not_found", detail="nothing here")

    assert body.model_dump() == {"error": "not_found", "detail": "nothing here", "errors": None}
