"""The registry's FastAPI application factory.

:func:`create_app` wires settings, database, artifact store and feed notifier into a FastAPI app
whose routes live under ``/v1`` (OpenAPI at ``/openapi.json``); the web dashboard
(:mod:`pubsubml.registry.ui`) is mounted at ``/ui``.  At start-up the app refuses a database that
is not at the schema revision this code expects, and removes artifacts left by interrupted
publishes.

References
----------
pubsub-ml.txt §6 "Discussion": sites register as publishers or subscribers via an API, with their
feature spaces, channels and feature metadata; the API streams models from publishers to
subscribers and holds metadata only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

import pubsubml
from pubsubml.artifacts.validation_pool import shared_pool
from pubsubml.registry.api.deps import RegistryState
from pubsubml.registry.api.errors import install_error_handlers
from pubsubml.registry.api.routes import (
    contributions,
    events,
    features,
    health,
    ledger,
    models,
    sites,
    subscriptions,
    whoami,
)
from pubsubml.registry.infrastructure.artifact_store import ArtifactStorage, ArtifactStore
from pubsubml.registry.infrastructure.async_statements import AsyncStatements
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.database_artifact_store import DatabaseArtifactStore
from pubsubml.registry.infrastructure.feed_notifier import FeedNotifier
from pubsubml.registry.infrastructure.nats_subjects import feed_subject
from pubsubml.registry.infrastructure.nats_wakeups import NatsWakeups
from pubsubml.registry.infrastructure.postgres_wakeups import PostgresWakeups
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.migrate import check_schema
from pubsubml.registry.schemas import ErrorBody
from pubsubml.registry.services.feed_reader import LoopFeedReader
from pubsubml.registry.services.maintenance import collect_orphans
from pubsubml.registry.services.publish_commit import group_committer
from pubsubml.registry.settings import RegistrySettings
from pubsubml.registry.ui import create_dashboard

__all__ = ["create_app", "create_app_from_env"]


#: Error answers any operation may give, all with the :class:`ErrorBody` shape (documented once,
#: so the published OpenAPI describes every 4xx and 503 body the API actually sends).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing, unknown, expired or revoked token."},
    403: {"model": ErrorBody, "description": "The caller may not do this."},
    404: {"model": ErrorBody, "description": "No such resource, or not visible to the caller."},
    409: {"model": ErrorBody, "description": "Conflicts with the registry's state."},
    422: {"model": ErrorBody, "description": "Invalid request; `errors` lists the fields."},
    503: {"model": ErrorBody, "description": "Busy, or the database is not migrated; retry."},
}


# The API's tags in the order the documentation lists them (not the order of matching below).
_TAGS = (
    "health",
    "auth",
    "sites",
    "ledger",
    "features",
    "models",
    "subscriptions",
    "events",
    "contributions",
)


def _include_routes(app: FastAPI) -> None:
    """Each route module straight under ``/v1``, the most requested first.

    A request is matched against the routes in order, and a router included in another is
    matched at every level of nesting (once to find it, once more to dispatch in it): routes
    included one level deep and the feed's poll second (after the one-route health check) cut a
    poll's matching to a few patterns.  The order changes no match: the modules' paths differ
    in their first segment, except the sites' and the ledger's (``/sites/{name}`` and
    ``/sites/{name}/ledger``, which no pattern of the other matches), kept in their order.
    """
    for module in (
        health,
        subscriptions,
        models,
        whoami,
        sites,
        ledger,
        features,
        events,
        contributions,
    ):
        app.include_router(module.router, prefix="/v1", responses=ERROR_RESPONSES)


def _artifact_store(settings: RegistrySettings, db: Database) -> ArtifactStorage:
    """The store of the published weights that ``settings`` name: database rows or files."""
    if settings.artifact_store == "database":
        return DatabaseArtifactStore(db, max_bytes=settings.max_upload_bytes)
    return ArtifactStore(settings.store_dir, max_bytes=settings.max_upload_bytes)


def _registry_state(settings: RegistrySettings, db: Database) -> RegistryState:
    """What the routes share: the database, the store, the locks, the validation workers, the
    group committer and, with psycopg, the reads on the event loop."""
    upload_lock = UploadLock(db, settings.lock_dir, timeout=settings.publish_wait_seconds)
    state = RegistryState(
        settings=settings,
        database=db,
        store=_artifact_store(settings, db),
        notifier=FeedNotifier(),
        upload_lock=upload_lock,
        validator=shared_pool(
            settings.validation_workers,
            cpu_seconds=settings.validation_cpu_seconds,
            memory_bytes=settings.validation_memory_bytes,
            max_weights_bytes=settings.max_upload_bytes,
            wait_seconds=settings.publish_wait_seconds,
        ),
        publish_slots=asyncio.Semaphore(settings.max_concurrent_publishes),
        committer=group_committer(db, upload_lock, max_group=settings.publish_group_max),
    )
    if db.engine.dialect.driver == "psycopg":
        state.statements = AsyncStatements(db.engine)
        state.feed_reader = LoopFeedReader(state.statements, state.cards)
    return state


async def _start_wakeups(
    state: RegistryState,
) -> tuple[PostgresWakeups | None, NatsWakeups | None]:
    """Start the cross-replica wake-ups the settings ask for: PostgreSQL ``LISTEN``, then NATS
    (whose broadcast the notifier calls on each local commit)."""
    settings = state.settings
    wakeups = None
    if settings.feed_wakeups and not settings.is_sqlite:
        wakeups = PostgresWakeups(settings.database_url, state.notifier.wake)
        await run_in_threadpool(wakeups.start)
    nats = None
    if settings.nats_url is not None:
        nats = NatsWakeups(
            settings.nats_url,
            feed_subject(settings.database_url),
            state.notifier.wake,
            jetstream=settings.nats_jetstream,
        )
        await nats.start()
        state.notifier.set_broadcast(nats.broadcast)
    return wakeups, nats


async def _stop_wakeups(
    state: RegistryState, wakeups: PostgresWakeups | None, nats: NatsWakeups | None
) -> None:
    """Stop what :func:`_start_wakeups` started, NATS first."""
    state.notifier.set_broadcast(None)
    if nats is not None:
        await nats.stop()
    if wakeups is not None:
        await run_in_threadpool(wakeups.stop)


def _lifespan(
    state: RegistryState, *, owns_database: bool
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's start-up and shutdown: schema check, orphan collection, validation workers,
    the event loop's notifier and reads, the wake-ups; closed in the reverse order."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        check_schema(state.database)
        await run_in_threadpool(
            collect_orphans,
            state.database,
            state.store,
            state.upload_lock,
            grace_seconds=state.settings.orphan_grace_seconds,
        )
        state.validator.start()
        state.notifier.bind(asyncio.get_running_loop())
        if state.statements is not None:
            state.statements.bind(asyncio.get_running_loop())
        wakeups, nats = await _start_wakeups(state)
        try:
            yield
        finally:
            await _stop_wakeups(state, wakeups, nats)
            if state.statements is not None:
                await state.statements.aclose()
            if owns_database:
                state.database.dispose()

    return lifespan


def create_app(settings: RegistrySettings, *, database: Database | None = None) -> FastAPI:
    """Build the registry app.

    Parameters
    ----------
    settings : RegistrySettings
    database : Database, optional
        An existing database handle (default: one opened from ``settings.database_url``).

    Returns
    -------
    FastAPI
        Start-up (the ASGI lifespan) raises :class:`~pubsubml.errors.SchemaVersionError` when the
        database is unmigrated or newer than this code.
    """
    db = database if database is not None else Database(settings.database_url)
    state = _registry_state(settings, db)
    app = FastAPI(
        title="pubsubml registry",
        openapi_tags=[{"name": tag} for tag in _TAGS],
        version=pubsubml.__version__,
        summary="Publish/subscribe registry for differentially private models.",
        lifespan=_lifespan(state, owns_database=database is None),
    )
    app.state.registry = state
    install_error_handlers(app)
    _include_routes(app)
    app.mount("/ui", create_dashboard(state))
    return app


def create_app_from_env() -> FastAPI:
    """The registry app with :meth:`RegistrySettings.from_env` settings: the factory each worker
    process of ``pubsubml registry serve --workers N`` calls."""
    return create_app(RegistrySettings.from_env())
