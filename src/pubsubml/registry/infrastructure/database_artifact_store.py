"""Published weights in the database (``--store database``): replicas share only the database.

The file store (:mod:`pubsubml.registry.infrastructure.artifact_store`) needs one folder that every
replica sees; with this store the weights live in two tables of the registry database, so replicas
on different machines need nothing but the database (a BLOB on SQLite, ``bytea`` on PostgreSQL).  An
artifact is one ``artifact_objects`` row (size, SHA-256, number of chunks) and its
``artifact_chunks`` of at most ``chunk_bytes`` each (1 MiB by default, as object stores cut uploads
into parts), all inserted in ONE transaction: a partial write is never visible, whatever interrupts
it. Downloads read one chunk per statement, so serving a large model holds neither a transaction nor
the whole artifact in memory, and the digest is checked as the chunks go by.

The publish path is the file store's: the weights are staged before the transaction that
records the model, and a staged artifact that no committed model references is an orphan that
the start-up collection removes, holding the upload lock exclusively
(:mod:`pubsubml.registry.infrastructure.upload_lock`).  Staging commits without waiting for the disk
(:meth:`Database.write` with ``durable=False``): the model's own commit, which is durable and
comes later in the same log, makes the staged rows durable with it.  A crash before that commit
can lose a staged artifact or leave one behind, never a committed model without its weights.

Examples
--------
>>> from pubsubml.registry.migrate import upgrade
>>> db = Database("sqlite://")
>>> _ = upgrade(db)
>>> store = DatabaseArtifactStore(db, chunk_bytes=4)
>>> staged = store.stage(b"weights")
>>> store.read(staged.key), list(store.chunks(staged.key))
(b'weights', [b'weig', b'hts'])
>>> db.dispose()
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pubsubml.errors import DigestMismatchError, NotFoundError
from pubsubml.registry.infrastructure.artifact_store import (
    OrphanReport,
    StagedArtifact,
    check_key,
    check_upload,
    new_key,
)
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.tables import ArtifactChunkRow, ArtifactObjectRow, utcnow

__all__ = ["CHUNK_BYTES", "DatabaseArtifactStore"]

CHUNK_BYTES = 1 << 20
_DELETE_BATCH = 500

_HEAD = (
    select(
        ArtifactObjectRow.size_bytes,
        ArtifactObjectRow.sha256,
        ArtifactObjectRow.chunk_count,
        ArtifactChunkRow.data,
    )
    .select_from(ArtifactObjectRow)
    .outerjoin(
        ArtifactChunkRow,
        (ArtifactChunkRow.storage_key == ArtifactObjectRow.storage_key)
        & (ArtifactChunkRow.seq == 0),
    )
    .where(ArtifactObjectRow.storage_key == bindparam("key"))
)
_CHUNK = select(ArtifactChunkRow.data).where(
    ArtifactChunkRow.storage_key == bindparam("key"), ArtifactChunkRow.seq == bindparam("seq")
)
_INSERT_OBJECT = insert(ArtifactObjectRow)
_INSERT_CHUNKS = insert(ArtifactChunkRow)


# PostgreSQL sends bytea in its text format (hex: twice the bytes, encoded by the server and
# decoded by the driver) unless the results are asked for in binary: the chunk reads ask.
_HEAD_SQL = (
    "SELECT o.size_bytes, o.sha256, o.chunk_count, c.data FROM artifact_objects o "
    "LEFT OUTER JOIN artifact_chunks c ON c.storage_key = o.storage_key AND c.seq = 0 "
    "WHERE o.storage_key = %(key)s"
)
_CHUNK_SQL = "SELECT data FROM artifact_chunks WHERE storage_key = %(key)s AND seq = %(seq)s"


def _binary_rows(session: Session, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` read through the session's psycopg connection in binary format."""
    raw: Any = session.connection().connection.dbapi_connection
    with raw.cursor(binary=True) as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _head_statement(session: Session, key: str) -> Any:
    return session.connection().execute(_HEAD, {"key": key}).one_or_none()


def _binary_head(session: Session, key: str) -> Any:
    rows = _binary_rows(session, _HEAD_SQL, {"key": key})
    return rows[0] if rows else None


def _chunk_statement(session: Session, params: dict[str, Any]) -> Any:
    return session.connection().execute(_CHUNK, params).scalar_one_or_none()


def _binary_chunk(session: Session, params: dict[str, Any]) -> Any:
    rows = _binary_rows(session, _CHUNK_SQL, params)
    return rows[0][0] if rows else None


