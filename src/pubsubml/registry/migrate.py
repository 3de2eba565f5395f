"""Alembic migrations of the registry database, run programmatically.

The migration scripts ship inside the package (``pubsubml/registry/migrations``), so
``pubsubml registry migrate`` works from an installed wheel without an ``alembic.ini``.  The server
refuses to start unless the database is exactly at the newest revision this code knows
(:func:`check_schema`).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError

from pubsubml.errors import SchemaVersionError
from pubsubml.registry.infrastructure.database import Database

__all__ = ["MIGRATIONS_DIR", "check_schema", "current_revision", "head_revision", "upgrade"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str:
    """The newest revision shipped with this version of pubsubml.

    Examples
    --------
    >>> head_revision()
    '0006'
    """
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def current_revision(db: Database) -> str | None:
    """The revision the database is at, ``None`` when it was never migrated."""
    with db.engine.connect() as conn:
        heads = MigrationContext.configure(conn).get_current_heads()
        conn.rollback()
    if len(heads) > 1:  # pragma: no cover - the scripts have a single branch
        raise SchemaVersionError(f"database has several schema heads {heads}")
    return heads[0] if heads else None


def upgrade(db: Database, revision: str = "head") -> str:
    """Upgrade the database to ``revision`` (default: the newest) and return the new revision.

    Raises
    ------
    SchemaVersionError
        The database is at a revision this version of pubsubml does not know (newer code ran).
    """
    cfg = _config()
    current = current_revision(db)
    _check_known(current)
    with db.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    new = current_revision(db)
    assert new is not None
    return new


def _check_known(revision: str | None) -> None:
    if revision is None:
        return
    try:
        ScriptDirectory.from_config(_config()).get_revision(revision)
    except CommandError as exc:
        raise SchemaVersionError(
            f"the database schema is at revision {revision!r}, newer than this pubsubml knows "
            f"(up to {head_revision()!r}): upgrade pubsubml"
        ) from exc


def check_schema(db: Database) -> str:
    """Return the current revision if it is the head; refuse otherwise.

    Raises
    ------
    SchemaVersionError
        The database was never migrated, is behind (run ``pubsubml registry migrate``), or is at a
        revision newer than this code.
    """
    current = current_revision(db)
    head = head_revision()
    url = db.engine.url.render_as_string(hide_password=True)
    if current is None:
        raise SchemaVersionError(
            f"the registry database {url} is not migrated: run `pubsubml registry migrate --db {url}`"
        )
    _check_known(current)
    if current != head:
        raise SchemaVersionError(
            f"the registry database {url} is at schema revision {current!r}, this pubsubml needs "
            f"{head!r}: run `pubsubml registry migrate --db {url}`"
        )
    return current
