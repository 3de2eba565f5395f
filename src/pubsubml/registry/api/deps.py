"""FastAPI dependencies of the registry routes, as ``Annotated`` aliases.

Every resource lives on ``app.state.registry`` (a :class:`RegistryState` built by
:func:`~pubsubml.registry.app.create_app`); tests replace any of them with
``app.dependency_overrides[get_store] = …`` rather than patching names.

The dependencies are coroutines although they only read attributes: FastAPI runs a plain ``def``
dependency in the thread pool, one hop per dependency per request.  Each dependency FastAPI
resolves still costs a request a share of its time (profiled in process at 8 concurrent feed
polls, resolving the state, the bearer scheme and the principal as three was 38 % of a poll's
time), so the feed's poll takes :data:`CallerDep`, the state and the caller resolved as one
dependency of the request alone; its route declares :data:`BEARER_SECURITY`, which
``Depends(HTTPBearer)`` would otherwise put in the OpenAPI document.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from pubsubml.artifacts.validation_pool import ValidationPool
from pubsubml.errors import PermissionDeniedError
from pubsubml.registry.auth import Principal, hash_token
from pubsubml.registry.infrastructure.artifact_store import ArtifactStorage
from pubsubml.registry.infrastructure.async_statements import AsyncStatements
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.feed_notifier import FeedNotifier
from pubsubml.registry.infrastructure.group_commit import GroupCommitter
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.services.card_cache import CardCache
from pubsubml.registry.services.feed_reader import LoopFeedReader
from pubsubml.registry.services.publish_checks import Publication
from pubsubml.registry.services.sites import authenticate
from pubsubml.registry.settings import RegistrySettings

__all__ = [
    "BEARER_SECURITY",
    "MAX_CURSOR",
    "Caller",
    "CallerDep",
    "Cursor",
    "DatabaseDep",
    "NotifierDep",
    "PrincipalDep",
    "PublisherDep",
    "RegistryState",
    "SettingsDep",
    "StateDep",
    "StoreDep",
    "get_caller",
    "get_database",
    "get_notifier",
    "get_principal",
    "get_publisher",
    "get_settings",
    "get_state",
    "get_store",
]

#: The largest cursor or position a database BIGINT holds.
MAX_CURSOR = 2**63 - 1
#: A cursor query parameter (``after``): an integer in [0, 2⁶³ − 1], refused with 422 otherwise.
Cursor = Annotated[int, Query(ge=0, le=MAX_CURSOR)]

_bearer = HTTPBearer(auto_error=False, description="A site token or the admin token.")
#: ``openapi_extra`` of a route taking :data:`CallerDep`: the bearer security that a route
#: depending on :func:`get_principal` shows in the OpenAPI document.
BEARER_SECURITY: dict[str, Any] = {"security": [{_bearer.scheme_name: []}]}
_PRINCIPAL_TTL = 5.0
_PRINCIPAL_CACHE_SIZE = 10_000


@dataclass
class RegistryState:
    """What one registry process holds: settings, database, store, feed notifier, upload lock,
    validation workers, publish slots, the group committer, auth cache, published cards and, on
    PostgreSQL, the event loop's statement pool and feed reader."""

    settings: RegistrySettings
    database: Database
    store: ArtifactStorage
    notifier: FeedNotifier
    upload_lock: UploadLock
    validator: ValidationPool
    publish_slots: asyncio.Semaphore
    committer: GroupCommitter[Publication]
    principals: dict[str, tuple[float, Principal]] = field(default_factory=dict)
    cards: CardCache = field(default_factory=CardCache)
    statements: AsyncStatements | None = None
    feed_reader: LoopFeedReader | None = None


async def get_state(request: Request) -> RegistryState:
    """The registry state of the running app."""
    state: RegistryState = request.app.state.registry
    return state


StateDep = Annotated[RegistryState, Depends(get_state)]


async def get_settings(state: StateDep) -> RegistrySettings:
    """The settings."""
    return state.settings


async def get_database(state: StateDep) -> Database:
    """The database."""
    return state.database


async def get_store(state: StateDep) -> ArtifactStorage:
    """The artifact store."""
    return state.store


async def get_notifier(state: StateDep) -> FeedNotifier:
    """The feed notifier."""
    return state.notifier


SettingsDep = Annotated[RegistrySettings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]
StoreDep = Annotated[ArtifactStorage, Depends(get_store)]
NotifierDep = Annotated[FeedNotifier, Depends(get_notifier)]


def _lookup(db: Database, token: str | None, admin_token: str) -> Principal:
    return db.read_statements(lambda session: authenticate(session, token, admin_token))


async def get_principal(
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The authenticated caller (HTTP 401 without a valid bearer token).

    Resolved principals are cached per token digest for a few seconds; rotating or revoking a
    token clears this replica's cache, so another replica may accept the old token for at most
    that long.
    """
    token = credentials.credentials if credentials is not None else None
    key = hash_token(token) if token else None
    if key is not None:
        cached = state.principals.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
    principal = await run_in_threadpool(
        _lookup, state.database, token, state.settings.admin_token.get_secret_value()
    )
    if key is not None:
        if len(state.principals) > _PRINCIPAL_CACHE_SIZE:
            state.principals.clear()
        state.principals[key] = (time.monotonic() + _PRINCIPAL_TTL, principal)
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def get_publisher(principal: PrincipalDep) -> Principal:
    """The caller, who must be a site with the publisher role (checked before the body is read)."""
    if principal.is_admin or not principal.can_publish():
        raise PermissionDeniedError(
            f"{principal.name!r} may not publish: only sites with the publisher role publish models"
        )
    return principal


PublisherDep = Annotated[Principal, Depends(get_publisher)]


@dataclass(frozen=True)
class Caller:
    """The registry state and the authenticated caller of one request."""

    state: RegistryState
    principal: Principal


async def get_caller(request: Request) -> Caller:
    """The state and the caller as one dependency (HTTP 401 as :func:`get_principal`).

    The same answer as ``StateDep`` and ``PrincipalDep`` together, for a route on which
    resolving them as three dependencies is a measurable share of the request (module docstring).
    """
    state = await get_state(request)
    return Caller(state, await get_principal(state, await _bearer(request)))


CallerDep = Annotated[Caller, Depends(get_caller)]
