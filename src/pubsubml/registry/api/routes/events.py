"""``GET /v1/events``: the append-only registry event feed (long poll).

Kinds: ``site.created``, ``features.added``, ``model.published``, ``subscription.created``.  Events
about a model are shown only to callers that may see it; subscription events only to the
subscribing site (and the administrator).
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from pubsubml.registry.api.deps import Cursor, DatabaseDep, NotifierDep, PrincipalDep, SettingsDep
from pubsubml.registry.auth import Principal
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.schemas import EventPage, EventPublic
from pubsubml.registry.services.feed_reader import read_events

__all__ = ["router"]

router = APIRouter(prefix="/events", tags=["events"])


def _read(db: Database, principal: Principal, after: int, limit: int) -> list[EventPublic]:
    with db.read() as session:
        return [
            EventPublic(
                position=row.position,
                kind=row.kind,
                site=site,
                model_id=row.model_id,
                payload=json.loads(row.payload),
                created_at=row.created_at,
            )
            for row, site in read_events(session, principal, after=after, limit=limit)
        ]


@router.get("", response_model=EventPage)
async def list_events(
    principal: PrincipalDep,
    db: DatabaseDep,
    notifier: NotifierDep,
    settings: SettingsDep,
    after: Cursor = 0,
    timeout: Annotated[float, Query(ge=0)] = 0.0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> EventPage:
    """Events with position > ``after`` in order; waits up to ``timeout`` s when there are none."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(timeout, settings.long_poll_max_seconds)
    while True:
        ticket = notifier.ticket()
        events = await run_in_threadpool(_read, db, principal, after, limit)
        left = deadline - loop.time()
        if events or left <= 0:
            break
        await notifier.wait(ticket, min(left, settings.feed_poll_interval))
    return EventPage(events=events, next_cursor=events[-1].position if events else after)
