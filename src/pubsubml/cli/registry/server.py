"""``pubsubml registry migrate|serve``: the registry service's database and HTTP server.

The registry is where publishers release DP models and subscribers receive them (pubsub-ml.txt
§3, Algorithm 3); ``migrate`` creates or upgrades its database schema and ``serve`` runs its API
with uvicorn.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from pubsubml.cli.registry.options import (
    DEFAULT_URL,
    DataOpt,
    DbOpt,
    UrlOpt,
    _client,
    _settings,
    console,
    err_console,
    fail,
)
from pubsubml.errors import PubsubmlError

__all__ = ["migrate_command", "registry_app", "serve_command", "wait_command"]

registry_app = typer.Typer(help="Run and migrate the model registry service.", no_args_is_help=True)


@contextmanager
def _database_errors(database: Any) -> Iterator[None]:
    """One error line and exit 1 for a database the registry cannot use: a PostgreSQL schema
    that does not exist, a schema revision to migrate, a server that cannot be reached; the
    database is disposed of on the way out."""
    from sqlalchemy.exc import DBAPIError

    try:
        yield
    except PubsubmlError as exc:
        database.dispose()
        raise fail(exc) from None
    except DBAPIError as exc:
        database.dispose()
        url = database.engine.url.render_as_string(hide_password=True)
        lines = str(exc.orig or exc).strip().splitlines()
        detail = lines[0] if lines else type(exc).__name__
        raise fail(f"cannot use the database {url}: {detail}") from None


@registry_app.command("migrate")
def migrate_command(db: DbOpt = None, data_dir: DataOpt = None) -> None:
    """Create or upgrade the registry database schema to this version's newest revision.

    A PostgreSQL URL whose search_path names a schema that does not exist is refused with the
    `CREATE SCHEMA` statement to run first, and nothing is written.
    """
    from pubsubml.registry.infrastructure.database import Database
    from pubsubml.registry.migrate import upgrade

    settings = _settings(db, data_dir, dev=True)
    if settings.is_sqlite:
        path = settings.database_url.removeprefix("sqlite:///")
        if path and path != settings.database_url:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    database = Database(settings.database_url)
    try:
        with _database_errors(database):
            database.check_search_path()
            revision = upgrade(database)
    finally:
        database.dispose()
    console.print(f"database at schema revision {revision}")


StoreOpt = Annotated[
    str | None,
    typer.Option(
        help="Artifact store: a folder, or 'database' to keep the weights in the registry "
        "database, so that replicas on different machines share only the database (a "
        "folder named database is written ./database; env PUBSUBML_REGISTRY_STORE).",
    ),
]
SeededNoiseOpt = Annotated[
    bool,
    typer.Option(
        "--allow-seeded-noise",
        help="Research mode: accept models whose DP noise was seeded (simulations); by "
        "default they are refused, since a seed regenerates the noise (env "
        "PUBSUBML_ALLOW_SEEDED_NOISE).",
    ),
]
WorkersOpt = Annotated[
    int,
    typer.Option(
        min=1,
        help="Server processes on one port (with PostgreSQL they wake each other's "
        "waiting readers; with SQLite they see each other's models at the next re-read).",
    ),
]
NatsUrlOpt = Annotated[
    str | None,
    typer.Option(
        help="A NATS server (nats://127.0.0.1:4222) through which replicas and workers wake "
        "each other's waiting readers, on any database; needs pubsubml[nats] "
        "(env PUBSUBML_NATS_URL).",
    ),
]
NatsJetStreamOpt = Annotated[
    bool,
    typer.Option(
        "--nats-jetstream",
        help="Send those wake-ups through a JetStream stream, stored and acknowledged by "
        "the server (needs --nats-url and a server run with -js; env "
        "PUBSUBML_NATS_JETSTREAM).",
    ),
]


@registry_app.command("serve")
def serve_command(
    db: DbOpt = None,
    data_dir: DataOpt = None,
    store: StoreOpt = None,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    dev: Annotated[
        bool, typer.Option("--dev", help="Development mode (random admin token).")
    ] = False,
    max_upload_mb: Annotated[float | None, typer.Option(help="Upload limit in MiB.")] = None,
    migrate: Annotated[
        bool, typer.Option("--migrate", help="Upgrade the schema before serving.")
    ] = False,
    allow_seeded_noise: SeededNoiseOpt = False,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    workers: WorkersOpt = 1,
    nats_url: NatsUrlOpt = None,
    nats_jetstream: NatsJetStreamOpt = False,
) -> None:
    """Serve the registry API with uvicorn (admin token from PUBSUBML_ADMIN_TOKEN).

    A database that is not at this version's schema revision, a PostgreSQL search_path naming a
    schema that does not exist, or a database server that cannot be reached is one error line
    and exit 1, before anything is written.
    """
    from pubsubml.registry.settings import STORE_IN_DATABASE

    settings = _settings(
        db,
        data_dir,
        store_dir=None if store in (None, STORE_IN_DATABASE) else Path(store),
        artifact_store="database" if store == STORE_IN_DATABASE else None,
        dev=dev or None,
        max_upload_bytes=None if max_upload_mb is None else int(max_upload_mb * 1024 * 1024),
        nats_url=nats_url,
        nats_jetstream=nats_jetstream or None,
        allow_seeded_noise=allow_seeded_noise or None,
    )
    _announce_modes(settings, dev=dev)
    database = _checked_database(settings, migrate=migrate)
    if workers > 1:
        database.dispose()
        _serve_workers(settings, workers, host=host, port=port, log_level=log_level)
    else:
        _serve_in_process(settings, database, host=host, port=port, log_level=log_level)


def _announce_modes(settings: Any, *, dev: bool) -> None:
    """Say on stderr that seeded noise is accepted, and the development admin token."""
    if settings.allow_seeded_noise:
        err_console.print(
            "research mode: models whose DP noise was seeded are accepted (--allow-seeded-noise)"
        )
    if dev and not os.environ.get("PUBSUBML_ADMIN_TOKEN"):
        err_console.print(f"development admin token: {settings.admin_token.get_secret_value()}")


def _checked_database(settings: Any, *, migrate: bool) -> Any:
    """The registry database, its search_path checked, upgraded when ``migrate``, at this
    version's schema revision; exit 1 with one line otherwise."""
    from pubsubml.registry.infrastructure.database import Database
    from pubsubml.registry.migrate import check_schema, upgrade

    if settings.is_sqlite and migrate:
        Path(settings.database_url.removeprefix("sqlite:///")).parent.mkdir(
            parents=True, exist_ok=True
        )
    database = Database(settings.database_url)
    with _database_errors(database):
        database.check_search_path()
        if migrate:
            upgrade(database)
        check_schema(database)
    return database


