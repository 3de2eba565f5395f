"""Tests of pubsubml.registry.services.subscription_match: which models a subscription receives."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pubsubml.registry.services.subscription_match import SubscriptionMatch
from pubsubml.registry.tables import (
    SubscriptionRow,
)
from pubsubml.schema import Channel

MODEL = {
    "publisher_id": 1,
    "task": "classification",
    "classes": [0, 1],
    "features": ["age", "sex"],
    "public": True,
    "visible_to": frozenset(),
}


@pytest.mark.parametrize(
    ("changes", "subscription", "expected"),
    [
        ({}, {}, True),
        ({"publisher_id": 2}, {}, False),  # the subscriber's own model
        ({"task": "regression", "classes": None}, {}, False),
        ({"features": ["age"]}, {}, False),  # no term is covered
        ({"features": ["wbc"]}, {}, True),  # the second term
        ({"public": False}, {}, False),
        ({"public": False, "visible_to": frozenset({2})}, {}, True),
        ({"public": False, "visible_to": frozenset({3})}, {}, False),
        ({"classes": [0, 1, 2]}, {}, False),  # a label outside the subscription's set
        ({"classes": [1]}, {}, True),  # a subset of the label set
        ({"classes": [0, 1, 2]}, {"classes": None}, True),  # no label set: any labels
    ],
)
def test_accepts_follows_visibility_task_labels_and_channel(
    changes: dict[str, Any], subscription: dict[str, Any], expected: bool
) -> None:
    fields: dict[str, Any] = {
        "subscription_id": "s",
        "site_id": 2,
        "channel": Channel.parse("age & sex | wbc"),
        "task": "classification",
        "classes": frozenset({0, 1}),
        **subscription,
    }
    match = SubscriptionMatch(**fields)
    assert match.accepts(**{**MODEL, **changes}) is expected


def test_from_row_parses_the_stored_channel_and_labels() -> None:
    row = SubscriptionRow(
        id="s1", site_id=7, channel="wbc | sex & age", task="regression", classes_json=None
    )
    match = SubscriptionMatch.from_row(row)
    assert match == SubscriptionMatch("s1", 7, Channel.parse("wbc | age & sex"), "regression", None)
    row.classes_json = json.dumps(["yes", 3])
    assert SubscriptionMatch.from_row(row).classes == frozenset({"yes", 3})
