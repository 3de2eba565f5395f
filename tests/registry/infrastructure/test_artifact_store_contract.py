"""The contract every artifact store keeps (pubsubml.registry.infrastructure.artifact_store.ArtifactStorage): the file
store, and the database store on SQLite and on PostgreSQL.

A partial write is never visible, a digest mismatch and an oversize upload are refused with
nothing stored, a staged artifact reads back exactly (in chunks too), orphans are collected."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from pubsubml.errors import DigestMismatchError, NotFoundError, PayloadTooLargeError
from pubsubml.registry.infrastructure.artifact_store import ArtifactStorage, ArtifactStore
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.database_artifact_store import DatabaseArtifactStore
from pubsubml.registry.tables import ArtifactChunkRow, ArtifactObjectRow

LIMIT = 1000
CHUNK = 64  # small chunks, so that every artifact of these tests spans several


@pytest.fixture(
    params=[
        "files",
        "database-sqlite",
        pytest.param("database-postgresql", marks=pytest.mark.postgres),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ArtifactStorage]:
    if request.param == "files":
        yield ArtifactStore(tmp_path / "store", max_bytes=LIMIT)
        return
    backend = "sqlite" if request.param.endswith("sqlite") else "postgresql"
    url = request.getfixturevalue("backend_url")(backend)
    db = Database(url)
    try:
        yield DatabaseArtifactStore(db, chunk_bytes=CHUNK, max_bytes=LIMIT)
    finally:
        db.dispose()


@pytest.fixture
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A migrated, empty database of the asked kind; its URL."""
    import shutil

    def make(kind: str) -> str:
        if kind == "sqlite":
            path = tmp_path / "registry.db"
            shutil.copy(request.getfixturevalue("sqlite_template"), path)
            return f"sqlite:///{path}"
        url = str(request.getfixturevalue("pg_migrated"))
        request.getfixturevalue("support")._empty_postgres(url)
        return url

    return make


def _rows(store: ArtifactStorage) -> tuple[int, int]:
    """(objects, chunks) in the database store; (files, temporary files) in the file store."""
    if isinstance(store, ArtifactStore):
        return len(store.keys()), len(store.tmp_files())
    assert isinstance(store, DatabaseArtifactStore)
    with store.db.read() as session:
        objects = session.execute(select(func.count()).select_from(ArtifactObjectRow)).scalar_one()
        chunks = session.execute(select(func.count()).select_from(ArtifactChunkRow)).scalar_one()
    return int(objects), int(chunks)


def test_an_artifact_reads_back_exactly_whole_and_in_chunks(store: ArtifactStorage) -> None:
    data = bytes(range(256)) * 3 + b"tail"  # 772 bytes: 13 chunks of 64 in the database store
    staged = store.stage(data, sha256=hashlib.sha256(data).hexdigest())
    store.promote(staged)
    assert staged.size == len(data) and staged.sha256 == hashlib.sha256(data).hexdigest()
    assert store.keys() == {staged.key}
    assert store.read(staged.key) == data
    assert store.read(staged.key, sha256=staged.sha256) == data
    parts = list(store.chunks(staged.key, sha256=staged.sha256))
    assert b"".join(parts) == data
    if isinstance(store, DatabaseArtifactStore):
        assert [len(p) for p in parts] == [CHUNK] * 12 + [4]


def test_empty_artifacts_are_stored(store: ArtifactStorage) -> None:
    staged = store.stage(b"")
    store.promote(staged)
    assert store.read(staged.key) == b"" and list(store.chunks(staged.key)) in ([], [b""])


def test_a_digest_mismatch_is_refused_and_nothing_stored(store: ArtifactStorage) -> None:
    before = _rows(store)
    with pytest.raises(DigestMismatchError, match="was expected"):
        store.stage(b"weights", sha256=hashlib.sha256(b"other").hexdigest())
    assert _rows(store) == before and store.keys() == set()


def test_an_oversize_upload_is_refused_and_nothing_stored(store: ArtifactStorage) -> None:
    before = _rows(store)
    with pytest.raises(PayloadTooLargeError, match=f"limit is {LIMIT} bytes"):
        store.stage(b"x" * (LIMIT + 1))
    assert _rows(store) == before and store.keys() == set()
    staged = store.stage(b"x" * LIMIT)  # at the limit is fine
    store.promote(staged)
    assert len(store.read(staged.key)) == LIMIT


