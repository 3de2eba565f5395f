"""LocalHub: channel matching, feed cursors, idempotent publish, label compatibility."""

from __future__ import annotations

import hashlib
import inspect
import itertools
import threading
from datetime import UTC, datetime

import pytest

from pubsubml.artifacts.card import ModelCard, PrivacyRecord, derive_model_id
from pubsubml.errors import DataValidationError, DigestMismatchError, NotFoundError
from pubsubml.hub import Hub, LocalHub
from pubsubml.privacy.events import DPEvent
from pubsubml.registry.client import RegistryClient
from pubsubml.schema import Channel, FeatureSchema


def make_card(
    publisher: str,
    features: list[str],
    *,
    task: str = "classification",
    classes: list[int | str] | None = None,
    payload: bytes | None = None,
) -> tuple[ModelCard, bytes]:
    weights = payload if payload is not None else f"{publisher}:{features}:{classes}".encode()
    digest = hashlib.sha256(weights).hexdigest()
    classes = None if task == "regression" else (classes or [0, 1])
    event = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.1, count=10
    )
    card = ModelCard(
        model_id=derive_model_id(publisher, digest),
        publisher=publisher,
        task=task,
        classes=classes,
        input_schema=FeatureSchema.numeric(features),
        output=[f"p{c}" for c in classes] if classes else ["y"],
        privacy=PrivacyRecord.from_events([event], epsilon=1.0, delta=1e-5, accountant="pld"),
        created_at=datetime.now(UTC),
        format="onnx",
        weights_sha256=digest,
    )
    return card, weights


@pytest.mark.parametrize("hub_class", [LocalHub, RegistryClient])
def test_hubs_match_the_protocol_signatures(hub_class: type) -> None:
    # Every method of the Hub protocol exists with the protocol's parameters (names, kinds and
    # defaults, in order), so code written against Hub runs on either implementation; an
    # implementation may add keyword-only parameters that have defaults.
    members = [n for n, v in vars(Hub).items() if callable(v) and not n.startswith("_")]

    assert members
    for name in members:
        expected = list(inspect.signature(getattr(Hub, name)).parameters.values())
        actual = list(inspect.signature(getattr(hub_class, name)).parameters.values())
        extra = [p for p in actual if p.name not in {e.name for e in expected}]
        shared = [p for p in actual if p not in extra]
        where = f"{hub_class.__name__}.{name}"
        assert [(p.name, p.kind, p.default) for p in shared] == [
            (p.name, p.kind, p.default) for p in expected
        ], where
        assert all(p.kind is p.KEYWORD_ONLY and p.default is not p.empty for p in extra), where


def test_channel_matching_follows_terms() -> None:
    # Prepare: subscriber s4 with channel A ∨ C (pubsub-ml.txt Example 1).
    hub = LocalHub()
    ids = {
        name: hub.publish(*make_card(name, feats))
        for name, feats in [("h1", ["A", "B"]), ("h2", ["B", "C"]), ("h3", ["B", "D"])]
    }
    sub = hub.subscribe("h4", Channel.parse("A | C"), task="classification")
    both = hub.subscribe("h5", Channel.parse("A & B"), task="classification")
    # Execute / Assert
    assert [i.model_id for i in hub.poll(sub)] == [ids["h1"], ids["h2"]]
    assert [i.model_id for i in hub.poll(both)] == [ids["h1"]]


def test_cursor_resume_without_loss_or_duplication() -> None:
    hub = LocalHub()
    sub = hub.subscribe("s", Channel.parse("x"), task="classification")
    seen: list[str] = []
    cursor = 0
    for round_ in range(4):
        for k in range(3):
            hub.publish(*make_card(f"p{round_}{k}", ["x"]))
            hub.publish(*make_card(f"q{round_}{k}", ["y"]))  # never matches
        items = hub.poll(sub, after=cursor)
        assert all(a.cursor < b.cursor for a, b in itertools.pairwise(items))
        assert all(i.cursor > cursor for i in items)
        seen += [i.model_id for i in items]
        cursor = items[-1].cursor
    assert len(seen) == len(set(seen)) == 12
    assert hub.poll(sub, after=cursor) == []


