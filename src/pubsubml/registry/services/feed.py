"""The feeds: per-subscription deliveries, the registry event log, and reader wake-ups.

Ordering guarantee
------------------
Every transaction that adds to a feed (publish, subscribe, site or feature registration) first
takes the feed lock (:func:`~pubsubml.registry.database.lock_feed_clock`: the single ``feed_clock``
row ``FOR UPDATE`` on PostgreSQL, the ``BEGIN IMMEDIATE`` write lock on SQLite), then reads what
it depends on, numbers its new rows from the clock and commits, releasing the lock.  Positions
are therefore committed in increasing order: once a reader has seen position ``n`` no transaction
can still commit a row at a position ≤ ``n``.  Readers only read committed rows, in position
order, so resuming with ``after=n`` neither skips nor repeats an item.  A database sequence would
not give this on PostgreSQL, where a transaction holding position 7 may commit after one holding
position 8.

Publish and subscribe serialize on the same lock, so a model published while a subscription is
being created is delivered exactly once: by the backfill of the subscription if the model
committed first, by the publish otherwise (a unique (subscription, model) key backs this up).
A subscription reads and matches the history before it takes the lock and, holding it, reads
only the models above the highest position it read: since positions commit in increasing order,
those are exactly the ones committed in between, and a large history does not hold up publishes.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from sqlalchemy import (
    Select,
    String,
    and_,
    any_,
    bindparam,
    exists,
    false,
    insert,
    or_,
    select,
    true,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from pubsubml.registry.async_statements import AsyncStatements
from pubsubml.registry.auth import Principal
from pubsubml.registry.bulk_insert import insert_columns
from pubsubml.registry.database import lock_feed_clock, store_feed_clock
from pubsubml.registry.services.loop_calls import call_on_loop
from pubsubml.registry.services.wakeups import notify_commit
from pubsubml.registry.tables import (
    DeliveryRow,
    EventRow,
    ModelRow,
    ModelVisibilityRow,
    SiteRow,
    SubscriptionRow,
    utcnow,
)
from pubsubml.schema import Channel

__all__ = [
    "PRIVATE_EVENT_PREFIX",
    "CardCache",
    "FeedNotifier",
    "FeedWriter",
    "LoopFeedReader",
    "SubscriptionMatch",
    "deliveries_select",
    "event_values",
    "model_visible_clause",
    "read_deliveries",
    "read_events",
]


PRIVATE_EVENT_PREFIX = "subscription."


def model_visible_clause(principal: Principal) -> ColumnElement[bool]:
    """SQL condition: the ``models`` row is visible to ``principal``.

    A model is visible to the administrator, to its publisher, to every site when it is public,
    and to the sites listed in its visibility rows.
    """
    if principal.is_admin:
        return true()
    if principal.site_id is None:  # pragma: no cover - a site principal always has an id
        return false()
    listed = exists().where(
        and_(
            ModelVisibilityRow.model_id == ModelRow.id,
            ModelVisibilityRow.site_id == principal.site_id,
        )
    )
    return or_(ModelRow.public.is_(True), ModelRow.publisher_id == principal.site_id, listed)


_INSERT_EVENTS = insert(EventRow)


@functools.lru_cache(maxsize=4096)
def _channel(text: str) -> Channel:
    return Channel.parse(text)


@functools.lru_cache(maxsize=4096)
def _classes(classes_json: str | None) -> frozenset[Any] | None:
    return None if classes_json is None else frozenset(json.loads(classes_json))


@dataclass(frozen=True)
class SubscriptionMatch:
    """What a subscription asks for: channel, task, label set, and which site it serves."""

    subscription_id: str
    site_id: int
    channel: Channel
    task: str
    classes: frozenset[Any] | None

    @classmethod
    def from_row(cls, row: SubscriptionRow) -> SubscriptionMatch:
        """Build from a stored subscription."""
        return cls.from_columns(row.id, row.site_id, row.channel, row.task, row.classes_json)

    @classmethod
    def from_columns(
        cls,
        subscription_id: str,
        site_id: int,
        channel: str,
        task: str,
        classes_json: str | None,
    ) -> SubscriptionMatch:
        """Build from a stored subscription's columns.  Channels and label sets are parsed once
        per distinct text (many subscriptions share them), so matching a model against thousands
        of subscriptions parses a handful."""
        return cls(subscription_id, site_id, _channel(channel), task, _classes(classes_json))

    def accepts(
        self,
        *,
        publisher_id: int,
        task: str,
        classes: Sequence[Any] | None,
        features: Iterable[str],
        public: bool,
        visible_to: frozenset[int],
    ) -> bool:
        """True when the model is delivered to this subscription (pubsub-ml.txt §3.2).

        The model must be visible to the subscriber, not its own, of the same task, with classes
        inside the subscription's label set (when one was given), and its input features must
        contain every feature of at least one term of the channel.
        """
        if publisher_id == self.site_id or task != self.task:
            return False
        if not public and self.site_id not in visible_to:
            return False
        if self.classes is not None and not set(classes or ()) <= self.classes:
            return False
        return self.channel.matches(features)


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
        (:func:`~pubsubml.registry.bulk_insert.insert_columns`), without ORM objects.  The models'
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
        (:mod:`~pubsubml.registry.services.wakeups`)."""
        self.session.flush()
        if self.position != self._start:
            store_feed_clock(self.session, self.position)
            notify_commit(self.session, self.position)


