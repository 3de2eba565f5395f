"""Waking the feed readers that wait in this process when a feed transaction commits."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from pubsubml.registry.infrastructure.loop_calls import call_on_loop

__all__ = ["FeedNotifier"]


class FeedNotifier:
    """Wakes readers waiting in this process when a feed transaction commits.

    Readers take a :meth:`ticket` *before* reading the database and wait on it; a commit that
    happens after the ticket was taken sets it, so no wake-up falls between the read and the wait.
    Commits by other processes (other replicas) set it too on PostgreSQL, through
    :class:`~pubsubml.registry.infrastructure.postgres_wakeups.PostgresWakeups`, and on any database
    through :class:`~pubsubml.registry.infrastructure.nats_wakeups.NatsWakeups`; readers also
    re-read every ``feed_poll_interval`` seconds, the fallback when no notification arrives.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._broadcast: Callable[[], None] | None = None

    def set_broadcast(self, broadcast: Callable[[], None] | None) -> None:
        """Also call ``broadcast`` on each :meth:`notify` (tell other replicas, e.g. over NATS)."""
        self._broadcast = broadcast

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Attach to the server's event loop (at start-up)."""
        with self._lock:
            self._loop = loop
            self._event = asyncio.Event()

    def ticket(self) -> asyncio.Event | None:
        """The event the next commit will set (``None`` before :meth:`bind`)."""
        with self._lock:
            return self._event

    def _rotate(self) -> None:
        with self._lock:
            old, self._event = self._event, asyncio.Event()
        if old is not None:
            old.set()

    def notify(self) -> None:
        """A feed transaction of this process committed: wake every reader here and tell the
        other replicas when a broadcast is set (thread-safe; call after the commit)."""
        self.wake()
        broadcast = self._broadcast
        if broadcast is not None:
            broadcast()

    def wake(self) -> None:
        """Wake every waiting reader of this process (thread-safe; for another replica's commit)."""
        with self._lock:
            loop = self._loop
        call_on_loop(loop, self._rotate)

    async def wait(self, ticket: asyncio.Event | None, timeout: float) -> None:
        """Wait until ``ticket`` is set or ``timeout`` seconds pass."""
        if timeout <= 0:
            return
        if ticket is None:
            await asyncio.sleep(timeout)
            return
        try:
            await asyncio.wait_for(ticket.wait(), timeout)
        except TimeoutError:
            return