def _serve_workers(settings: Any, workers: int, *, host: str, port: int, log_level: str) -> None:
    """uvicorn with ``workers`` processes, each building the app from the environment."""
    import uvicorn

    os.environ.update(_worker_environment(settings))
    uvicorn.run(
        "pubsubml.registry.app:create_app_from_env",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=5,
    )


def _serve_in_process(
    settings: Any, database: Any, *, host: str, port: int, log_level: str
) -> None:
    """uvicorn serving the app in this process on ``database``, disposed of at the end."""
    import uvicorn

    from pubsubml.registry.app import create_app

    app = create_app(settings, database=database)
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
    finally:
        database.dispose()


def _worker_environment(settings: Any) -> dict[str, str]:
    """The settings every worker process must share, as the variables ``from_env`` reads (the
    admin token and the dashboard's session secret too: a random one per worker would differ)."""
    return {
        "PUBSUBML_REGISTRY_DB": settings.database_url,
        "PUBSUBML_REGISTRY_STORE": (
            "database" if settings.artifact_store == "database" else str(settings.store_dir)
        ),
        "PUBSUBML_ADMIN_TOKEN": settings.admin_token.get_secret_value(),
        "PUBSUBML_UI_SESSION_SECRET": settings.ui_session_secret.get_secret_value(),
        "PUBSUBML_MAX_UPLOAD_BYTES": str(settings.max_upload_bytes),
        "PUBSUBML_REGISTRY_DEV": "1" if settings.dev else "",
        "PUBSUBML_NATS_URL": settings.nats_url or "",
        "PUBSUBML_NATS_JETSTREAM": "true" if settings.nats_jetstream else "",
        "PUBSUBML_ALLOW_SEEDED_NOISE": "1" if settings.allow_seeded_noise else "",
    }


@registry_app.command("wait")
def wait_command(
    url: UrlOpt = DEFAULT_URL,
    timeout: Annotated[float, typer.Option(min=0.0, help="Seconds to wait at most.")] = 60.0,
) -> None:
    """Wait until the registry at URL answers its health check (for scripts that start one).

    Exit 0 as soon as ``/v1/health`` answers, 1 after TIMEOUT seconds without an answer.
    """
    import time

    deadline = time.monotonic() + timeout
    # The health check needs no token; one attempt per round, each within the time left.
    with _client(url, "anonymous") as client:
        client.retries = 0
        while True:
            client.timeout = max(0.5, min(5.0, deadline - time.monotonic()))
            try:
                health = client.health()
            except PubsubmlError as exc:
                reason = getattr(exc, "reason", None) or str(exc)
                if time.monotonic() >= deadline:
                    raise fail(
                        f"no registry answered at {url} in {timeout:g} s ({reason})"
                    ) from None
                time.sleep(0.2)
                continue
            console.print(f"registry at {url} is up ({health.get('status', 'ok')})")
            return
