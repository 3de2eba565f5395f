"""Engines, sessions and the feed-writing transaction for SQLite and PostgreSQL.

SQLite runs in WAL mode (readers never block the writer) and every write transaction starts with
``BEGIN IMMEDIATE``, so it holds the database's single write lock from its first statement: write
transactions are serialized and commit in the order they started.  On PostgreSQL a write
transaction that touches the feed locks the single ``feed_clock`` row (``SELECT … FOR UPDATE``) before
it reads anything it depends on, which gives the same order (:func:`lock_feed_clock`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Engine, bindparam, create_engine, event, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from pubsubml.registry.tables import FeedClockRow

__all__ = ["Database", "lock_feed_clock", "store_feed_clock"]

_WRITE_OPTION = "pubsubml_write"
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
        write = conn.get_execution_options().get(_WRITE_OPTION, False)
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
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._statements = sessionmaker(self._statement_engine, expire_on_commit=False)
        self._write = sessionmaker(
            self.engine.execution_options(**{_WRITE_OPTION: True}), expire_on_commit=False
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
    def write(self) -> Iterator[Session]:
        """A write transaction: committed when the block ends normally, rolled back on error."""
        with self._write() as session, session.begin():
            yield session

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
        if self._statement_engine is not self.engine:
            self._statement_engine.dispose()


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
