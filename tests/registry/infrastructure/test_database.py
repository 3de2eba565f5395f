"""Tests of pubsubml.registry.infrastructure.database: engines, read/write sessions and the feed lock."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, insert, select, text
from sqlalchemy.exc import IntegrityError, ProgrammingError

from pubsubml.registry.infrastructure.database import Database, lock_feed_clock, store_feed_clock
from pubsubml.registry.tables import FeatureRow, FeedClockRow, ModelVisibilityRow
from registry.conftest import terminate_backend


@pytest.fixture
def path(sqlite_template: Path, tmp_path: Path) -> Path:
    target = tmp_path / "registry.db"
    shutil.copy(sqlite_template, target)
    return target


@pytest.fixture
def db(path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{path}", pool_size=2)
    yield database
    database.dispose()


def _feature(name: str) -> FeatureRow:
    return FeatureRow(name=name, definition="{}")


def _names(db: Database) -> list[str]:
    with db.read() as s:
        return list(s.execute(select(FeatureRow.name).order_by(FeatureRow.name)).scalars())


def test_the_dialect_and_pool_follow_the_url(tmp_path: Path) -> None:
    pg = Database("postgresql+psycopg://nobody@127.0.0.1:1/none", pool_size=3)
    assert pg.dialect == "postgresql" and pg.engine.pool.size() == 3  # no connection yet
    pg.dispose()
    file = Database(f"sqlite:///{tmp_path / 'x.db'}", pool_size=5)
    assert file.dialect == "sqlite" and file.engine.pool.size() == 5
    file.dispose()


def test_every_sqlite_connection_is_configured(db: Database) -> None:
    with db.engine.connect() as conn:
        pragmas = {
            name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
        }
    assert pragmas == {
        "journal_mode": "wal",
        "synchronous": 2,
        "foreign_keys": 1,
        "busy_timeout": 30000,
    }


def test_write_commits_or_rolls_back_as_a_whole(db: Database) -> None:
    with db.write() as s:
        s.add(_feature("kept"))
    with pytest.raises(ValueError, match="boom"), db.write() as s:
        s.add(_feature("lost"))
        s.flush()
        raise ValueError("boom")
    assert _names(db) == ["kept"]


def test_read_sessions_change_nothing_and_rows_outlive_them(db: Database) -> None:
    with db.write() as s:
        s.add(_feature("age"))
    with db.read() as s:
        row = s.execute(select(FeatureRow)).scalar_one()
        s.add(_feature("not committed"))
        s.flush()
    assert (row.name, row.definition) == ("age", "{}")  # usable after the block
    assert row.created_at.tzinfo is not None
    assert _names(db) == ["age"]


def test_foreign_keys_are_enforced(db: Database) -> None:
    with pytest.raises(IntegrityError), db.write() as s:
        s.add(ModelVisibilityRow(model_id="0" * 32, site_id=999))
        s.flush()


def _try_write_lock(path: Path) -> bool:
    """True when another connection gets SQLite's write lock at once."""
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        assert "locked" in str(exc)
        return False
    else:
        conn.execute("ROLLBACK")
        return True
    finally:
        conn.close()


def test_a_write_holds_the_write_lock_from_its_first_statement(db: Database, path: Path) -> None:
    with db.write() as s:
        s.execute(select(FeedClockRow)).all()  # a read, yet the write lock is taken
        assert not _try_write_lock(path)
    assert _try_write_lock(path)
    with db.read() as s:
        s.execute(select(FeedClockRow)).all()
        assert _try_write_lock(path)  # readers never block the writer


def test_lock_feed_clock_returns_the_position_store_feed_clock_sets_it(db: Database) -> None:
    with db.write() as s:
        assert lock_feed_clock(s) == 0
        store_feed_clock(s, 41)
    with db.write() as s:
        assert lock_feed_clock(s) == 41
    with pytest.raises(RuntimeError, match="undone"), db.write() as s:
        store_feed_clock(s, 50)
        raise RuntimeError("undone")  # rolled back with its transaction
    with db.read() as s:
        assert s.execute(select(FeedClockRow.position)).scalar_one() == 41


def test_lock_feed_clock_refuses_an_unmigrated_clock(db: Database) -> None:
    with db.engine.begin() as conn:
        conn.execute(delete(FeedClockRow))
    with pytest.raises(RuntimeError, match="not migrated"), db.write() as s:
        lock_feed_clock(s)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def clocked(request: pytest.FixtureRequest, path: Path) -> Iterator[Database]:
    """A database with the feed clock at 0, on each backend."""
    if request.param == "sqlite":
        database = Database(f"sqlite:///{path}")
    else:
        database = Database(request.getfixturevalue("pg_factory")())
        FeedClockRow.__table__.create(database.engine)
        with database.engine.begin() as conn:
            conn.execute(insert(FeedClockRow).values(id=1, position=0))
    yield database
    database.dispose()


