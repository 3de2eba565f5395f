"""``/v1/subscriptions``: subscribe, then read the feed by long poll or Server-Sent Events.

``GET /v1/subscriptions/{id}/models?after=CURSOR&timeout=S`` answers at once when items with a
cursor above ``after`` exist, else waits up to ``timeout`` seconds for one.
``GET /v1/subscriptions/{id}/stream`` sends the same items as SSE events (``id:`` is the cursor, so
a reconnecting client resumes with ``Last-Event-ID``).  A subscription is visible to its site and
the administrator only; for anyone else it answers 404.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from pubsubml.errors import DataValidationError
from pubsubml.registry.api.deps import (
    BEARER_SECURITY,
    MAX_CURSOR,
    CallerDep,
    Cursor,
    DatabaseDep,
    NotifierDep,
    PrincipalDep,
    RegistryState,
    SettingsDep,
    StateDep,
)
from pubsubml.registry.auth import Principal
from pubsubml.registry.schemas import (
    FeedPage,
    SubscriptionCreate,
    SubscriptionList,
    SubscriptionPublic,
)
from pubsubml.registry.services import subscriptions as service
from pubsubml.registry.services.feed_reader import read_deliveries

__all__ = ["feed_page_json", "read_feed", "router"]

_DIGITS = re.compile(r"[0-9]{1,19}")

router = APIRouter(prefix="/subscriptions", tags=["subscriptions"])

Rows = list[tuple[int, str, str]]


def _read(
    state: RegistryState, principal: Principal, subscription_id: str, after: int, limit: int
) -> Rows:
    owner = None if principal.is_admin else principal.site_id

    def read(session: Session) -> Rows:
        rows = read_deliveries(
            session, subscription_id, after=after, limit=limit, site_id=owner, cards=state.cards
        )
        if not rows:  # nothing new, or not the caller's subscription: tell them apart (404)
            service.get_subscription(session, principal, subscription_id)
        return rows

    # Single statements (cursors; cards not yet cached; the owner check when empty), no
    # transaction around them.
    return state.database.read_statements(read)


async def read_feed(
    state: RegistryState, principal: Principal, subscription_id: str, after: int, limit: int
) -> Rows:
    """The feed page: on the event loop where it can answer, else in the thread pool."""
    if state.feed_reader is not None:
        owner = None if principal.is_admin else principal.site_id
        rows = await state.feed_reader.read(
            subscription_id, after=after, limit=limit, site_id=owner
        )
        if rows is not None:
            return rows
    return await run_in_threadpool(_read, state, principal, subscription_id, after, limit)


class _PollQuery(BaseModel):
    """The feed poll's query parameters, validated as FastAPI validates declared ones."""

    after: Annotated[int, Field(ge=0, le=MAX_CURSOR)] = 0
    timeout: Annotated[float, Field(ge=0)] = 0.0
    limit: Annotated[int, Field(ge=1, le=1000)] = 100


# The poll reads its query parameters itself: FastAPI's per-request handling of declared
# parameters (finding each in the query string, checking its annotation, validating it alone)
# was a fifth of a poll's interpreter time; one model validates all three at once.  The OpenAPI
# document lists them as FastAPI would.
_POLL_PARAMETERS: list[dict[str, object]] = [
    {"name": name, "in": "query", "required": False, "schema": schema}
    for name, schema in _PollQuery.model_json_schema()["properties"].items()
]


def _poll_query(request: Request) -> _PollQuery:
    """The poll's parameters (the last value of each, as FastAPI takes them); 422 when invalid."""
    try:
        return _PollQuery.model_validate(dict(request.query_params))
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise RequestValidationError([{**e, "loc": ("query", *e["loc"])} for e in errors]) from None


def _cursor_header(value: str) -> int:
    if not _DIGITS.fullmatch(value) or int(value) > MAX_CURSOR:
        raise DataValidationError(
            f"Last-Event-ID must be a feed cursor (1 to 19 ASCII digits, at most {MAX_CURSOR}), "
            f"got {value[:32]!r}"
        )
    return int(value)


def _item_json(cursor: int, model_id: str, card_json: str) -> str:
    # card_json is the canonical JSON stored at publish time: embedded as is, not re-encoded.
    return f'{{"cursor":{cursor},"model_id":{json.dumps(model_id)},"card":{card_json}}}'


