"""Tests of pubsubml.registry.services.feed_writer: positions, events and deliveries."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.services.feed_writer import FeedWriter, event_values
from pubsubml.registry.tables import (
    DeliveryRow,
    EventRow,
    FeedClockRow,
    SubscriptionRow,
)
from registry.services.conftest import world_model, world_site


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
            a, b = world_site(s, "a"), world_site(s, "b")
            s.add(SubscriptionRow(id="s1", site_id=b.site_id, channel="x", task="classification"))
            writer = FeedWriter(s)
            m1 = world_model(s, 1, a, writer.next_position(), public=True)
            c1 = writer.next_position()
            m2 = world_model(s, 2, a, writer.next_position(), public=True)
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
            a, b = world_site(s, "a"), world_site(s, "b")
            subs = [f"sub{i:04d}" for i in range(300)]
            s.add_all(
                SubscriptionRow(id=i, site_id=b.site_id, channel="x", task="classification")
                for i in subs
            )
            writer = FeedWriter(s)
            model = world_model(s, 1, a, writer.next_position(), public=True)
            others = [world_model(s, i, a, writer.next_position(), public=True) for i in (2, 3, 4)]
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