class DatabaseArtifactStore:
    """Published weights as chunked rows of the registry database (see the module notes).

    Parameters
    ----------
    db : Database
        The registry database, migrated (revision 0006 creates the tables).
    chunk_bytes : int, default=1 MiB
        Largest chunk; an artifact of n bytes is ⌈n / chunk_bytes⌉ rows.
    max_bytes : int, optional
        Largest artifact :meth:`stage` accepts.
    """

    def __init__(
        self, db: Database, *, chunk_bytes: int = CHUNK_BYTES, max_bytes: int | None = None
    ) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
        self.db = db
        self.chunk_bytes = chunk_bytes
        self.max_bytes = max_bytes

    new_key = staticmethod(new_key)

    def stage(
        self, data: bytes, key: str | None = None, *, sha256: str | None = None
    ) -> StagedArtifact:
        """Insert ``data`` as an object and its chunks in one transaction under ``key``
        (default: a fresh one); invisible to subscribers until a committed model references it.

        Raises
        ------
        PayloadTooLargeError, DigestMismatchError
            Over ``max_bytes``, or not the ``sha256`` expected: nothing is written.
        FileExistsError
            ``key`` is taken (as the file store says it).
        """
        digest = check_upload(data, max_bytes=self.max_bytes, sha256=sha256)
        key = check_key(key or self.new_key())
        view = memoryview(data)
        step = self.chunk_bytes
        chunks = [
            {"storage_key": key, "seq": i, "data": view[start : start + step]}
            for i, start in enumerate(range(0, len(data), step))
        ]
        head = {
            "storage_key": key,
            "size_bytes": len(data),
            "sha256": digest,
            "chunk_count": len(chunks),
            "created_at": utcnow(),
        }
        try:
            with self.db.write(durable=False) as session:
                conn = session.connection()
                conn.execute(_INSERT_OBJECT, head)
                if chunks:
                    conn.execute(_INSERT_CHUNKS, chunks)
        except IntegrityError:
            raise FileExistsError(f"artifact {key!r} already exists in the store") from None
        return StagedArtifact(key=key, size=len(data), promoted=True, sha256=digest)

    def promote(self, staged: StagedArtifact) -> None:
        """Nothing to move: the rows are the artifact from :meth:`stage` on."""
        staged.promoted = True

    def discard(self, staged: StagedArtifact) -> None:
        """Delete a staged (or promoted but never committed) artifact's rows."""
        self._delete([staged.key])

    def _delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), _DELETE_BATCH):
            batch = keys[start : start + _DELETE_BATCH]
            with self.db.write(durable=False) as session:
                session.execute(
                    delete(ArtifactChunkRow).where(ArtifactChunkRow.storage_key.in_(batch))
                )
                session.execute(
                    delete(ArtifactObjectRow).where(ArtifactObjectRow.storage_key.in_(batch))
                )

    def _head(self, key: str) -> tuple[int, str, int, bytes]:
        check_key(key)
        read = _binary_head if self.db.dialect == "postgresql" else _head_statement
        row = self.db.read_statements(lambda session: read(session, key))
        if row is None:
            raise NotFoundError(f"artifact {key!r} is missing from the store")
        size, digest, count, first = row
        return int(size), str(digest), int(count), bytes(first or b"")

    def _chunk(self, key: str, seq: int) -> bytes:
        params: dict[str, Any] = {"key": key, "seq": seq}
        read = _binary_chunk if self.db.dialect == "postgresql" else _chunk_statement
        data = self.db.read_statements(lambda session: read(session, params))
        if data is None:  # pragma: no cover - chunks are inserted and deleted with their object
            raise NotFoundError(f"chunk {seq} of artifact {key!r} is missing from the store")
        return bytes(data)

    def read(self, key: str, *, sha256: str | None = None) -> bytes:
        """The bytes of ``key``, checked against the digest recorded when it was staged (and
        against ``sha256`` when given).

        Raises
        ------
        NotFoundError
            No such artifact.
        DigestMismatchError
            The bytes read are not the ones staged (or not ``sha256``).
        """
        return b"".join(self.chunks(key, sha256=sha256))

    def chunks(self, key: str, *, sha256: str | None = None) -> Iterator[bytes]:
        """The bytes of ``key`` one chunk (one statement) at a time; the digest (recorded and,
        when given, ``sha256``) is checked after the last chunk.

        Raises
        ------
        NotFoundError
            No such artifact (when called, before any chunk).
        DigestMismatchError
            After the last chunk, when the bytes have another digest.
        """
        size, recorded, count, first = self._head(key)
        if sha256 is not None and sha256 != recorded:
            raise DigestMismatchError(
                f"artifact {key!r} was stored with SHA-256 {recorded}, {sha256} was expected"
            )
        return self._stream(key, size, recorded, count, first)

    def _stream(
        self, key: str, size: int, digest: str, count: int, first: bytes
    ) -> Iterator[bytes]:
        seen = hashlib.sha256()
        total = 0
        for seq in range(count):
            chunk = first if seq == 0 else self._chunk(key, seq)
            seen.update(chunk)
            total += len(chunk)
            yield chunk
        if total != size or seen.hexdigest() != digest:
            raise DigestMismatchError(
                f"artifact {key!r} read back as {total} bytes with SHA-256 {seen.hexdigest()}, "
                f"stored as {size} bytes with {digest}"
            )

    def keys(self) -> set[str]:
        """Keys of every stored artifact, referenced or not."""
        return set(
            self.db.read_statements(
                lambda session: list(
                    session.execute(select(ArtifactObjectRow.storage_key)).scalars()
                )
            )
        )

    def collect_orphans(
        self, referenced: Iterable[str], *, grace_seconds: float = 0.0
    ) -> OrphanReport:
        """Delete the artifacts no committed model references (older than ``grace_seconds``);
        report referenced keys that have no artifact.  The caller holds the upload lock
        exclusively (:func:`pubsubml.registry.services.maintenance.collect_orphans`)."""
        wanted = set(referenced)
        cutoff = utcnow() - timedelta(seconds=grace_seconds)
        rows = self.db.read_statements(
            lambda session: session.execute(
                select(ArtifactObjectRow.storage_key, ArtifactObjectRow.created_at)
            ).all()
        )
        stored = {key for key, _ in rows}
        orphans = sorted(key for key, created in rows if key not in wanted and created <= cutoff)
        self._delete(orphans)
        return OrphanReport(removed_objects=orphans, missing=sorted(wanted - stored))
