"""The upload lock: publishes in progress against the start-up collection of orphan files.

A publish renames its weights into the store before it commits the row that references them
(:mod:`pubsubml.registry.infrastructure.artifact_store`), so for a moment a file exists that no row
names.  A replica that starts then (several may share one store) must not take it for a crash
leftover.  So every publish holds the upload lock *shared* from before its file is written until its
transaction has ended, and the start-up collection holds it *exclusively* while it lists the store,
reads the database and removes what no row references.  Publishes never wait for one another; a
collection waits for the publishes in progress, and publishes that start meanwhile wait for the
collection (it takes milliseconds).  A holder that crashes releases the lock with its process or its
database connection, and costs no extra transaction per publish.

Within one process, concurrent publishes share one hold of the lock: the first takes it, those
that arrive while it is held join it (no database round trip, no file lock), and the last to
leave releases it.  A hold accepts newcomers only for ``join_window`` seconds after it was taken;
later publishes take a new hold, which queues behind a waiting collection like any other, so a
steady stream of overlapping publishes in one process cannot starve a starting replica.

* SQLite: every replica runs on the host of the database file, so the lock is ``flock`` on
  ``<store>/upload.lock``, behind a short-held gate (``<store>/upload.gate``) so that a stream of
  overlapping publishes cannot starve the collection.
* PostgreSQL: a session-level advisory lock (``pg_advisory_lock_shared`` / ``pg_advisory_lock``,
  keyed by the schema) on a dedicated connection; replicas may then run on several hosts sharing
  the store over a network file system, where ``flock`` is not reliable.  PostgreSQL queues
  lock requests, so no gate is needed.
"""

from __future__ import annotations

import copy
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from pubsubml.errors import ServiceBusyError
from pubsubml.registry.infrastructure.database import Database

__all__ = ["UploadLock"]

# First half of the two-integer advisory lock key ("pubs"); the second is the schema's hash.
_ADVISORY_CLASS = 0x70756273


@dataclass(eq=False)
class _Hold:
    """One shared hold of the lock, used by every publish of the process that joined it."""

    started: float
    users: int = 0
    closing: bool = False
    ready: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    held: ExitStack = field(default_factory=ExitStack)


class UploadLock:
    """Shared for publishes, exclusive for the orphan collection (see the module notes).

    Parameters
    ----------
    db : Database
    store_root : path-like, optional
        Folder of the lock files on SQLite: the artifact store's, or with the database store
        the database file's.  Not used on PostgreSQL (advisory locks), where it may be None.
    timeout : float, default=30
        Longest wait for the lock; then :class:`~pubsubml.errors.ServiceBusyError`.
    join_window : float, default=0.5
        Seconds during which publishes of this process join a hold taken by another one
        (0: every publish takes the lock itself).

    Examples
    --------
    >>> import tempfile
    >>> lock = UploadLock(Database("sqlite://"), tempfile.mkdtemp())
    >>> with lock.shared():
    ...     pass
    """

    def __init__(
        self,
        db: Database,
        store_root: str | os.PathLike[str] | None,
        *,
        timeout: float = 30.0,
        join_window: float = 0.5,
    ):
        if join_window < 0:
            raise ValueError(f"join_window must be >= 0, got {join_window}")
        self.db = db
        self.timeout = timeout
        self.join_window = join_window
        self.holds_taken = 0
        """How many times this process took the lock shared (for monitoring and tests)."""
        self._mutex = threading.Lock()
        self._hold: _Hold | None = None
        if store_root is None:
            if db.dialect == "sqlite":
                raise ValueError("on SQLite the upload lock needs a folder for its lock files")
            self._lock_path = self._gate_path = Path(os.devnull)  # never opened
            return
        root = Path(store_root)
        if db.dialect == "sqlite":
            root.mkdir(parents=True, exist_ok=True)
        self._lock_path = root / "upload.lock"
        self._gate_path = root / "upload.gate"

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Held by a publish from before its file is written until its transaction ended.

        Joins this process's current hold when it is younger than ``join_window`` (see the
        module notes), else takes the lock.

        Raises
        ------
        ServiceBusyError
            A collection held the lock past ``timeout``.
        """
        now = time.monotonic()
        with self._mutex:
            hold = self._hold
            joined = hold is not None and not hold.closing and now - hold.started < self.join_window
            if not joined:
                hold = self._hold = _Hold(started=now)
                self.holds_taken += 1
            assert hold is not None
            hold.users += 1
        try:
            if joined:
                hold.ready.wait()
                if hold.error is not None:
                    raise copy.copy(hold.error)
            else:
                try:
                    hold.held.enter_context(self._take_shared())
                except BaseException as exc:
                    hold.error = exc
                    with self._mutex:  # newcomers take the lock themselves
                        hold.closing = True
                        if self._hold is hold:
                            self._hold = None
                    raise
                finally:
                    hold.ready.set()
            yield
        finally:
            with self._mutex:
                hold.users -= 1
                last = hold.users == 0
                if last:
                    hold.closing = True
                    if self._hold is hold:
                        self._hold = None
            if last:
                hold.held.close()

    @contextmanager
    def _take_shared(self) -> Iterator[None]:
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