def test_feed_writers_wait_for_each_other(clocked: Database) -> None:
    db = clocked
    holding, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def first() -> None:
        with db.write() as s:
            store_feed_clock(s, lock_feed_clock(s) + 5)
            holding.set()
            release.wait(30)

    def second() -> None:
        with db.write() as s:
            seen.append(lock_feed_clock(s))

    try:
        one = threading.Thread(target=first)
        one.start()
        assert holding.wait(30)
        two = threading.Thread(target=second)
        two.start()
        time.sleep(0.2)
        assert seen == []  # still waiting for the first transaction
        release.set()
        one.join(30)
        two.join(30)
        assert seen == [5]  # and then sees its committed clock
    finally:
        release.set()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def either(request: pytest.FixtureRequest, path: Path) -> Iterator[Database]:
    """An unmigrated database holding one ``features`` table, on each backend."""
    url = (
        f"sqlite:///{path}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_factory")()
    )
    database = Database(url)
    FeatureRow.__table__.create(database.engine, checkfirst=True)
    yield database
    database.dispose()


def test_read_statements_sees_each_commit_and_writes_nothing_itself(either: Database) -> None:
    db = either
    with db.write() as s:
        s.add(_feature("first"))

    def names(session: Any) -> list[str]:
        return list(session.execute(select(FeatureRow.name).order_by(FeatureRow.name)).scalars())

    assert "first" in db.read_statements(names)
    with db.write() as s:
        s.add(_feature("second"))
    assert {"first", "second"} <= set(db.read_statements(names))

    def failing(session: Any) -> None:
        session.execute(select(FeatureRow.name)).all()
        raise ValueError("not a database error")

    with pytest.raises(ValueError, match="not a database error"):
        db.read_statements(failing)
    assert {"first", "second"} <= set(db.read_statements(names))


@pytest.mark.postgres
def test_read_statements_run_once_more_when_the_server_dropped_the_connection(
    pg_factory: Any,
) -> None:
    """PostgreSQL restarted or killed the pooled connection: the read runs again on a new one."""
    db = Database(pg_factory(), pool_size=1)
    try:
        calls: list[int] = []

        def backend_pid(session: Any) -> int:
            calls.append(len(calls))
            return int(session.execute(text("SELECT pg_backend_pid()")).scalar_one())

        first = db.read_statements(backend_pid)
        terminate_backend(db, first)  # another connection ends the pooled one
        second = db.read_statements(backend_pid)
        assert second != first and len(calls) == 3  # the first call, a failed try, the retry

        def broken(session: Any) -> None:
            session.execute(text("SELECT no_such_column FROM pg_class"))

        with pytest.raises(ProgrammingError):  # an error that is not a lost connection: no retry
            db.read_statements(broken)
    finally:
        db.dispose()


def test_only_a_relaxed_write_commits_without_syncing(backend: Any) -> None:
    """``write(durable=False)`` runs at SQLite ``synchronous=NORMAL`` / PostgreSQL
    ``synchronous_commit = off``; every other transaction on the same connection is durable."""
    db = Database(backend.url, pool_size=1)
    query = "PRAGMA synchronous" if db.dialect == "sqlite" else "SHOW synchronous_commit"
    durable, relaxed = (2, 1) if db.dialect == "sqlite" else ("on", "off")
    try:
        for _ in range(2):
            with db.write(durable=False) as session:
                assert session.execute(text(query)).scalar_one() == relaxed
            with db.write() as session:
                assert session.execute(text(query)).scalar_one() == durable
            with db.write(durable=False) as session:
                session.execute(text("SELECT 1"))
            with db.engine.begin() as conn:  # a plain transaction, as the migrations run
                assert conn.execute(text(query)).scalar_one() == durable
            with db.read() as session:
                assert session.execute(text(query)).scalar_one() == durable
    finally:
        db.dispose()


def test_concurrent_writes_of_one_process_all_commit_on_sqlite(db: Database) -> None:
    """Sixteen threads writing at once take turns for SQLite's one writer; none fails."""
    order: list[int] = []

    def write(i: int) -> None:
        with db.write() as session:
            session.execute(text("UPDATE feed_clock SET position = position + 1"))
            order.append(i)
            time.sleep(0.01)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(order) == list(range(16))
    with db.read() as session:
        assert session.execute(select(FeedClockRow.position)).scalar_one() == 16
