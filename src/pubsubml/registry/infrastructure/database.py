"""Engines, sessions and the feed-writing transaction for SQLite and PostgreSQL.

SQLite runs in WAL mode (readers never block the writer) and every write transaction starts with
``BEGIN IMMEDIATE``, so it holds the database's single write lock from its first statement: write
transactions are serialized and commit in the order they started.  On PostgreSQL a write
transaction that touches the feed locks the single ``feed_clock`` row (``SELECT … FOR UPDATE``) before
it reads anything it depends on, which gives the same order (:func:`lock_feed_clock`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

from sqlalchemy import Engine, bindparam, create_engine, event, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from pubsubml.errors import MissingDatabaseSchemaError, ServiceBusyError
from pubsubml.registry.tables import FeedClockRow

__all__ = ["Database", "lock_feed_clock", "store_feed_clock"]

_WRITE_OPTION = "pubsubml_write"
_SQLITE_WRITE_WAIT = 30.0  # seconds, as the connections' busy_timeout
_RELAXED_OPTION = "pubsubml_relaxed"
T = TypeVar("T")


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's implicit BEGIN is deferred).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        options = conn.get_execution_options()
        write = options.get(_WRITE_OPTION, False)
        # Only a relaxed write (Database.write(durable=False)) commits without syncing; every
        # other transaction on the connection, whoever begins it, runs at FULL again.  The level
        # can only change outside a transaction, so it is set before BEGIN.
        level = "NORMAL" if write and options.get(_RELAXED_OPTION, False) else "FULL"
        info = conn.connection.info
        if info.get(_RELAXED_OPTION, "FULL") != level:
            conn.exec_driver_sql(f"PRAGMA synchronous={level}")
            info[_RELAXED_OPTION] = level
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


class Database:
    """A SQLAlchemy engine with read and write session factories.

    Parameters
    ----------
    url : str
        SQLAlchemy URL (``sqlite:///…`` or ``postgresql+psycopg://…``).  A PostgreSQL URL may
        carry ``?options=-csearch_path%3Dschema`` to use a schema other than ``public``.
    pool_size : int, default=16
        Connections kept open per process (and as many again on PostgreSQL for
        :meth:`read_statements`).

    Examples
    --------
    >>> db = Database("sqlite://")
    >>> db.dialect
    'sqlite'
    >>> db.dispose()
    """

    def __init__(self, url: str, *, pool_size: int = 16) -> None:
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        kwargs: dict[str, Any] = {"future": True}
        if self.dialect == "sqlite":
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            if parsed.database not in (None, "", ":memory:"):
                kwargs.update(pool_size=pool_size, max_overflow=2 * pool_size)
        else:
            kwargs.update(pool_size=pool_size, max_overflow=2 * pool_size, pool_pre_ping=True)
        self.engine = create_engine(url, **kwargs)
        if self.dialect == "sqlite":
            _configure_sqlite(self.engine)
            self._statement_engine = self.engine
        else:
            # Autocommit: each statement is its own transaction, without BEGIN and ROLLBACK round
            # trips; no ping on checkout: read_statements retries once on a dead connection.
            self._statement_engine = create_engine(
                url,
                future=True,
                pool_size=pool_size,
                max_overflow=pool_size,
                isolation_level="AUTOCOMMIT",
            )
        # SQLite has one writer at a time; threads of this process that wait for it queue here,
        # in order, instead of in SQLite's busy handler, which retries after sleeps of up to
        # 100 ms (long tails when the publish path's staging and commits alternate).
        self._writer = threading.RLock() if self.dialect == "sqlite" else None
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._statements = sessionmaker(self._statement_engine, expire_on_commit=False)
        self._write = sessionmaker(
            self.engine.execution_options(**{_WRITE_OPTION: True}), expire_on_commit=False
        )
        self._write_relaxed = sessionmaker(
            self.engine.execution_options(**{_WRITE_OPTION: True, _RELAXED_OPTION: True}),
            expire_on_commit=False,
        )

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reads; closed (its transaction rolled back) at the end.

        Rows read stay usable after the block: closing detaches them without expiring them.
        """
        with self._read() as session:
            yield session

    def read_statements(self, read: Callable[[Session], T]) -> T:
        """``read(session)`` where each statement stands alone; for hot single-statement reads.

        On PostgreSQL the session's connection is in autocommit mode, so a statement costs one
        round trip (no ``BEGIN``, no ``ROLLBACK``, no ping when the connection leaves the pool),
        and each statement sees the data committed when it starts: statements of one call are
        not one snapshot.  A connection found dead (the server restarted) is discarded with
        the pool's older connections, and ``read`` runs once more on a new one, so ``read``
        must only read.  On SQLite it is :meth:`read`.

        Examples
        --------
        >>> from sqlalchemy import text
        >>> db = Database("sqlite://")
        >>> db.read_statements(lambda s: s.execute(text("SELECT 1")).scalar_one())
        1
        >>> db.dispose()
        """
        try:
            with self._statements() as session:
                return read(session)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
        with self._statements() as session:
            return read(session)

    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[Session]:
        """A write transaction: committed when the block ends normally, rolled back on error.

        Parameters
        ----------
        durable : bool, default=True
            False commits without waiting for the log to reach the disk (SQLite
            ``synchronous=NORMAL`` in WAL mode, PostgreSQL ``synchronous_commit = off``), for
            rows that only matter once a later durable transaction refers to them: both
            databases write one sequential log, so a durable commit makes every commit before
            it durable too.  A crash may lose such a transaction, never reorder it.
        """
        with self._one_writer():
            if durable:
                with self._write() as session, session.begin():
                    yield session
                return
            with self._write_relaxed() as session, session.begin():
                if self.dialect == "postgresql":
                    session.execute(text("SET LOCAL synchronous_commit TO OFF"))
                yield session

    def _one_writer(self) -> Any:
        """On SQLite, this process's turn to write (a context manager; nothing on PostgreSQL).

        Raises
        ------
        ServiceBusyError
            Another write of this process held the database for 30 s.
        """
        if self._writer is None:
            return nullcontext()
        if not self._writer.acquire(timeout=_SQLITE_WRITE_WAIT):
            raise ServiceBusyError(
                "the registry database stayed busy for 30 s; nothing was changed, retry"
            )
        return _Release(self._writer)

    def check_search_path(self) -> None:
        """Refuse a PostgreSQL ``search_path`` whose first named schema does not exist.

        PostgreSQL creates tables in the first schema of the ``search_path`` that exists, so a
        URL naming a schema that was never created (``?options=-csearch_path%3Dnosuch``) would
        fail in the middle of the migrations, or put the tables in a later schema of the path.
        This reads the path on one connection and writes nothing.  SQLite has no schemas: nothing
        to check.

        Raises
        ------
        MissingDatabaseSchemaError
            A schema named in the ``search_path`` (``"$user"`` aside) does not exist and no
            schema before it does; the message gives the ``CREATE SCHEMA`` statement to run.
        sqlalchemy.exc.OperationalError
            The server cannot be reached.

        Examples
        --------
        >>> db = Database("sqlite://")
        >>> db.check_search_path()
        >>> db.dispose()
        """
        if self.dialect != "postgresql":
            return
        with self.engine.connect() as conn:
            path = str(conn.exec_driver_sql("SHOW search_path").scalar_one())
            user = str(conn.exec_driver_sql("SELECT current_user").scalar_one())
            names = [user if entry == "$user" else entry for entry in _search_path(path)]
            found = set(
                conn.execute(
                    text("SELECT nspname FROM pg_namespace WHERE nspname = ANY(:names)"),
                    {"names": names},
                ).scalars()
            )
            conn.rollback()
        for entry, name in zip(_search_path(path), names, strict=True):
            if name in found:
                return
            if entry != "$user":
                url = self.engine.url.render_as_string(hide_password=True)
                quoted = self.engine.dialect.identifier_preparer.quote(name)
                raise MissingDatabaseSchemaError(
                    f"the PostgreSQL schema {name!r} of the search_path of {url} does not exist: "
                    f"create it with `CREATE SCHEMA {quoted};`, then migrate it with "
                    f"`pubsubml registry migrate --db {url}`"
                )

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
        if self._statement_engine is not self.engine:
            self._statement_engine.dispose()


class _Release:
    """Releases an acquired lock when its block ends."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _search_path(setting: str) -> list[str]:
    """The schema names of a ``SHOW search_path`` answer, in order (quotes removed; unquoted
    names folded to lower case, as PostgreSQL folds them).

    Examples
    --------
    >>> _search_path('"$user", public, "My Schema", Other')
    ['$user', 'public', 'My Schema', 'other']
    """
    names: list[str] = []
    rest = setting.strip()
    while rest:
        if rest.startswith('"'):
            end = 1
            while True:
                end = rest.find('"', end)
                if end < 0 or rest[end : end + 2] != '""':
                    break
                end += 2
            end = len(rest) if end < 0 else end
            names.append(rest[1:end].replace('""', '"'))
            rest = rest[end + 1 :]
        else:
            head, _, _ = rest.partition(",")
            names.append(head.strip().lower())
            rest = rest[len(head) :]
        rest = rest.strip().removeprefix(",").strip()
    return [n for n in names if n]


_LOCK_FEED_CLOCK = select(FeedClockRow.position).where(FeedClockRow.id == 1).with_for_update()
_STORE_FEED_CLOCK = (
    update(FeedClockRow).where(FeedClockRow.id == 1).values(position=bindparam("new_position"))
)


def lock_feed_clock(session: Session) -> int:
    """Take the feed lock of the current write transaction and return the clock's position (the
    last feed position handed out).

    The lock is held until commit, so feed positions taken from the clock are committed in
    increasing order and a reader that has seen position ``n`` never later finds a new row at a
    position ≤ ``n``.  On SQLite the ``BEGIN IMMEDIATE`` write lock already serializes writers
    (``FOR UPDATE`` is not rendered there).  One Core statement, no ORM object: the clock is
    read and stored (:func:`store_feed_clock`) once per write transaction of the feed.
    """
    position = session.connection().execute(_LOCK_FEED_CLOCK).scalar_one_or_none()
    if position is None:  # pragma: no cover - the initial migration inserts it
        raise RuntimeError("feed_clock row is missing: the database was not migrated")
    return int(position)


def store_feed_clock(session: Session, position: int) -> None:
    """Set the clock to ``position`` in a transaction that holds the feed lock
    (:func:`lock_feed_clock`)."""
    session.connection().execute(_STORE_FEED_CLOCK, {"new_position": position})