@contextlib.contextmanager
def _torn_writes(store: ArtifactStorage) -> Iterator[None]:
    """Writes of the store fail after part of an artifact was written ("disk full")."""
    if isinstance(store, ArtifactStore):
        import builtins

        real_open = builtins.open

        class Torn:
            def __init__(self, fh: Any) -> None:
                self.fh = fh

            def __enter__(self) -> Torn:
                return self

            def __exit__(self, *exc: Any) -> None:
                self.fh.close()

            def write(self, chunk: bytes) -> int:
                self.fh.write(chunk[:100])
                raise OSError("disk full")

        def torn_open(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            fh = real_open(path, mode, *args, **kwargs)
            return Torn(fh) if mode == "xb" else fh

        builtins.open = torn_open  # type: ignore[assignment]
        try:
            yield
        finally:
            builtins.open = real_open
        return
    from sqlalchemy import event

    assert isinstance(store, DatabaseArtifactStore)
    engine = store.db.engine

    def fail_on_chunks(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO ARTIFACT_CHUNKS"):
            raise OSError("disk full")  # the object row was inserted before

    event.listen(engine, "before_cursor_execute", fail_on_chunks)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", fail_on_chunks)


def test_a_partial_write_is_never_visible(store: ArtifactStorage) -> None:
    """The write fails after part of the artifact was written: nothing of it can be read, and
    the next collection leaves the store empty."""
    with _torn_writes(store), pytest.raises(Exception, match="disk full"):
        store.stage(b"y" * 500)
    assert store.keys() == set()
    store.collect_orphans([])
    assert _rows(store) == (0, 0)


def test_stage_under_a_taken_key_is_refused(store: ArtifactStorage) -> None:
    key = "ab" * 16
    first = store.stage(b"first", key=key)
    store.promote(first)
    with pytest.raises(FileExistsError):
        store.stage(b"other", key=key)
    assert store.read(key) == b"first"


@pytest.mark.parametrize("key", ["", "../" + "0" * 29, "0" * 31, "A" * 32, "0" * 32 + "\n"])
def test_invalid_or_unknown_keys_are_not_found(store: ArtifactStorage, key: str) -> None:
    with pytest.raises(NotFoundError):
        store.read(key)
    with pytest.raises(NotFoundError):
        store.chunks(key)
    with pytest.raises(NotFoundError, match="missing"):
        store.read("cd" * 16)


def test_a_wrong_expected_digest_on_read_is_refused(store: ArtifactStorage) -> None:
    staged = store.stage(b"weights")
    store.promote(staged)
    with pytest.raises(DigestMismatchError):
        store.read(staged.key, sha256="0" * 64)


def test_discard_and_collection_remove_only_unreferenced_artifacts(store: ArtifactStorage) -> None:
    kept, orphan, dropped = store.stage(b"kept"), store.stage(b"orphan"), store.stage(b"drop")
    for s in (kept, orphan, dropped):
        store.promote(s)
    store.discard(dropped)
    store.discard(dropped)  # twice is harmless
    assert store.keys() == {kept.key, orphan.key}
    assert store.collect_orphans([kept.key], grace_seconds=3600).removed_objects == []
    report = store.collect_orphans([kept.key, "ef" * 16])
    assert report.removed_objects == [orphan.key] and report.missing == ["ef" * 16]
    assert store.keys() == {kept.key} and store.read(kept.key) == b"kept"


def test_stored_bytes_changed_behind_the_store_are_detected(store: ArtifactStorage) -> None:
    staged = store.stage(b"A" * 200)
    store.promote(staged)
    if isinstance(store, ArtifactStore):
        assert staged.final_path is not None
        staged.final_path.write_bytes(b"B" * 200)
    else:
        from sqlalchemy import update

        assert isinstance(store, DatabaseArtifactStore)
        with store.db.write() as session:
            session.execute(
                update(ArtifactChunkRow)
                .where(ArtifactChunkRow.storage_key == staged.key, ArtifactChunkRow.seq == 1)
                .values(data=b"B" * CHUNK)
            )
    with pytest.raises(DigestMismatchError):
        b"".join(store.chunks(staged.key, sha256=staged.sha256))
