"""Writing the feeds: per-subscription deliveries and the registry event log, in position order.

Ordering guarantee
------------------
Every transaction that adds to a feed (publish, subscribe, site or feature registration) first
takes the feed lock (:func:`~pubsubml.registry.infrastructure.database.lock_feed_clock`: the single
``feed_clock`` row ``FOR UPDATE`` on PostgreSQL, the ``BEGIN IMMEDIATE`` write lock on SQLite), then
reads what it depends on, numbers its new rows from the clock and commits, releasing the lock.
Positions are therefore committed in increasing order: once a reader has seen position ``n`` no
transaction can still commit a row at a position ≤ ``n``.  Readers only read committed rows, in
position order, so resuming with ``after=n`` neither skips nor repeats an item.  A database sequence
would not give this on PostgreSQL, where a transaction holding position 7 may commit after one
holding position 8.

Publish and subscribe serialize on the same lock, so a model published while a subscription is
being created is delivered exactly once: by the backfill of the subscription if the model
committed first, by the publish otherwise (a unique (subscription, model) key backs this up).
A subscription reads and matches the history before it takes the lock and, holding it, reads
only the models above the highest position it read: since positions commit in increasing order,
those are exactly the ones committed in between, and a large history does not hold up publishes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from pubsubml.registry.infrastructure.bulk_insert import insert_columns
from pubsubml.registry.infrastructure.database import lock_feed_clock, store_feed_clock
from pubsubml.registry.infrastructure.postgres_wakeups import notify_commit
from pubsubml.registry.tables import DeliveryRow, EventRow, utcnow

__all__ = ["FeedWriter", "event_values"]

_INSERT_EVENTS = insert(EventRow)


def event_values(
    kind: str,
    payload: dict[str, Any],
    *,
    site_id: int | None = None,
    model_id: str | None = None,
    position: int,
) -> dict[str, Any]:
    """The columns of an event row at ``position`` (for :meth:`FeedWriter.events`)."""
    return {
        "position": position,
        "kind": kind,
        "site_id": site_id,
        "model_id": model_id,
        "payload": json.dumps(payload, sort_keys=True),
        "created_at": utcnow(),
    }


class FeedWriter:
    """Appends to the feeds inside one write transaction, holding the feed lock.

    Create it at the start of the transaction's feed phase; every position it hands out is larger
    than any committed one.  :meth:`close` stores the new clock value.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.position = lock_feed_clock(session)
        self._start = self.position

    def next_position(self) -> int:
        """Reserve the next feed position."""
        self.position += 1
        return self.position

    def event(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        site_id: int | None = None,
        model_id: str | None = None,
        position: int | None = None,
    ) -> int:
        """Append an event to the registry log (at a reserved ``position``); returns its position.

        The row is inserted at once, as one statement (after the session's pending rows, which it
        may reference), not kept as an ORM object until the next flush."""
        pos = self.next_position() if position is None else position
        self.events([event_values(kind, payload, site_id=site_id, model_id=model_id, position=pos)])
        return pos

    def events(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert events built by :func:`event_values` at their reserved positions, in one
        statement (after the session's pending rows, which they may reference)."""
        if not rows:
            return
        self.session.flush()
        conn = self.session.connection()
        conn.execute(_INSERT_EVENTS, rows[0] if len(rows) == 1 else list(rows))

    def mark(self) -> int:
        """The last position handed out, to :meth:`rewind` to after a rolled-back savepoint."""
        return self.position

    def rewind(self, mark: int) -> None:
        """Hand out the positions after ``mark`` again: the rows that held them were rolled back
        (to a savepoint taken when :meth:`mark` returned ``mark``)."""
        if not self._start <= mark <= self.position:
            raise ValueError(f"cannot rewind to {mark}: positions {self._start}..{self.position}")
        self.position = mark

    def deliver_to(self, subscription_ids: Sequence[str], model_id: str) -> list[int]:
        """Append a delivery of ``model_id`` to each of ``subscription_ids``' feeds (in that
        order); returns their cursors.  The model's row must be flushed already."""
        return self._append(list(subscription_ids), [model_id] * len(subscription_ids))

    def deliver_many(self, subscription_id: str, model_ids: Sequence[str]) -> list[int]:
        """Append deliveries of ``model_ids`` (in that order) to one subscription's feed; returns
        their cursors.  The subscription's row must be flushed already."""
        return self._append([subscription_id] * len(model_ids), list(model_ids))

    def _append(self, subscription_ids: list[str], model_ids: list[str]) -> list[int]:
        cursors = [self.next_position() for _ in subscription_ids]
        self.deliver_at(subscription_ids, cursors, model_ids)
        return cursors

    def deliver_at(
        self, subscription_ids: Sequence[str], cursors: Sequence[int], model_ids: Sequence[str]
    ) -> None:
        """Deliveries at cursors reserved with :meth:`next_position`: one statement for all
        (:func:`~pubsubml.registry.infrastructure.bulk_insert.insert_columns`), without ORM objects.
        The models'
        and subscriptions' rows must be flushed already."""
        if not len(subscription_ids) == len(cursors) == len(model_ids):
            raise ValueError("deliver_at needs as many cursors and model ids as subscriptions")
        insert_columns(
            self.session.connection(),
            DeliveryRow.__table__,
            {"subscription_id": subscription_ids, "cursor": cursors, "model_id": model_ids},
        )

    def close(self) -> None:
        """Store the clock (call once, after the last append, before the commit); on PostgreSQL,
        queue the notification that wakes the other replicas' readers at commit
        (:mod:`~pubsubml.registry.infrastructure.postgres_wakeups`)."""
        self.session.flush()
        if self.position != self._start:
            store_feed_clock(self.session, self.position)
            notify_commit(self.session, self.position)
