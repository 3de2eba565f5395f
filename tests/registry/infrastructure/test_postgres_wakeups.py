"""Cross-replica wake-ups: a commit on one replica wakes the readers waiting on another, over
PostgreSQL LISTEN/NOTIFY; a rolled-back transaction and another schema's commits wake nobody."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.postgres_wakeups import (
    FEED_CHANNEL,
    PostgresWakeups,
    notify_commit,
    postgres_conninfo,
)
from pubsubml.registry.migrate import upgrade
from registry.conftest import (
    ArtifactFactory,
    make_settings,
    publish_wakes_poll,
    thread_server,
)


def test_the_listener_connects_with_the_registry_url() -> None:
    url = "postgresql+psycopg://alice:s3cret@127.0.0.1:5432/test?options=-csearch_path%3Dt_x"
    info = postgres_conninfo(url)
    assert info.startswith("postgresql://alice:s3cret@127.0.0.1:5432/test")
    assert "search_path" in info
    with pytest.raises(ValueError, match="not a PostgreSQL"):
        postgres_conninfo("sqlite:///registry.db")


def test_sqlite_transactions_notify_nobody(db: Database) -> None:
    with db.write() as session:
        notify_commit(session, 7)  # no statement on SQLite: nothing to listen to


class Wakes:
    """Counts the listener's calls and lets a test wait for the next one."""

    def __init__(self) -> None:
        self.count = 0
        self._event = threading.Event()

    def __call__(self) -> None:
        self.count += 1
        self._event.set()

    def wait(self, timeout: float) -> bool:
        woke = self._event.wait(timeout)
        self._event.clear()
        return woke


@pytest.fixture
def pg_url(pg_factory: Any) -> Iterator[str]:
    url = pg_factory()
    database = Database(url)
    upgrade(database)
    database.dispose()
    yield url


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[Database]:
    database = Database(pg_url)
    yield database
    database.dispose()


@pytest.mark.postgres
def test_a_commit_wakes_the_listener_and_a_rollback_does_not(pg_url: str, pg_db: Database) -> None:
    wakes = Wakes()
    listener = PostgresWakeups(pg_url, wakes, check_seconds=0.1)
    listener.start()
    try:
        assert listener.listening
        with pg_db.write() as session:
            notify_commit(session, 1)
        assert wakes.wait(10.0) and wakes.count == 1

        with pytest.raises(RuntimeError), pg_db.write() as session:
            notify_commit(session, 2)
            raise RuntimeError("the publish fails after its feed phase")
        assert not wakes.wait(0.5) and wakes.count == 1
    finally:
        listener.stop()
    assert not listener.listening


@pytest.mark.postgres
def test_commits_in_another_schema_of_the_database_wake_nobody(
    pg_url: str, pg_db: Database, pg_factory: Any
) -> None:
    other = Database(pg_factory())
    wakes = Wakes()
    listener = PostgresWakeups(pg_url, wakes, check_seconds=0.1)
    listener.start()
    try:
        with other.write() as session:  # another registry sharing the database server
            session.execute(
                text("SELECT pg_notify(:c, current_schema() || :p)"), {"c": FEED_CHANNEL, "p": ":1"}
            )
        assert not wakes.wait(0.5)
        with pg_db.write() as session:
            notify_commit(session, 1)
        assert wakes.wait(10.0)
    finally:
        listener.stop()
        other.dispose()


@pytest.mark.postgres
def test_a_publish_on_one_replica_wakes_a_long_poll_on_the_other(
    pg_url: str, tmp_path: Path, artifacts: ArtifactFactory
) -> None:
    """Both replicas re-read only every 30 s: the poll on B returns early only if A's commit
    woke it."""
    changes = {"feed_poll_interval": 30.0, "long_poll_max_seconds": 60.0}
    a_settings = make_settings(pg_url, tmp_path / "store", **changes)
    b_settings = make_settings(pg_url, tmp_path / "store", **changes)
    with thread_server(a_settings) as url_a, thread_server(b_settings) as url_b:
        page, waited, model_id = publish_wakes_poll(url_a, url_b, artifacts, seed=11)
    assert [item["model_id"] for item in page["items"]] == [model_id]
    assert waited < 20.0  # woken by the commit on A, not by a re-read after 30 s