class CardCache:
    """Published model cards by model id, least recently used dropped first, up to ``max_bytes``.

    A card never changes once its model is published (the registry neither edits nor deletes a
    model), so an entry never goes stale; many subscriptions deliver the same models, so a feed
    read usually finds their cards here and asks the database only for cursors and model ids.
    Safe to share between threads.

    Parameters
    ----------
    max_bytes : int, default=64 MiB
        Bound on the cached JSON text (characters).

    Examples
    --------
    >>> cache = CardCache(max_bytes=12)
    >>> cache.put("a", "{}" * 3); cache.put("b", "{}" * 3)
    >>> cache.get_many(["a", "b", "c"])
    {'a': '{}{}{}', 'b': '{}{}{}'}
    >>> cache.put("c", "{}" * 3)  # over 12 characters: "a", the least recently used, goes
    >>> sorted(cache.get_many(["a", "b", "c"]))
    ['b', 'c']
    """

    def __init__(self, max_bytes: int = 64 * 2**20) -> None:
        self.max_bytes = max_bytes
        self._cards: OrderedDict[str, str] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get_many(self, model_ids: Iterable[str]) -> dict[str, str]:
        """The cached cards among ``model_ids`` (marked as recently used)."""
        out = {}
        with self._lock:
            for model_id in model_ids:
                card = self._cards.get(model_id)
                if card is not None:
                    self._cards.move_to_end(model_id)
                    out[model_id] = card
        return out

    def put(self, model_id: str, card_json: str) -> None:
        """Keep ``card_json``, dropping the least recently used cards beyond ``max_bytes``."""
        if len(card_json) > self.max_bytes:
            return
        with self._lock:
            old = self._cards.pop(model_id, None)
            self._size += len(card_json) - (0 if old is None else len(old))
            self._cards[model_id] = card_json
            while self._size > self.max_bytes:
                _, dropped = self._cards.popitem(last=False)
                self._size -= len(dropped)


