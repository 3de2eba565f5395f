"""Tests of pubsubml.registry.services.feed: matching, feed writer, readers and the notifier."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.database import Database
from pubsubml.registry.services.feed import (
    CardCache,
    FeedNotifier,
    FeedWriter,
    SubscriptionMatch,
    event_values,
    model_visible_clause,
    read_deliveries,
    read_events,
)
from pubsubml.registry.tables import (
    DeliveryRow,
    EventRow,
    FeedClockRow,
    ModelRow,
    ModelVisibilityRow,
    SiteRow,
    SubscriptionRow,
)
from pubsubml.schema import Channel
from registry.conftest import model_row


def _site(session: Session, name: str) -> Principal:
    row = SiteRow(
        name=name, roles="both", epsilon_budget=1.0, delta_budget=1e-5, token_hash=name * 64
    )
    session.add(row)
    session.flush()
    return Principal(kind="site", site_id=row.id, name=name, roles="both")


def _model(session: Session, index: int, publisher: Principal, position: int, public: bool) -> str:
    model_id = f"{index:032x}"
    session.add(
        model_row(
            model_id,
            publisher.site_id,
            position,
            card_json=json.dumps({"model": index}),
            public=public,
        )
    )
    session.flush()
    return model_id


@pytest.fixture
def world(db: Database) -> dict[str, Any]:
    """Sites a, b, c; a public model of a, and a model of a that only b may see."""
    with db.write() as s:
        a, b, c = _site(s, "a"), _site(s, "b"), _site(s, "c")
        writer = FeedWriter(s)
        shared = _model(s, 1, a, writer.next_position(), public=True)
        private = _model(s, 2, a, writer.next_position(), public=False)
        s.add(ModelVisibilityRow(model_id=private, site_id=b.site_id))
        writer.close()
    return {"a": a, "b": b, "c": c, "public": shared, "private": private}


# ---- SubscriptionMatch --------------------------------------------------------------------
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


# ---- FeedWriter ---------------------------------------------------------------------------
def _clock(db: Database) -> int:
    with db.read() as s:
        return int(s.execute(select(FeedClockRow.position)).scalar_one())


def test_positions_continue_from_the_committed_clock(db: Database) -> None:
    with db.write() as s:
        writer = FeedWriter(s)
        first = [writer.event("x", {"i": i}) for i in range(3)]
        writer.close()
    assert first == [1, 2, 3] and _clock(db) == 3
    with pytest.raises(RuntimeError), db.write() as s:
        writer = FeedWriter(s)
        writer.event("lost", {})
        writer.close()
        raise RuntimeError("rolled back")
    assert _clock(db) == 3
    with db.write() as s:
        writer = FeedWriter(s)
        assert writer.event("y", {}) == 4
        writer.close()
    with db.read() as s:
        kinds = [e.kind for e in s.execute(select(EventRow).order_by(EventRow.position)).scalars()]
    assert kinds == ["x", "x", "x", "y"]


def test_an_event_at_a_reserved_position_takes_no_new_one(db: Database) -> None:
    with db.write() as s:
        writer = FeedWriter(s)
        reserved = writer.next_position()
        assert writer.event("kind", {"b": 1, "a": [2]}, position=reserved) == reserved
        assert writer.position == reserved
        writer.close()
    with db.read() as s:
        row = s.execute(select(EventRow)).scalar_one()
    assert row.payload == '{"a": [2], "b": 1}' and row.created_at.tzinfo is not None


def test_rewind_hands_out_positions_again_after_a_rolled_back_savepoint(db: Database) -> None:
    with db.write() as s:
        writer = FeedWriter(s)
        writer.event("kept", {})
        mark = writer.mark()
        with pytest.raises(RuntimeError), s.begin_nested():
            writer.events([event_values("lost", {}, position=writer.next_position())])
            raise RuntimeError("rolled back to the savepoint")
        writer.rewind(mark)
        assert writer.event("after", {}) == mark + 1
        with pytest.raises(ValueError, match="cannot rewind"):
            writer.rewind(mark + 5)
        writer.close()
    with db.read() as s:
        rows = s.execute(select(EventRow.position, EventRow.kind).order_by(EventRow.position))
        assert rows.all() == [(1, "kept"), (2, "after")]


def test_deliver_at_uses_the_reserved_cursors_and_checks_its_lengths(backend: Any) -> None:
    db = Database(backend.url)
    try:
        with db.write() as s:
            a, b = _site(s, "a"), _site(s, "b")
            s.add(SubscriptionRow(id="s1", site_id=b.site_id, channel="x", task="classification"))
            writer = FeedWriter(s)
            m1 = _model(s, 1, a, writer.next_position(), public=True)
            c1 = writer.next_position()
            m2 = _model(s, 2, a, writer.next_position(), public=True)
            c2 = writer.next_position()
            with pytest.raises(ValueError, match="as many"):
                writer.deliver_at(["s1"], [c1, c2], [m1])
            writer.deliver_at(["s1", "s1"], [c1, c2], [m1, m2])
            writer.deliver_at([], [], [])
            writer.close()
        with db.read() as s:
            rows = s.execute(select(DeliveryRow.cursor, DeliveryRow.model_id)).all()
        assert sorted(rows) == [(2, m1), (4, m2)]
    finally:
        db.dispose()


def test_deliver_to_and_deliver_many_append_in_the_order_given(backend: Any) -> None:
    """Many deliveries in one statement (PostgreSQL: one INSERT over three arrays) get the next
    cursors in the order given: one model to many feeds, or many models to one feed."""
    db = Database(backend.url)
    try:
        with db.write() as s:
            a, b = _site(s, "a"), _site(s, "b")
            subs = [f"sub{i:04d}" for i in range(300)]
            s.add_all(
                SubscriptionRow(id=i, site_id=b.site_id, channel="x", task="classification")
                for i in subs
            )
            writer = FeedWriter(s)
            model = _model(s, 1, a, writer.next_position(), public=True)
            others = [_model(s, i, a, writer.next_position(), public=True) for i in (2, 3, 4)]
            (single,) = writer.deliver_to(subs[:1], model)
            cursors = writer.deliver_to(subs[:0:-1], model)  # the others, in reverse order
            assert writer.deliver_to([], model) == writer.deliver_many(subs[0], []) == []
            many = writer.deliver_many(subs[0], others[::-1])
            writer.close()
        assert cursors == list(range(single + 1, single + 300))
        assert many == [cursors[-1] + 1, cursors[-1] + 2, cursors[-1] + 3]
        with db.read() as s:
            rows = s.execute(
                select(DeliveryRow.subscription_id, DeliveryRow.cursor, DeliveryRow.model_id)
            ).all()
        expected = [
            (subs[0], single, model),
            *((sub, c, model) for sub, c in zip(subs[:0:-1], cursors, strict=True)),
            *((subs[0], c, m) for c, m in zip(many, others[::-1], strict=True)),
        ]
        assert sorted(rows, key=lambda r: r[1]) == expected
        assert _clock(db) == many[-1]
    finally:
        db.dispose()


# ---- visibility and readers ---------------------------------------------------------------
def test_model_visible_clause(db: Database, world: dict[str, Any]) -> None:
    def visible(principal: Principal) -> set[str]:
        with db.read() as s:
            stmt = select(ModelRow.id).where(model_visible_clause(principal))
            return set(s.execute(stmt).scalars())

    both = {world["public"], world["private"]}
    assert visible(ADMIN) == both
    assert visible(world["a"]) == both  # its publisher
    assert visible(world["b"]) == both  # listed
    assert visible(world["c"]) == {world["public"]}


def _deliver_both(db: Database, world: dict[str, Any]) -> tuple[int, int]:
    """Site b's subscription "sub-b" with the public then the private model delivered."""
    with db.write() as s:
        s.add(
            SubscriptionRow(
                id="sub-b", site_id=world["b"].site_id, channel="age", task="classification"
            )
        )
        s.flush()
        writer = FeedWriter(s)
        c1, c2 = writer.deliver_many("sub-b", [world["public"], world["private"]])
        writer.close()
    return c1, c2


