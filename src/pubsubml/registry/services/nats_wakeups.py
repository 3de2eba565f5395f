"""Cross-replica wake-ups over NATS, for deployments that already run a NATS server.

The same job as :class:`~pubsubml.registry.services.wakeups.PostgresWakeups` (a long poll or a
stream on replica B re-reads as soon as replica A commits to a feed) through a NATS subject
instead of PostgreSQL ``LISTEN``/``NOTIFY``, so it also serves replicas or worker processes that
share one SQLite file, which have no notification channel of their own.  After each feed commit a
replica publishes an empty message on :func:`feed_subject` (its database, without password);
every replica subscribes to it and wakes its waiting readers.  Messages are plain core-NATS
subjects, not JetStream streams: a wake-up is only a hint — readers always re-read the database,
and the periodic re-read (``feed_poll_interval``) covers a lost message — so nothing needs
storing, and any NATS server (JetStream enabled or not) will do.  A replica does not receive its
own messages (``no_echo``): its readers are woken locally.  The connection is made in the
background and re-made after a loss (every reader is woken once then, as messages sent while
away are lost); the registry serves meanwhile.

Needs the optional dependency ``nats-py`` (``pip install 'pubsubml[nats]'``).

References
----------
NATS documentation, "Automatic Reconnections" and the nats.py client (``nats.connect``,
``no_echo``, ``reconnected_cb``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.engine import make_url

from pubsubml.registry.services.loop_calls import call_on_loop

__all__ = ["NatsWakeups", "check_nats_url", "feed_subject"]

_log = logging.getLogger(__name__)


def feed_subject(database_url: str) -> str:
    """The NATS subject of one registry's feed commits: a digest of its database URL.

    Replicas of one registry name the same database (the password is left out, so replicas
    that hold it differently still agree); registries on other databases or schemas get other
    subjects.

    Examples
    --------
    >>> feed_subject("sqlite:///data/registry.db")[:14]
    'pubsubml.feed.'
    >>> feed_subject("postgresql+psycopg://u:a@h/db") == feed_subject("postgresql+psycopg://u:b@h/db")
    True
    """
    rendered = make_url(database_url).render_as_string(hide_password=True)
    return "pubsubml.feed." + hashlib.sha256(rendered.encode()).hexdigest()[:32]


def check_nats_url(url: str) -> str:
    """``url`` if it names a NATS server (``nats://``, ``tls://``, ``ws://`` or ``wss://``).

    Raises
    ------
    ValueError
        Another scheme or no host.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("nats", "tls", "ws", "wss") or not parts.hostname:
        raise ValueError(f"a NATS server URL looks like nats://127.0.0.1:4222, got {url!r}")
    return url


class NatsWakeups:
    """Publish a wake-up after each local feed commit; wake local readers on the others'.

    Parameters
    ----------
    url : str
        The NATS server (``nats://host:4222``).
    subject : str
        :func:`feed_subject` of the registry's database.
    wake : callable
        Wakes this process's readers (thread-safe, e.g. :meth:`FeedNotifier.wake`).
    reconnect_seconds : float, default=1.0
        Pause between connection attempts.
    """

    def __init__(
        self,
        url: str,
        subject: str,
        wake: Callable[[], None],
        *,
        reconnect_seconds: float = 1.0,
    ) -> None:
        self._url = check_nats_url(url)
        self._subject = subject
        self._wake = wake
        self._reconnect = reconnect_seconds
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._sending: set[asyncio.Task[None]] = set()

    @property
    def connected(self) -> bool:
        """Whether a subscribed connection is up now."""
        client = self._client
        return client is not None and bool(client.is_connected) and self._connected.is_set()

    async def start(self, *, wait: float = 2.0) -> None:
        """Connect in the background on the running loop; wait up to ``wait`` s for it.

        Raises
        ------
        ImportError
            ``nats-py`` is not installed.
        """
        try:
            import nats  # noqa: F401  # checked here: the server would otherwise start without
        except ImportError as exc:
            raise ImportError(
                "a NATS URL is set for feed wake-ups but nats-py is not installed: "
                "pip install 'pubsubml[nats]'"
            ) from exc
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._connect_until_up(), name="pubsubml-nats-wakeups")
        try:
            await asyncio.wait_for(self._connected.wait(), wait)
        except TimeoutError:
            _log.warning("feed wake-ups: no NATS server at %s yet; retrying", self._url)

    async def _connect_until_up(self) -> None:
        import nats

        async def reconnected() -> None:
            _log.info("feed wake-ups: reconnected to NATS")
            self._wake()  # messages sent while disconnected are lost

        async def disconnected() -> None:
            _log.warning("feed wake-ups: disconnected from NATS; reconnecting")

        async def error(exc: Exception) -> None:
            _log.debug("feed wake-ups: NATS error %s", exc)

        async def on_message(_msg: Any) -> None:
            self._wake()

        while True:
            try:
                client = await nats.connect(
                    self._url,
                    name="pubsubml-registry",
                    no_echo=True,
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=self._reconnect,
                    connect_timeout=2,
                    reconnected_cb=reconnected,
                    disconnected_cb=disconnected,
                    error_cb=error,
                )
                await client.subscribe(self._subject, cb=on_message)
                await client.flush()
            except Exception as exc:  # no server yet: log, wait, try again
                _log.warning("feed wake-ups: cannot reach NATS at %s (%s)", self._url, exc)
                await asyncio.sleep(self._reconnect)
                continue
            self._client = client
            self._connected.set()
            return

    def broadcast(self) -> None:
        """Tell the other replicas that a feed committed (thread-safe; after the commit)."""
        call_on_loop(self._loop, self._publish)

    def _publish(self) -> None:
        if self.connected:
            task = asyncio.ensure_future(self._send())
            self._sending.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self._sending.discard)

    async def _send(self) -> None:
        try:
            await self._client.publish(self._subject, b"")
        except Exception as exc:  # a hint lost: readers re-read at their interval
            _log.warning("feed wake-ups: could not publish to NATS (%s)", exc)

    async def stop(self) -> None:
        """Stop connecting, flush what was published and close the connection."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
        client, self._client = self._client, None
        self._connected.clear()
        if client is not None:
            try:
                await client.flush(timeout=1)
            except Exception:  # unreachable: what is unsent is lost, a hint only
                pass
            await client.close()
