"""Tests of pubsubml.registry.infrastructure.upload_lock: shared publishes against the exclusive collection."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pubsubml.errors import ServiceBusyError
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.upload_lock import UploadLock

SHORT = 0.1


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """SQLite locks files of the store; PostgreSQL takes advisory locks (any schema will do)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'registry.db'}"
    else:
        url = request.getfixturevalue("pg_factory")()
    database = Database(url)
    yield database
    database.dispose()


def _busy(lock: UploadLock, mode: str) -> bool:
    """True when ``lock`` cannot be taken in ``mode`` within its timeout."""
    try:
        with getattr(lock, mode)():
            return False
    except ServiceBusyError as exc:
        assert "retry" in str(exc)
        return True


def test_exclusive_excludes_everyone_and_is_released_on_error(db: Database, tmp_path: Path) -> None:
    store = tmp_path / "store"
    holder = UploadLock(db, store)
    other = UploadLock(db, store, timeout=SHORT)
    with holder.exclusive():
        assert _busy(other, "exclusive") and _busy(other, "shared")
    with pytest.raises(RuntimeError), holder.exclusive():
        raise RuntimeError("the collection failed")
    with pytest.raises(RuntimeError), holder.shared():
        raise RuntimeError("the publish failed")
    assert not _busy(other, "exclusive")


def test_a_waiting_collection_holds_back_new_publishes(db: Database, tmp_path: Path) -> None:
    store = tmp_path / "store"
    publish = UploadLock(db, store)
    collection = UploadLock(db, store, timeout=30.0)
    latecomer = UploadLock(db, store, timeout=SHORT)
    order: list[str] = []

    def collect() -> None:
        with collection.exclusive():
            order.append("collected")

    with publish.shared():
        thread = threading.Thread(target=collect)
        thread.start()
        # Once the collection queues up behind the publish in progress, a new publish waits
        # behind the collection (until then it may still get in, and leaves at once).
        deadline = time.monotonic() + 20
        while not _busy(latecomer, "shared"):
            assert time.monotonic() < deadline, "new publishes kept overtaking the collection"
            time.sleep(0.02)
        assert thread.is_alive() and order == []
        order.append("published")
    thread.join(30)
    assert order == ["published", "collected"]
    assert not _busy(latecomer, "shared")


def test_locks_of_different_stores_are_independent(
    db: Database, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if db.dialect == "postgresql":  # one store per schema
        other_db = Database(request.getfixturevalue("pg_factory")())
        other = UploadLock(other_db, tmp_path / "store", timeout=SHORT)
    else:  # one store per folder
        other_db = db
        other = UploadLock(db, tmp_path / "elsewhere", timeout=SHORT)
    try:
        with UploadLock(db, tmp_path / "store").exclusive():
            assert not _busy(other, "exclusive")
    finally:
        if other_db is not db:
            other_db.dispose()


def test_the_store_folder_is_created(tmp_path: Path) -> None:
    db = Database("sqlite://")
    root = tmp_path / "a" / "b"
    UploadLock(db, root)
    assert root.is_dir()
    db.dispose()


def test_overlapping_publishes_of_a_process_share_one_hold(db: Database, tmp_path: Path) -> None:
    lock = UploadLock(db, tmp_path / "store", join_window=30.0)
    inside = threading.Barrier(4, timeout=20)
    leave = threading.Event()

    def publish() -> None:
        with lock.shared():
            inside.wait()
            leave.wait(20)

    threads = [threading.Thread(target=publish) for _ in range(3)]
    for t in threads:
        t.start()
    inside.wait()  # all three hold the lock at once
    assert lock.holds_taken == 1
    assert _busy(UploadLock(db, tmp_path / "store", timeout=SHORT), "exclusive")
    leave.set()
    for t in threads:
        t.join(20)
    assert not _busy(UploadLock(db, tmp_path / "store", timeout=SHORT), "exclusive")
    with lock.shared():  # the last one out released it: the next publish takes it again
        assert lock.holds_taken == 2


def test_a_collection_waits_only_for_holds_younger_than_the_join_window(
    db: Database, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    joining = UploadLock(db, store, timeout=SHORT, join_window=30.0)
    brief = UploadLock(db, store, timeout=SHORT, join_window=0.05)
    collection = UploadLock(db, store, timeout=30.0)
    probe = UploadLock(db, store, timeout=SHORT, join_window=0.0)
    done = threading.Event()

    def collect() -> None:
        with collection.exclusive():
            done.set()

    with joining.shared(), brief.shared():
        thread = threading.Thread(target=collect)
        thread.start()
        deadline = time.monotonic() + 20
        while not _busy(probe, "shared"):  # the collection now queues behind the holds
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with joining.shared():  # a young hold of the same process is joined: no wait
            assert joining.holds_taken == 1
        time.sleep(0.1)
        assert _busy(brief, "shared")  # too old to join: a new hold waits for the collection
        assert brief.holds_taken == 2 and not done.is_set()
    thread.join(30)
    assert done.is_set()
    assert not _busy(brief, "shared")


def test_publishes_waiting_on_one_hold_all_get_its_error(db: Database, tmp_path: Path) -> None:
    store = tmp_path / "store"
    lock = UploadLock(db, store, timeout=0.5, join_window=30.0)
    errors: list[BaseException] = []

    def publish() -> None:
        try:
            with lock.shared():
                pass
        except ServiceBusyError as exc:
            errors.append(exc)

    with UploadLock(db, store).exclusive():
        threads = [threading.Thread(target=publish) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    assert len(errors) == 2 and all("retry" in str(e) for e in errors)
    assert not _busy(lock, "shared")  # taken again once the collection is over