def feed_page_json(rows: Rows, after: int) -> str:
    """The JSON text of a :class:`~pubsubml.registry.schemas.FeedPage`."""
    items = ",".join(_item_json(c, m, j) for c, m, j in rows)
    next_cursor = rows[-1][0] if rows else after
    return f'{{"items":[{items}],"next_cursor":{next_cursor}}}'


@router.post("", response_model=SubscriptionPublic, status_code=status.HTTP_201_CREATED)
def subscribe(
    body: SubscriptionCreate, principal: PrincipalDep, db: DatabaseDep, notifier: NotifierDep
) -> SubscriptionPublic:
    """Subscribe a site to a channel; matching models published earlier are delivered too."""
    with db.write() as session:
        created = service.create_subscription(session, principal, body)
    notifier.notify()
    return created


@router.get("", response_model=SubscriptionList)
def list_subscriptions(principal: PrincipalDep, db: DatabaseDep) -> SubscriptionList:
    """The caller's subscriptions."""
    with db.read() as session:
        return SubscriptionList(subscriptions=service.list_subscriptions(session, principal))


@router.get("/{subscription_id}", response_model=SubscriptionPublic)
def get_subscription(
    subscription_id: str, principal: PrincipalDep, db: DatabaseDep
) -> SubscriptionPublic:
    """One subscription."""
    with db.read() as session:
        return service.get_subscription(session, principal, subscription_id)


@router.get(
    "/{subscription_id}/models",
    response_class=Response,
    responses={200: {"model": FeedPage, "description": "Feed items after the cursor."}},
    openapi_extra={**BEARER_SECURITY, "parameters": _POLL_PARAMETERS},
)
async def poll(subscription_id: str, request: Request, caller: CallerDep) -> Response:
    """Items with cursor > ``after``, oldest first; waits up to ``timeout`` s when there are none."""
    # Query parameters (_PollQuery): after (a cursor, default 0), timeout (seconds >= 0, default
    # 0) and limit (1 to 1,000, default 100).
    # One dependency (the state and the caller together) rather than one each for the state,
    # the bearer scheme, the principal, the notifier and the settings: resolving each costs this
    # hottest route a share of its time (pubsubml.registry.api.deps).
    state, principal = caller.state, caller.principal
    notifier, settings = state.notifier, state.settings
    query = _poll_query(request)
    after, limit = query.after, query.limit
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(query.timeout, settings.long_poll_max_seconds)
    while True:
        ticket = notifier.ticket()
        rows = await read_feed(state, principal, subscription_id, after, limit)
        left = deadline - loop.time()
        if rows or left <= 0:
            break
        await notifier.wait(ticket, min(left, settings.feed_poll_interval))
    return Response(feed_page_json(rows, after), media_type="application/json")


@router.get(
    "/{subscription_id}/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events."}},
)
async def stream(
    subscription_id: str,
    request: Request,
    principal: PrincipalDep,
    state: StateDep,
    notifier: NotifierDep,
    settings: SettingsDep,
    after: Cursor = 0,
    last_event_id: Annotated[str | None, Header(max_length=32)] = None,
) -> StreamingResponse:
    """The feed as Server-Sent Events (``event: model``, ``id:`` = cursor, ``data:`` = item JSON).

    ``Last-Event-ID`` (a reconnecting client's last cursor) overrides ``after``; anything but 1 to
    19 ASCII digits up to 2⁶³ − 1 is refused with 422.
    """
    start = after if last_event_id is None else _cursor_header(last_event_id)
    # 404 before streaming.
    await run_in_threadpool(_read, state, principal, subscription_id, start, 1)

    async def events() -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        cursor = start
        next_beat = loop.time() + settings.sse_heartbeat_seconds
        yield "retry: 1000\n\n"
        while True:
            ticket = notifier.ticket()
            rows = await read_feed(state, principal, subscription_id, cursor, 100)
            for c, m, j in rows:
                yield f"id: {c}\nevent: model\ndata: {_item_json(c, m, j)}\n\n"
                cursor = c
            if rows:
                continue
            if await request.is_disconnected():
                return
            now = loop.time()
            if now >= next_beat:
                yield ": keep-alive\n\n"
                next_beat = now + settings.sse_heartbeat_seconds
            await notifier.wait(ticket, min(settings.feed_poll_interval, max(0.0, next_beat - now)))

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
