"""Tests of pubsubml.registry.services.feed_reader: deliveries and events after a cursor."""

from __future__ import annotations

from typing import Any

from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.services.card_cache import CardCache
from pubsubml.registry.services.feed_reader import read_deliveries, read_events
from pubsubml.registry.services.feed_writer import FeedWriter
from pubsubml.registry.tables import (
    SubscriptionRow,
)


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