def test_read_deliveries_pages_and_checks_the_owner(db: Database, world: dict[str, Any]) -> None:
    b = world["b"]
    c1, c2 = _deliver_both(db, world)
    with db.read() as s:
        everything = read_deliveries(s, "sub-b", after=0, limit=10)
        assert everything == [
            (c1, world["public"], '{"model": 1}'),
            (c2, world["private"], '{"model": 2}'),
        ]
        assert read_deliveries(s, "sub-b", after=0, limit=1) == everything[:1]
        assert read_deliveries(s, "sub-b", after=c1, limit=10) == everything[1:]
        assert read_deliveries(s, "sub-b", after=c2, limit=10) == []
        assert read_deliveries(s, "sub-b", after=0, limit=10, site_id=b.site_id) == everything
        assert read_deliveries(s, "sub-b", after=0, limit=10, site_id=world["c"].site_id) == []


def test_read_deliveries_takes_cards_from_the_cache_and_keeps_those_it_read(
    db: Database, world: dict[str, Any]
) -> None:
    c1, c2 = _deliver_both(db, world)
    cards = CardCache()
    with db.read() as s:
        plain = read_deliveries(s, "sub-b", after=0, limit=10)
        assert read_deliveries(s, "sub-b", after=0, limit=10, cards=cards) == plain
        assert cards.get_many([world["public"], world["private"]]) == {
            world["public"]: '{"model": 1}',
            world["private"]: '{"model": 2}',
        }
        # A cached card is served as cached (cards never change once published).
        cards.put(world["public"], '{"model": "cached"}')
        assert read_deliveries(s, "sub-b", after=0, limit=10, cards=cards) == [
            (c1, world["public"], '{"model": "cached"}'),
            (c2, world["private"], '{"model": 2}'),
        ]
        # Another site's subscription: nothing, whatever the cache holds.
        assert (
            read_deliveries(s, "sub-b", after=0, limit=10, site_id=world["c"].site_id, cards=cards)
            == []
        )


