"""Reading the feeds: a subscription's deliveries and the registry event log, after a cursor.

Readers read only committed rows, in position order, so resuming after the last position read
neither skips nor repeats an item (the ordering guarantee of
:mod:`~pubsubml.registry.services.feed_writer`).  Deliveries are read synchronously
(:func:`read_deliveries`) or, on PostgreSQL, on the event loop (:class:`LoopFeedReader`); both
take the cards from a :class:`~pubsubml.registry.services.card_cache.CardCache` where it holds
them.
"""

from __future__ import annotations

from typing import Any

import psycopg
from sqlalchemy import Select, String, and_, any_, bindparam, exists, or_, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from pubsubml.registry.auth import Principal
from pubsubml.registry.infrastructure.async_statements import AsyncStatements
from pubsubml.registry.services.card_cache import CardCache
from pubsubml.registry.services.model_reads import model_visible_clause
from pubsubml.registry.tables import DeliveryRow, EventRow, ModelRow, SiteRow, SubscriptionRow

__all__ = [
    "PRIVATE_EVENT_PREFIX",
    "LoopFeedReader",
    "deliveries_select",
    "read_deliveries",
    "read_events",
]


PRIVATE_EVENT_PREFIX = "subscription."


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
    :class:`~pubsubml.registry.infrastructure.async_statements.AsyncStatements` round trip without a
    thread, two when some cards are not cached yet (they are read in one statement and kept in
    ``cards``). A poll that finds nothing reads the subscription's owner once more: the caller's own
    (any, for the administrator) means nothing new, an empty page.  Anything else (an unknown or
    another site's subscription; a value or connection the driver refused; a caller off the app's
    loop) answers ``None`` and the caller reads synchronously, which also says why (404).
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
