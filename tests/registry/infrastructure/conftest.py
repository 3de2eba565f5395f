"""Fixtures of the infrastructure tests: the NATS server at 127.0.0.1:4222 and replicas on it."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from pubsubml.registry.infrastructure.jetstream import jetstream_available
from pubsubml.registry.infrastructure.nats_subjects import feed_subject, stream_name
from pubsubml.registry.infrastructure.nats_wakeups import NatsWakeups

NATS_URL = "nats://127.0.0.1:4222"


def nats_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 4222), timeout=1):
            return True
    except OSError:
        return False


needs_nats = pytest.mark.skipif(
    not nats_up(), reason="no NATS server at 127.0.0.1:4222 (start nats-server to run this test)"
)


JETSTREAM_UP = nats_up() and asyncio.run(jetstream_available(NATS_URL))
needs_jetstream = pytest.mark.skipif(
    not JETSTREAM_UP,
    reason="the NATS server at 127.0.0.1:4222 does not run JetStream (start it with -js)",
)
TRANSPORTS = [
    pytest.param(False, id="core"),
    pytest.param(True, id="jetstream", marks=needs_jetstream),
]


async def with_jetstream(work: Any) -> Any:
    """``work(js)`` on a fresh connection to the test server's JetStream."""
    import nats

    client = await nats.connect(NATS_URL)
    try:
        return await work(client.jetstream())
    finally:
        await client.close()


def delete_stream(name: str) -> None:
    async def delete(js: Any) -> None:
        from nats.js.errors import NotFoundError

        try:
            await js.delete_stream(name)
        except NotFoundError:
            pass

    asyncio.run(with_jetstream(delete))


@asynccontextmanager
async def replica_pair(
    subject: str, url: str = NATS_URL, **options: Any
) -> AsyncIterator[tuple[NatsWakeups, NatsWakeups, asyncio.Event]]:
    """Replicas A and B started together on ``subject``; B sets the event when it is woken."""
    woken = asyncio.Event()
    a = NatsWakeups(url, subject, lambda: None, **options)
    b = NatsWakeups(url, subject, woken.set, **options)
    await asyncio.gather(a.start(), b.start())
    try:
        yield a, b, woken
    finally:
        await a.stop()  # flushes: what A published is stored before its connection closes
        await b.stop()


async def woken_again(a: NatsWakeups, woken: asyncio.Event, *, seconds: float) -> bool:
    """Whether a wake-up A broadcasts reaches B within ``seconds`` (A tries every second; the
    event is cleared first, as a reconnection also wakes B)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        woken.clear()
        a.broadcast()
        try:
            await asyncio.wait_for(woken.wait(), 1.0)
            return True
        except TimeoutError:
            pass
    return False


@pytest.fixture
def subject() -> Iterator[str]:
    """A subject of this test's own; its stream, if one was created, is deleted afterwards."""
    name = feed_subject(f"sqlite:///{time.monotonic_ns()}.db")
    yield name
    if JETSTREAM_UP:
        delete_stream(stream_name(name))
