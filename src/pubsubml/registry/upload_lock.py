"""The upload lock: publishes in progress against the start-up collection of orphan files.

A publish renames its weights into the store before it commits the row that references them
(:mod:`pubsubml.registry.store`), so for a moment a file exists that no row names.  A replica
that starts then (several may share one store) must not take it for a crash leftover.  So every
publish holds the upload lock *shared* from before its file is written until its transaction has
ended, and the start-up collection holds it *exclusively* while it lists the store, reads the
database and removes what no row references.  Publishes never wait for one another; a
collection waits for the publishes in progress, and publishes that start meanwhile wait for the
collection (it takes milliseconds).  A holder that crashes releases the lock with its process or
its database connection, and costs no extra transaction per publish.

* SQLite: every replica runs on the host of the database file, so the lock is ``flock`` on
  ``<store>/upload.lock``, behind a short-held gate (``<store>/upload.gate``) so that a stream of
  overlapping publishes cannot starve the collection.
* PostgreSQL: a session-level advisory lock (``pg_advisory_lock_shared`` / ``pg_advisory_lock``,
  keyed by the schema) on a dedicated connection; replicas may then run on several hosts sharing
  the store over a network file system, where ``flock`` is not reliable.  PostgreSQL queues
  lock requests, so no gate is needed.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from pubsubml.errors import ServiceBusyError
from pubsubml.registry.database import Database

__all__ = ["UploadLock"]

# First half of the two-integer advisory lock key ("pubs"); the second is the schema's hash.
_ADVISORY_CLASS = 0x70756273


class UploadLock:
    """Shared for publishes, exclusive for the orphan collection (see the module notes).

    Parameters
    ----------
    db : Database
    store_root : path-like
        Folder of the artifact store (the lock files live there, on SQLite).
    timeout : float, default=30
        Longest wait for the lock; then :class:`~pubsubml.errors.ServiceBusyError`.

    Examples
    --------
    >>> import tempfile
    >>> lock = UploadLock(Database("sqlite://"), tempfile.mkdtemp())
    >>> with lock.shared():
    ...     pass
    """

    def __init__(self, db: Database, store_root: str | os.PathLike[str], *, timeout: float = 30.0):
        self.db = db
        self.timeout = timeout
        root = Path(store_root)
        root.mkdir(parents=True, exist_ok=True)
        self._lock_path = root / "upload.lock"
        self._gate_path = root / "upload.gate"

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Held by a publish from before its file is written until its transaction ended."""
        if self.db.dialect == "sqlite":
            with self._flock(self._gate_path, fcntl.LOCK_SH):
                fd = self._open_locked(self._lock_path, fcntl.LOCK_SH)
            try:
                yield
            finally:
                os.close(fd)
        else:
            with self._advisory("pg_advisory_lock_shared", "pg_advisory_unlock_shared"):
                yield

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held by the orphan collection; waits for every publish in progress."""
        if self.db.dialect == "sqlite":
            with (
                self._flock(self._gate_path, fcntl.LOCK_EX),
                self._flock(self._lock_path, fcntl.LOCK_EX),
            ):
                yield
        else:
            with self._advisory("pg_advisory_lock", "pg_advisory_unlock"):
                yield

    @contextmanager
    def _flock(self, path: Path, mode: int) -> Iterator[None]:
        fd = self._open_locked(path, mode)
        try:
            yield
        finally:
            os.close(fd)  # closing the descriptor releases its lock

    def _open_locked(self, path: Path, mode: int) -> int:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + self.timeout
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise ServiceBusyError(
                        "the artifact store is being checked by a starting registry replica; "
                        "nothing was changed, retry"
                    ) from None
                time.sleep(pause)
                pause = min(2 * pause, 0.05)

    @contextmanager
    def _advisory(self, lock: str, unlock: str) -> Iterator[None]:
        key = f"{_ADVISORY_CLASS}, hashtext(current_schema())"
        with self.db.engine.connect() as conn:
            try:
                conn.execute(
                    text("SELECT set_config('lock_timeout', :t, true)"),
                    {"t": f"{int(self.timeout * 1000)}ms"},
                )
                conn.execute(text(f"SELECT {lock}({key})"))
            except OperationalError as exc:
                if getattr(exc.orig, "sqlstate", None) != "55P03":  # lock_not_available
                    raise
                raise ServiceBusyError(
                    "the artifact store is being checked by a starting registry replica; "
                    "nothing was changed, retry"
                ) from None
            conn.commit()  # the session-level lock outlives the transaction
            try:
                yield
            finally:
                conn.execute(text(f"SELECT {unlock}({key})"))
                conn.commit()