def deliveries_select(*, owned: bool) -> Select[int, str]:
    """(cursor, model id) of a subscription's deliveries after a cursor, oldest first.

    Parameters (``bindparam`` s, given at execution): ``subscription_id``, ``after``, ``limit``
    and, when ``owned``, ``site_id`` (rows only if the subscription belongs to that site).
    PostgreSQL with current statistics runs it as one range scan of the deliveries' primary key
    that stops after ``limit`` rows, plus a one-row probe of the subscription when ``owned``;
    from the statistics of nearly empty tables (before autovacuum's ``ANALYZE`` after a burst of
    inserts) it may read every delivery after the cursor and sort them (0.3 ms instead of 0.06 ms
    for 400 deliveries, no measurable change of feed throughput in ``registry_load.py``).
    """
    # Core columns, not ORM attributes: the hottest read of the registry skips the ORM's
    # statement compilation (the rows are plain tuples either way).
    d, s = DeliveryRow.__table__.c, SubscriptionRow.__table__.c
    stmt = (
        select(d.cursor, d.model_id)
        .where(d.subscription_id == bindparam("subscription_id"), d.cursor > bindparam("after"))
        .order_by(d.cursor)
        .limit(bindparam("limit"))
    )
    if owned:
        stmt = stmt.where(
            exists().where(and_(s.id == d.subscription_id, s.site_id == bindparam("site_id")))
        )
    return stmt


def _delivery_parameters(
    subscription_id: str, after: int, limit: int, site_id: int | None
) -> dict[str, Any]:
    values: dict[str, Any] = {"subscription_id": subscription_id, "after": after, "limit": limit}
    if site_id is not None:
        values["site_id"] = site_id
    return values


def read_deliveries(
    session: Session,
    subscription_id: str,
    *,
    after: int,
    limit: int,
    site_id: int | None = None,
    cards: CardCache | None = None,
) -> list[tuple[int, str, str]]:
    """Committed deliveries of a subscription with cursor > ``after``: (cursor, model id, card JSON).

    With ``site_id``, only if the subscription belongs to that site (else nothing).  The cursors
    come from :func:`deliveries_select`; the cards from ``cards`` where it holds them, else from
    the models table (one more statement, whose cards ``cards`` keeps).  A delivery and its model
    commit in one transaction, so a delivery read means its card is there for the second
    statement.
    """
    m = ModelRow.__table__.c
    stmt = deliveries_select(owned=site_id is not None)
    params = _delivery_parameters(subscription_id, after, limit, site_id)
    rows = [(int(c), str(i)) for c, i in session.execute(stmt, params).all()]
    known = {} if cards is None else cards.get_many(i for _, i in rows)
    missing = sorted({i for _, i in rows} - known.keys())
    if missing:
        for model_id, card_json in session.execute(
            select(m.id, m.card_json).where(m.id.in_(missing))
        ).all():
            known[model_id] = card_json
            if cards is not None:
                cards.put(model_id, card_json)
    return [(c, i, known[i]) for c, i in rows]


class LoopFeedReader:
    """:func:`read_deliveries` on the event loop (PostgreSQL).

    A poll that finds deliveries is one
    :class:`~pubsubml.registry.async_statements.AsyncStatements` round trip without a thread, two
    when some cards are not cached yet (they are read in one statement and kept in ``cards``).
    A poll that finds nothing reads the subscription's owner once more: the caller's own (any,
    for the administrator) means nothing new, an empty page.  Anything else (an unknown or
    another site's subscription; a value or connection the driver refused; a caller off the
    app's loop) answers ``None`` and the caller reads synchronously, which also says why (404).
    """

    def __init__(self, statements: AsyncStatements, cards: CardCache) -> None:
        self._statements = statements
        self._cards = cards
        self._reads = {
            owned: statements.compile(deliveries_select(owned=owned)) for owned in (False, True)
        }
        m, sub = ModelRow.__table__.c, SubscriptionRow.__table__.c
        self._owner_read = statements.compile(
            select(sub.site_id).where(sub.id == bindparam("subscription_id"))
        )
        self._card_read = statements.compile(
            select(m.id, m.card_json).where(
                m.id == any_(bindparam("ids", type_=postgresql.ARRAY(String)))
            )
        )

    async def read(
        self, subscription_id: str, *, after: int, limit: int, site_id: int | None
    ) -> list[tuple[int, str, str]] | None:
        """The same rows as :func:`read_deliveries` with ``cards``, or ``None`` (see above)."""
        statements = self._statements.for_running_loop()
        if statements is None:
            return None
        values = _delivery_parameters(subscription_id, after, limit, site_id)
        try:
            rows = [
                (int(c), str(i))
                for c, i in await statements.fetch(self._reads[site_id is not None], values)
            ]
            if not rows:
                owner = await statements.fetch(
                    self._owner_read, {"subscription_id": subscription_id}
                )
                mine = bool(owner) and (site_id is None or owner[0][0] == site_id)
                return [] if mine else None
            known = self._cards.get_many(i for _, i in rows)
            missing = sorted({i for _, i in rows} - known.keys())
            if missing:
                for model_id, card_json in await statements.fetch(
                    self._card_read, {"ids": missing}
                ):
                    known[str(model_id)] = str(card_json)
                    self._cards.put(str(model_id), str(card_json))
        except (psycopg.Error, ValueError):
            return None
        if any(i not in known for _, i in rows):  # pragma: no cover - committed with its model
            return None
        return [(c, i, known[i]) for c, i in rows]


