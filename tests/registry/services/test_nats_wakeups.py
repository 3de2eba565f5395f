"""Cross-replica wake-ups over NATS (the server on 127.0.0.1:4222), through core subjects and
through a JetStream stream: a publish on one replica wakes a long poll on another that shares its
SQLite file; the subject is per database; a replica with no NATS server (or one without JetStream)
still serves, its readers re-reading at their interval; bad URLs and settings are refused."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from pubsubml.registry.database import Database
from pubsubml.registry.migrate import upgrade
from pubsubml.registry.services.nats_wakeups import (
    ORIGIN_HEADER,
    STREAM_MAX_AGE_SECONDS,
    NatsWakeups,
    check_nats_url,
    ensure_stream,
    feed_subject,
    jetstream_available,
    stream_name,
)
from pubsubml.registry.settings import RegistrySettings
from registry.conftest import (
    ArtifactFactory,
    free_port,
    make_settings,
    publish_wakes_poll,
    thread_server,
)

NATS_URL = "nats://127.0.0.1:4222"


def _nats_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 4222), timeout=1):
            return True
    except OSError:
        return False


needs_nats = pytest.mark.skipif(
    not _nats_up(), reason="no NATS server at 127.0.0.1:4222 (start nats-server to run this test)"
)


JETSTREAM_UP = _nats_up() and asyncio.run(jetstream_available(NATS_URL))
needs_jetstream = pytest.mark.skipif(
    not JETSTREAM_UP,
    reason="the NATS server at 127.0.0.1:4222 does not run JetStream (start it with -js)",
)
TRANSPORTS = [
    pytest.param(False, id="core"),
    pytest.param(True, id="jetstream", marks=needs_jetstream),
]


async def _with_jetstream(work: Any) -> Any:
    """``work(js)`` on a fresh connection to the test server's JetStream."""
    import nats

    client = await nats.connect(NATS_URL)
    try:
        return await work(client.jetstream())
    finally:
        await client.close()


def _delete_stream(name: str) -> None:
    async def delete(js: Any) -> None:
        from nats.js.errors import NotFoundError

        try:
            await js.delete_stream(name)
        except NotFoundError:
            pass

    asyncio.run(_with_jetstream(delete))


