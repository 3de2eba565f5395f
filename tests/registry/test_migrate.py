"""Tests of pubsubml.registry.migrate: step-by-step upgrades and the schema check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text

from pubsubml.errors import SchemaVersionError
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.migrate import (
    MIGRATIONS_DIR,
    check_schema,
    current_revision,
    head_revision,
    upgrade,
)

REVISIONS = ["0001", "0002", "0003", "0004", "0005", "0006"]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'fresh.db'}")
    yield database
    database.dispose()


def test_the_shipped_scripts_end_at_the_head() -> None:
    shipped = sorted(p.name[1:5] for p in (MIGRATIONS_DIR / "versions").glob("v*.py"))
    assert shipped == REVISIONS and head_revision() == REVISIONS[-1]


def test_upgrades_step_by_step_and_refuses_to_serve_until_the_head(db: Database) -> None:
    tables: dict[str, list[str]] = {}
    for revision in REVISIONS[:-1]:
        assert upgrade(db, revision) == revision == current_revision(db)
        tables[revision] = inspect(db.engine).get_table_names()
        with pytest.raises(SchemaVersionError, match=f"at schema revision '{revision}'") as info:
            check_schema(db)
        assert f"needs '{head_revision()}'" in str(info.value)
        assert "pubsubml registry migrate --db sqlite:///" in str(info.value)
    assert "pending_uploads" in tables["0004"]  # 0004 made it
    assert "pending_uploads" not in tables["0005"]  # 0005 dropped it
    assert "artifact_objects" not in tables["0005"]
    assert upgrade(db) == head_revision() == check_schema(db)
    assert {"artifact_objects", "artifact_chunks"} <= set(inspect(db.engine).get_table_names())
    assert upgrade(db) == head_revision()  # at the head: nothing to do


def test_upgrading_keeps_the_data(db: Database) -> None:
    upgrade(db, "0002")
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO sites (name, roles, epsilon_budget, delta_budget, token_hash, "
                "created_at) VALUES ('a', 'both', 1, 1e-5, 'h', '2025-02-03 04:05:06')"
            )
        )
        conn.execute(text("UPDATE feed_clock SET position = 17"))
    upgrade(db)
    with db.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT name, created_at, token_created_at, token_changed_by, token_expires_at, "
                "token_revoked_at FROM sites"
            )
        ).one()
        clock = conn.execute(text("SELECT id, position FROM feed_clock")).all()
    assert row[0] == "a" and clock == [(1, 17)]
    # existing tokens count as created with their site, by the administrator, without expiry
    assert row[2] == row[1] and row[3] == "admin" and row[4] is None and row[5] is None


@pytest.mark.postgres
def test_messages_never_show_the_database_password(pg_factory: Any, pg_user: str) -> None:
    url = pg_factory().replace(f"//{pg_user}@", f"//{pg_user}:s3cret-pw@")
    db = Database(url)  # trust authentication ignores the password
    try:
        with pytest.raises(SchemaVersionError, match="not migrated") as info:
            check_schema(db)
        assert "s3cret-pw" not in str(info.value) and "***" in str(info.value)
        assert current_revision(db) is None
    finally:
        db.dispose()
