"""Cross-replica wake-ups over NATS, for deployments that already run a NATS server.

The same job as :class:`~pubsubml.registry.infrastructure.postgres_wakeups.PostgresWakeups` (a long
poll or a stream on replica B re-reads as soon as replica A commits to a feed) through a NATS
subject instead of PostgreSQL ``LISTEN``/``NOTIFY``, so it also serves replicas or worker processes
that share one SQLite file, which have no notification channel of their own.  After each feed commit
a replica publishes an empty message on
:func:`~pubsubml.registry.infrastructure.nats_subjects.feed_subject` (its database, without
password); every replica subscribes to it and wakes its waiting readers.  A wake-up is only a hint:
readers always re-read the database, and the periodic re-read (``feed_poll_interval``) covers a lost
message.  The connection is made in the background and re-made after a loss (every reader is woken
once then); the registry serves meanwhile.

Two transports:

* core NATS subjects (the default): nothing is stored, any NATS server will do, and a replica
  does not receive its own messages (``no_echo``);
* JetStream (``jetstream=True``), for deployments whose NATS servers run it: each wake-up is
  stored in a stream (:func:`~pubsubml.registry.infrastructure.jetstream.ensure_stream`: the one
  that already captures the subject, or a new in-memory stream that keeps the last hour, at most
  100,000 messages) and the server acknowledges it, so a wake-up that the server did not take is
  logged rather than silently lost; every replica reads the stream through an ordered consumer from
  the messages published after it subscribed.  The stream also records the registry's feed commits
  for other services to read.  A replica skips its own messages by the :data:`ORIGIN_HEADER` it
  stamps on them. A stream lost with a restarted server, or deleted, is made again and read anew
  (after a reconnection, a publish that no stream took, or a periodic check of the stream's creation
  time).

Needs the optional dependency ``nats-py`` (``pip install 'pubsubml[nats]'``).

References
----------
NATS documentation, "Automatic Reconnections", "JetStream" (streams, limits, ordered
consumers) and the nats.py client (``nats.connect``, ``no_echo``, ``reconnected_cb``,
``JetStreamContext.add_stream``, ``publish``, ``subscribe(ordered_consumer=True)``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from pubsubml.registry.infrastructure.jetstream import ensure_stream, is_no_stream_error
from pubsubml.registry.infrastructure.loop_calls import call_on_loop
from pubsubml.registry.infrastructure.nats_subjects import check_nats_url

__all__ = ["ORIGIN_HEADER", "NatsWakeups"]

_log = logging.getLogger(__name__)

ORIGIN_HEADER = "Pubsubml-Origin"
"""Header naming the process that published a JetStream wake-up (a random id per process)."""

_MAX_RETRY_PAUSE_SECONDS = 30.0  # the pause between attempts doubles up to this


class NatsWakeups:
    """Publish a wake-up after each local feed commit; wake local readers on the others'.

    Parameters
    ----------
    url : str
        The NATS server (``nats://host:4222``).
    subject : str
        :func:`~pubsubml.registry.infrastructure.nats_subjects.feed_subject` of the registry's
        database.
    wake : callable
        Wakes this process's readers (thread-safe, e.g. :meth:`FeedNotifier.wake`).
    jetstream : bool, default=False
        Publish and read the wake-ups through a JetStream stream
        (:func:`~pubsubml.registry.infrastructure.jetstream.ensure_stream`) instead of a core NATS
        subject.
    reconnect_seconds : float, default=1.0
        Pause between attempts to reconnect a lost connection, and the first pause between
        attempts to make the first one (doubling on each failure up to 30 s).
    check_seconds : float, default=5.0
        With JetStream, how often the stream is checked to be the one read: a stream deleted or
        made again since (by an operator, or by another replica after a restart of the server)
        is found, or made, and read anew.

    Attributes
    ----------
    stream : str or None
        The JetStream stream in use (``None`` before the connection or without JetStream).
    """

    def __init__(
        self,
        url: str,
        subject: str,
        wake: Callable[[], None],
        *,
        jetstream: bool = False,
        reconnect_seconds: float = 1.0,
        check_seconds: float = 5.0,
    ) -> None:
        self._url = check_nats_url(url)
        self._subject = subject
        self._wake = wake
        self._jetstream = jetstream
        self._origin = uuid.uuid4().hex
        self._js: Any = None
        self._reader: Any = None
        self._read_since: Any = None  # the creation time of the stream read
        self._check = check_seconds
        self._watching: asyncio.Task[None] | None = None
        self._renewing: asyncio.Future[None] | None = None
        self.stream: str | None = None
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
            _log.warning(
                "feed wake-ups: NATS at %s not usable yet; trying in the background", self._url
            )

    async def _connect_until_up(self) -> None:
        import nats

        async def reconnected() -> None:
            _log.info("feed wake-ups: reconnected to NATS")
            if self._jetstream:  # a restarted server may have lost an in-memory stream
                self._renew_stream_reader()
            self._wake()  # core NATS lost what was sent meanwhile; a stream may not cover it all

        async def disconnected() -> None:
            _log.warning("feed wake-ups: disconnected from NATS; reconnecting")

        async def error(exc: Exception) -> None:
            _log.debug("feed wake-ups: NATS error %s", exc)

        async def on_message(_msg: Any) -> None:
            self._wake()

        pause = self._reconnect
        while True:
            client = None
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
                if self._jetstream:
                    await self._read_stream(client)
                else:
                    await client.subscribe(self._subject, cb=on_message)
                await client.flush()
            except Exception as exc:  # no server (or no JetStream) yet: log, wait, try again
                _log.warning(
                    "feed wake-ups: cannot use NATS at %s (%s); next try in %.0f s",
                    self._url,
                    exc,
                    pause,
                )
                if client is not None:
                    await self._close_quietly(client)
                await asyncio.sleep(pause)
                pause = min(2 * pause, max(self._reconnect, _MAX_RETRY_PAUSE_SECONDS))
                continue
            self._client = client
            self._connected.set()
            if self._jetstream:
                self._watching = asyncio.create_task(self._watch_stream())
            return

    async def _on_stored(self, msg: Any) -> None:
        if (msg.headers or {}).get(ORIGIN_HEADER) != self._origin:
            self._wake()

    async def _read_stream(self, client: Any) -> None:
        """Find or create the stream and read it from now on through a new ordered consumer."""
        from nats.js.api import DeliverPolicy

        js = client.jetstream()
        stream = await ensure_stream(js, self._subject)
        created = (await js.stream_info(stream)).created
        reader = await js.subscribe(
            self._subject,
            stream=stream,
            cb=self._on_stored,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.NEW,
        )
        old, self._reader = self._reader, reader
        self._js, self.stream, self._read_since = js, stream, created
        if old is not None:
            try:
                await old.unsubscribe()
            except Exception as exc:  # its consumer went with the old stream
                _log.debug("feed wake-ups: dropping the old stream reader: %s", exc)

    async def _watch_stream(self) -> None:
        from nats.js.errors import NotFoundError

        while True:
            await asyncio.sleep(self._check)
            if self._js is None or not self.connected:
                continue  # a reconnection renews the reader itself
            try:
                same = (await self._js.stream_info(self.stream)).created == self._read_since
            except NotFoundError:
                same = False
            except Exception as exc:  # a slow or unreachable server: check again later
                _log.debug("feed wake-ups: cannot check the JetStream stream: %s", exc)
                continue
            if not same:
                _log.warning("feed wake-ups: the JetStream stream %s was removed", self.stream)
                self._renew_stream_reader()

    def _renew_stream_reader(self) -> None:
        """Make sure the stream exists and is read (after a reconnection, or a publish that no
        stream took), in the background and at most once at a time."""
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.ensure_future(self._renew_until_read())

    async def _renew_until_read(self) -> None:
        pause = self._reconnect
        while self._client is not None:
            try:
                await self._read_stream(self._client)
                _log.info("feed wake-ups: reading JetStream stream %s", self.stream)
                return
            except Exception as exc:  # JetStream not ready yet after a restart: try again
                _log.warning(
                    "feed wake-ups: cannot read the JetStream stream (%s); next try in %.0f s",
                    exc,
                    pause,
                )
            await asyncio.sleep(pause)
            pause = min(2 * pause, max(self._reconnect, _MAX_RETRY_PAUSE_SECONDS))

    @staticmethod
    async def _close_quietly(client: Any) -> None:
        try:
            await client.close()
        except Exception as exc:  # already gone: nothing left to release
            _log.debug("feed wake-ups: closing a failed NATS connection: %s", exc)

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
            if self._js is not None:  # stored and acknowledged by the server
                headers = {ORIGIN_HEADER: self._origin}
                await self._js.publish(
                    self._subject, b"", stream=self.stream, headers=headers, timeout=2
                )
            else:
                await self._client.publish(self._subject, b"")
        except Exception as exc:  # a hint lost: readers re-read at their interval
            _log.warning("feed wake-ups: could not publish to NATS (%s)", exc)
            if self._js is not None and is_no_stream_error(exc):
                self._renew_stream_reader()  # the stream was deleted: make it again

    async def stop(self) -> None:
        """Stop connecting, flush what was published and close the connection."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
        for task in (self._watching, self._renewing):
            if task is not None:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        self._watching = self._renewing = None
        client, self._client = self._client, None
        self._js = self._reader = None
        self._connected.clear()
        if client is not None:
            try:
                await client.flush(timeout=1)
            except Exception:  # unreachable: what is unsent is lost, a hint only
                pass
            await client.close()