def test_new_subscription_sees_earlier_models() -> None:
    hub = LocalHub()
    first = hub.publish(*make_card("p", ["x"]))
    sub = hub.subscribe("s", Channel.parse("x"), task="classification")
    assert [i.model_id for i in hub.poll(sub)] == [first]


def test_publish_is_idempotent_by_digest() -> None:
    hub = LocalHub()
    card, weights = make_card("p", ["x"])
    sub = hub.subscribe("s", Channel.parse("x"), task="classification")
    assert hub.publish(card, weights) == hub.publish(card, weights)
    assert len(hub) == 1 and len(hub.poll(sub)) == 1
    assert hub.fetch(card.model_id) == (card, weights)
    second = hub.publish(*make_card("q", ["x"]))
    assert hub.model_ids() == [card.model_id, second]  # publication order, no duplicate


def test_digest_mismatch_is_rejected_and_changes_nothing() -> None:
    hub = LocalHub()
    card, _ = make_card("p", ["x"])
    with pytest.raises(DigestMismatchError):
        hub.publish(card, b"tampered")
    assert len(hub) == 0 and hub.model_ids() == []


def test_task_and_label_compatibility() -> None:
    hub = LocalHub()
    binary = hub.publish(*make_card("a", ["x"], classes=[0, 1]))
    subset = hub.publish(*make_card("b", ["x"], classes=[1, 2]))
    hub.publish(*make_card("c", ["x"], classes=[0, 3]))  # label 3 unknown to the subscriber
    hub.publish(*make_card("d", ["x"], task="regression"))
    sub = hub.subscribe("s", Channel.parse("x"), task="classification", classes=[0, 1, 2])
    assert [i.model_id for i in hub.poll(sub)] == [binary, subset]
    reg = hub.subscribe("s", Channel.parse("x"), task="regression")
    assert [i.card.publisher for i in hub.poll(reg)] == ["d"]


def test_own_models_are_not_delivered() -> None:
    hub = LocalHub()
    hub.publish(*make_card("s", ["x"]))
    sub = hub.subscribe("s", Channel.parse("x"), task="classification")
    assert hub.poll(sub) == []


def test_long_poll_wakes_on_publish() -> None:
    hub = LocalHub()
    sub = hub.subscribe("s", Channel.parse("x"), task="classification")
    card, weights = make_card("p", ["x"])
    timer = threading.Timer(0.05, hub.publish, args=(card, weights))
    timer.start()
    items = hub.poll(sub, timeout=5.0)
    timer.join()
    assert [i.model_id for i in items] == [card.model_id]


def test_concurrent_publishers_get_unique_cursors() -> None:
    hub = LocalHub()
    sub = hub.subscribe("s", Channel.parse("x"), task="classification")
    cards = [make_card(f"p{i}", ["x"]) for i in range(40)]
    threads = [threading.Thread(target=hub.publish, args=c) for c in cards]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    items = hub.poll(sub)
    assert sorted(i.cursor for i in items) == list(range(1, 41))


def test_unknown_ids_and_contribution_reports() -> None:
    hub = LocalHub()
    mid = hub.publish(*make_card("p", ["x"]))
    with pytest.raises(NotFoundError):
        hub.poll("nope")
    with pytest.raises(NotFoundError):
        hub.fetch("0" * 32)
    with pytest.raises(NotFoundError):
        hub.report_contributions("s", {"0" * 32: 0.5})
    with pytest.raises(DataValidationError):
        hub.report_contributions("s", {mid: -0.1})
    assert hub.contributions() == {}
    hub.report_contributions("s", {mid: 0.7})
    assert hub.contributions() == {"s": {mid: 0.7}}
    assert hub.publisher_of(mid) == "p"
