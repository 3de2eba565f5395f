"""Cross-replica wake-ups over PostgreSQL ``LISTEN``/``NOTIFY`` (no extra service).

Several registry replicas can serve one PostgreSQL database.  A reader long-polling a feed on
replica B waits on B's :class:`~pubsubml.registry.infrastructure.feed_notifier.FeedNotifier`, which
only B's own commits set; without help B would learn of a publish committed by replica A at its next
re-read, ``feed_poll_interval`` seconds later.  Here every feed transaction sends ``NOTIFY`` on
:data:`FEED_CHANNEL` before it commits (:func:`notify_commit`; PostgreSQL delivers it at commit and
drops it on rollback), and every replica runs a :class:`PostgresWakeups` thread that ``LISTEN`` s on
one dedicated connection and sets its notifier on each notification, so the readers waiting on any
replica re-read within milliseconds of the commit.

The payload is the committing connection's schema and the feed position (``schema:position``):
registries that share one database in different schemas (``search_path``) share the channel, and
each listener ignores the other schemas' commits.  The position is only a hint: readers always
re-read the database, so a lost or duplicated notification changes nothing but latency; the
periodic re-read stays as the fallback (after a reconnection the listener wakes every reader
once, since notifications sent while it was away are lost).

References
----------
PostgreSQL documentation, ``NOTIFY`` ("notifications are delivered between transactions ... if
the transaction is aborted, the notification is not sent") and ``LISTEN``; psycopg 3,
``Connection.notifies``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

__all__ = ["FEED_CHANNEL", "PostgresWakeups", "notify_commit", "postgres_conninfo"]

FEED_CHANNEL = "pubsubml_feed"
"""The notification channel of feed commits."""

_log = logging.getLogger(__name__)
_NOTIFY = text("SELECT pg_notify(:channel, current_schema() || ':' || :position)")


def notify_commit(session: Session, position: int) -> None:
    """Queue a feed notification in ``session``'s transaction (PostgreSQL only; a no-op else).

    Delivered to every listening replica when the transaction commits, never if it rolls back.
    """
    if session.get_bind().dialect.name != "postgresql":
        return
    session.connection().execute(_NOTIFY, {"channel": FEED_CHANNEL, "position": str(int(position))})


def postgres_conninfo(database_url: str) -> str:
    """A libpq connection string for psycopg from an SQLAlchemy PostgreSQL URL.

    Raises
    ------
    ValueError
        Not a PostgreSQL URL.
    """
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        raise ValueError(f"not a PostgreSQL database URL: {url.render_as_string()}")
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresWakeups:
    """A thread that ``LISTEN`` s on :data:`FEED_CHANNEL` and calls ``wake`` per notification.

    Parameters
    ----------
    database_url : str
        The registry's SQLAlchemy URL (``postgresql+psycopg://...``).
    wake : callable
        Called with no argument from the listener thread (thread-safe callers only, e.g.
        :meth:`FeedNotifier.notify`).
    reconnect_seconds : float, default=1.0
        Pause before reconnecting after the connection failed.
    check_seconds : float, default=0.5
        How often the thread looks at its stop flag while no notification arrives.
    """

    def __init__(
        self,
        database_url: str,
        wake: Callable[[], None],
        *,
        reconnect_seconds: float = 1.0,
        check_seconds: float = 0.5,
    ) -> None:
        self._conninfo = postgres_conninfo(database_url)
        self._wake = wake
        self._reconnect = reconnect_seconds
        self._check = check_seconds
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def listening(self) -> bool:
        """Whether the thread holds a connection that listens now."""
        return self._listening.is_set()

    def start(self, *, wait: float = 5.0) -> None:
        """Start the listener thread; wait up to ``wait`` seconds until it listens."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="pubsubml-wakeups", daemon=True)
        self._thread.start()
        self._listening.wait(wait)

    def stop(self) -> None:
        """Stop the thread and close its connection."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._check + 5.0)
            self._thread = None

    def _run(self) -> None:
        import psycopg

        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    row = conn.execute("SELECT current_schema()").fetchone()
                    prefix = f"{row[0] if row else ''}:"
                    conn.execute(f"LISTEN {FEED_CHANNEL}")
                    self._listening.set()
                    if not first:
                        self._wake()  # notifications sent while disconnected are lost
                    first = False
                    self._listen(conn, prefix)
            except Exception as exc:  # a dropped connection: log, wait, reconnect
                _log.warning("feed wake-ups: %s; reconnecting", exc)
            self._listening.clear()
            self._stop.wait(self._reconnect)

    def _listen(self, conn: Any, prefix: str) -> None:
        while not self._stop.is_set():
            for note in conn.notifies(timeout=self._check):
                if note.payload.startswith(prefix):
                    self._wake()
                if self._stop.is_set():
                    return