def read_events(
    session: Session, principal: Principal, *, after: int, limit: int
) -> list[tuple[EventRow, str | None]]:
    """Committed events with position > ``after`` that ``principal`` may see, with the actor name.

    Events about a model are shown only to callers that may see the model; subscription events
    only to the subscribing site.
    """
    visible_model = exists().where(
        and_(ModelRow.id == EventRow.model_id, model_visible_clause(principal))
    )
    stmt = (
        select(EventRow, SiteRow.name)
        .outerjoin(SiteRow, SiteRow.id == EventRow.site_id)
        .where(EventRow.position > after, or_(EventRow.model_id.is_(None), visible_model))
        .order_by(EventRow.position)
        .limit(limit)
    )
    if not principal.is_admin:
        stmt = stmt.where(
            or_(
                ~EventRow.kind.startswith(PRIVATE_EVENT_PREFIX),
                EventRow.site_id == principal.site_id,
            )
        )
    return [(row, name) for row, name in session.execute(stmt).all()]


class FeedNotifier:
    """Wakes readers waiting in this process when a feed transaction commits.

    Readers take a :meth:`ticket` *before* reading the database and wait on it; a commit that
    happens after the ticket was taken sets it, so no wake-up falls between the read and the wait.
    Commits by other processes (other replicas) set it too on PostgreSQL, through
    :class:`~pubsubml.registry.services.wakeups.PostgresWakeups`, and on any database through
    :class:`~pubsubml.registry.services.nats_wakeups.NatsWakeups`; readers also re-read every
    ``feed_poll_interval`` seconds, the fallback when no notification arrives.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._broadcast: Callable[[], None] | None = None

    def set_broadcast(self, broadcast: Callable[[], None] | None) -> None:
        """Also call ``broadcast`` on each :meth:`notify` (tell other replicas, e.g. over NATS)."""
        self._broadcast = broadcast

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Attach to the server's event loop (at start-up)."""
        with self._lock:
            self._loop = loop
            self._event = asyncio.Event()

    def ticket(self) -> asyncio.Event | None:
        """The event the next commit will set (``None`` before :meth:`bind`)."""
        with self._lock:
            return self._event

    def _rotate(self) -> None:
        with self._lock:
            old, self._event = self._event, asyncio.Event()
        if old is not None:
            old.set()

    def notify(self) -> None:
        """A feed transaction of this process committed: wake every reader here and tell the
        other replicas when a broadcast is set (thread-safe; call after the commit)."""
        self.wake()
        broadcast = self._broadcast
        if broadcast is not None:
            broadcast()

    def wake(self) -> None:
        """Wake every waiting reader of this process (thread-safe; for another replica's commit)."""
        with self._lock:
            loop = self._loop
        call_on_loop(loop, self._rotate)

    async def wait(self, ticket: asyncio.Event | None, timeout: float) -> None:
        """Wait until ``ticket`` is set or ``timeout`` seconds pass."""
        if timeout <= 0:
            return
        if ticket is None:
            await asyncio.sleep(timeout)
            return
        try:
            await asyncio.wait_for(ticket.wait(), timeout)
        except TimeoutError:
            return