def test_a_card_cache_stays_within_its_bound() -> None:
    cards = CardCache(max_bytes=100)
    for i in range(50):
        cards.put(f"m{i}", "x" * 30)
    held = cards.get_many(f"m{i}" for i in range(50))
    assert sorted(held) == ["m47", "m48", "m49"]  # 3 × 30 ≤ 100: the most recent three
    cards.put("huge", "x" * 101)  # larger than the bound: not kept, nothing dropped for it
    assert cards.get_many(["huge", "m49"]) == {"m49": "x" * 30}


def test_read_events_hides_private_subscriptions_and_unseen_models(
    db: Database, world: dict[str, Any]
) -> None:
    a, b, c = world["a"], world["b"], world["c"]
    with db.write() as s:
        writer = FeedWriter(s)
        writer.event("features.added", {"names": ["age"]})
        for key in ("public", "private"):
            writer.event("model.published", {}, site_id=a.site_id, model_id=world[key])
        writer.event("subscription.created", {}, site_id=b.site_id)
        writer.event("subscription.created", {}, site_id=c.site_id)
        writer.close()

    def seen(principal: Principal, after: int = 0, limit: int = 100) -> list[tuple[str, Any]]:
        with db.read() as s:
            rows = read_events(s, principal, after=after, limit=limit)
        return [(row.model_id or row.kind, name) for row, name in rows]

    features = ("features.added", None)
    public, private = (world["public"], "a"), (world["private"], "a")
    sub_b, sub_c = ("subscription.created", "b"), ("subscription.created", "c")
    assert seen(ADMIN) == [features, public, private, sub_b, sub_c]
    assert seen(a) == [features, public, private]
    assert seen(b) == [features, public, private, sub_b]
    assert seen(c) == [features, public, sub_c]
    with db.read() as s:
        first = read_events(s, ADMIN, after=0, limit=2)
    assert [row.position for row, _ in first] == [3, 4]  # the two models took 1 and 2
    assert seen(ADMIN, after=4, limit=2) == [private, sub_b]


# ---- FeedNotifier -------------------------------------------------------------------------
def test_notifier_before_bind_hands_out_no_ticket() -> None:
    notifier = FeedNotifier()
    assert notifier.ticket() is None
    notifier.notify()  # nobody to wake: no error
    assert notifier.ticket() is None


def test_a_commit_sets_tickets_taken_before_it_only() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        notifier = FeedNotifier()
        notifier.bind(asyncio.get_running_loop())
        before = notifier.ticket()
        assert before is not None and not before.is_set()
        notifier.notify()  # from the loop's own thread: rotates at once
        after = notifier.ticket()
        assert after is not None
        await notifier.wait(after, 0.0)  # a zero timeout does not wait
        return before.is_set(), after is before, after.is_set()

    assert asyncio.run(scenario()) == (True, False, False)


def test_a_commit_in_another_thread_wakes_the_waiting_reader() -> None:
    async def scenario() -> bool:
        notifier = FeedNotifier()
        notifier.bind(asyncio.get_running_loop())
        ticket = notifier.ticket()
        assert ticket is not None
        thread = threading.Thread(target=notifier.notify)
        thread.start()
        await notifier.wait(ticket, 30.0)
        thread.join()
        return ticket.is_set()

    assert asyncio.run(scenario()) is True


def test_wait_returns_unset_after_its_timeout_and_notify_after_close_is_ignored() -> None:
    notifier = FeedNotifier()

    async def scenario() -> bool:
        notifier.bind(asyncio.get_running_loop())
        ticket = notifier.ticket()
        assert ticket is not None
        await notifier.wait(ticket, 0.01)
        return ticket.is_set()

    assert asyncio.run(scenario()) is False
    notifier.notify()  # its loop is closed now