@asynccontextmanager
async def _pair(
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


async def _woken_again(a: NatsWakeups, woken: asyncio.Event, *, seconds: float) -> bool:
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
        _delete_stream(stream_name(name))


def test_subjects_name_the_database_without_its_password() -> None:
    a = feed_subject("postgresql+psycopg://u:one@127.0.0.1/test?options=-csearch_path%3Dx")
    assert a == feed_subject("postgresql+psycopg://u:two@127.0.0.1/test?options=-csearch_path%3Dx")
    assert a != feed_subject("postgresql+psycopg://u:one@127.0.0.1/test?options=-csearch_path%3Dy")
    assert a != feed_subject("sqlite:///registry.db")
    assert "one" not in a and a.startswith("pubsubml.feed.")


@pytest.mark.parametrize("url", ["http://127.0.0.1:4222", "127.0.0.1:4222", "nats://", "x"])
def test_urls_that_name_no_nats_server_are_refused(url: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="NATS server URL"):
        check_nats_url(url)
    with pytest.raises(ValidationError, match="NATS server URL"):
        make_settings("sqlite:///x.db", tmp_path, nats_url=url)
    assert make_settings("sqlite:///x.db", tmp_path, nats_url="").nats_url is None


def test_jetstream_needs_a_nats_url(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="nats_jetstream needs a NATS server"):
        make_settings("sqlite:///x.db", tmp_path, nats_jetstream=True)
    env = {
        "PUBSUBML_REGISTRY_DATA": str(tmp_path),
        "PUBSUBML_REGISTRY_DEV": "1",
        "PUBSUBML_NATS_URL": NATS_URL,
        "PUBSUBML_NATS_JETSTREAM": "true",
    }
    assert RegistrySettings.from_env(env).nats_jetstream
    assert not RegistrySettings.from_env({**env, "PUBSUBML_NATS_JETSTREAM": "false"}).nats_jetstream


@needs_nats
@pytest.mark.parametrize("jetstream", TRANSPORTS)
def test_a_replica_is_woken_by_another_but_not_by_itself(subject: str, jetstream: bool) -> None:
    async def run() -> tuple[int, int]:
        woken = {"a": 0, "b": 0}
        b_woke = asyncio.Event()

        def wake_b() -> None:
            woken["b"] += 1
            b_woke.set()

        a = NatsWakeups(
            NATS_URL, subject, lambda: woken.__setitem__("a", woken["a"] + 1), jetstream=jetstream
        )
        b = NatsWakeups(NATS_URL, subject, wake_b, jetstream=jetstream)
        await asyncio.gather(a.start(), b.start())  # racing to create the stream
        try:
            assert a.connected and b.connected
            assert a.stream == b.stream == (stream_name(subject) if jetstream else None)
            await asyncio.to_thread(a.broadcast)  # from a worker thread, as a sync route does
            await asyncio.wait_for(b_woke.wait(), 10)
            await asyncio.sleep(0.3)  # time for an echo to A, which must not come
        finally:
            await a.stop()
            await b.stop()
        return woken["a"], woken["b"]

    assert asyncio.run(run()) == (0, 1)


def test_a_replica_without_a_nats_server_still_serves(tmp_path: Path) -> None:
    """Nothing listens on the port: start-up waits briefly, then the registry serves and its
    readers re-read at their interval."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    db = Database(url)
    upgrade(db)
    db.dispose()
    settings = make_settings(url, tmp_path / "store", nats_url=f"nats://127.0.0.1:{free_port()}")
    with thread_server(settings) as base:
        assert httpx.get(f"{base}/v1/health").status_code == 200


@needs_jetstream
def test_a_new_stream_keeps_the_wake_ups_in_memory_for_an_hour(subject: str) -> None:
    async def run() -> tuple[Any, Any]:
        async with _pair(subject, jetstream=True) as (a, _, woken):
            a.broadcast()
            await asyncio.wait_for(woken.wait(), 10)

        async def read(js: Any) -> tuple[Any, Any]:
            info = await js.stream_info(stream_name(subject))
            return info, await js.get_last_msg(stream_name(subject), subject)

        return await _with_jetstream(read)

    info, last = asyncio.run(run())
    assert info.config.subjects == [subject]
    assert info.config.storage == "memory"
    assert info.config.max_age == STREAM_MAX_AGE_SECONDS
    assert info.state.messages == 1
    assert not last.data and ORIGIN_HEADER in (last.headers or {})


@needs_jetstream
def test_a_stream_that_already_captures_the_subject_is_used_as_it_is(subject: str) -> None:
    """An operator's stream (file storage, its own name) is neither replaced nor duplicated."""
    operator = f"OPERATOR_{time.monotonic_ns()}"

    async def run() -> tuple[str | None, str, int]:
        await _with_jetstream(lambda js: js.add_stream(name=operator, subjects=[subject]))
        async with _pair(subject, jetstream=True) as (a, _, woken):
            a.broadcast()
            await asyncio.wait_for(woken.wait(), 10)
            found = await _with_jetstream(lambda js: ensure_stream(js, subject))
        info = await _with_jetstream(lambda js: js.stream_info(operator))
        return a.stream, found, info.state.messages

    try:
        stream, found, messages = asyncio.run(run())
    finally:
        _delete_stream(operator)
    assert stream == found == operator
    assert messages == 1


needs_nats_server = pytest.mark.skipif(
    shutil.which("nats-server") is None, reason="no nats-server binary to start a private server"
)


def _start_server(port: int, *args: str) -> subprocess.Popen[bytes]:
    """A private ``nats-server`` on ``port`` (with ``args``), once it accepts connections."""
    server = subprocess.Popen(
        ["nats-server", "-a", "127.0.0.1", "-p", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise RuntimeError("nats-server did not start") from None
            time.sleep(0.05)


def _stop_server(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    server.wait(10)


@needs_nats_server
def test_a_restarted_server_that_lost_the_stream_gets_it_back(subject: str, tmp_path: Path) -> None:
    """An in-memory stream does not survive a server restart: after reconnecting, the replicas
    create it again and read it with a new consumer, so wake-ups flow as before."""
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    server = _start_server(port, "-js", "-sd", str(tmp_path / "first"))

    async def run() -> bool:
        async with _pair(subject, url, jetstream=True, reconnect_seconds=0.2) as (a, b, woken):
            a.broadcast()
            await asyncio.wait_for(woken.wait(), 10)
            nonlocal server
            await asyncio.to_thread(_stop_server, server)
            server = await asyncio.to_thread(_start_server, port, "-js", "-sd", str(tmp_path / "2"))
            deadline = time.monotonic() + 20
            while not (a.connected and b.connected) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # the wake-up each reconnection gives has come and gone
            return await _woken_again(a, woken, seconds=20)

    try:
        assert asyncio.run(run())
    finally:
        _stop_server(server)


@needs_jetstream
def test_a_deleted_stream_is_made_again_and_read_anew(subject: str) -> None:
    """The publishing replica makes the stream again when a publish finds none; the reading one
    sees at its next check that the stream it read is gone and reads the new one."""

    async def run() -> bool:
        fast = {"reconnect_seconds": 0.2, "check_seconds": 0.3}
        async with _pair(subject, jetstream=True, **fast) as (a, _, woken):
            await _with_jetstream(lambda js: js.delete_stream(stream_name(subject)))
            return await _woken_again(a, woken, seconds=10)  # the first publish finds no stream

    assert asyncio.run(run())


@needs_nats_server
def test_a_server_without_jetstream_is_named_and_the_replica_still_starts(subject: str) -> None:
    port = free_port()
    server = _start_server(port)
    url = f"nats://127.0.0.1:{port}"

    async def run() -> tuple[str, bool]:
        import nats

        client = await nats.connect(url, max_reconnect_attempts=0)
        try:
            with pytest.raises(RuntimeError, match="does not run JetStream") as refused:
                await ensure_stream(client.jetstream(), subject)
        finally:
            await client.close()
        wakeups = NatsWakeups(url, subject, lambda: None, jetstream=True, reconnect_seconds=0.2)
        await wakeups.start(wait=1.0)  # returns: start-up does not wait for JetStream
        connected = wakeups.connected
        await wakeups.stop()
        return str(refused.value), connected

    try:
        message, connected = asyncio.run(run())
        without = asyncio.run(jetstream_available(url))
    finally:
        _stop_server(server)
    assert "-js" in message
    assert not connected
    assert not without


def test_jetstream_availability_is_probed_and_bad_urls_are_refused() -> None:
    assert asyncio.run(jetstream_available(f"nats://127.0.0.1:{free_port()}", timeout=1)) is False
    if JETSTREAM_UP:
        assert asyncio.run(jetstream_available(NATS_URL)) is True
    with pytest.raises(ValueError, match="NATS server URL"):
        asyncio.run(jetstream_available("http://127.0.0.1:4222"))


@needs_nats
@pytest.mark.parametrize("jetstream", TRANSPORTS)
def test_a_publish_on_one_replica_wakes_a_long_poll_on_the_other(
    tmp_path: Path, artifacts: ArtifactFactory, jetstream: bool
) -> None:
    """Two replicas of one SQLite registry, which has no notification channel of its own, both
    re-reading only every 30 s: the poll on B returns early only if A's message woke it."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    db = Database(url)
    upgrade(db)
    db.dispose()
    changes: dict[str, Any] = {
        "feed_poll_interval": 30.0,
        "long_poll_max_seconds": 60.0,
        "nats_url": NATS_URL,
        "nats_jetstream": jetstream,
    }
    settings = make_settings(url, tmp_path / "store", **changes)
    try:
        with thread_server(settings) as url_a, thread_server(settings) as url_b:
            page, waited, model_id = publish_wakes_poll(url_a, url_b, artifacts, seed=12)
    finally:
        if jetstream:
            _delete_stream(stream_name(feed_subject(url)))
    assert [item["model_id"] for item in page["items"]] == [model_id]
    assert waited < 20.0  # woken by the commit on A, not by a re-read after 30 s
