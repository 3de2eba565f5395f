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
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.jetstream import (
    STREAM_MAX_AGE_SECONDS,
    ensure_stream,
    jetstream_available,
)
from pubsubml.registry.infrastructure.nats_subjects import feed_subject, stream_name
from pubsubml.registry.infrastructure.nats_wakeups import ORIGIN_HEADER, NatsWakeups
from pubsubml.registry.migrate import upgrade
from pubsubml.registry.settings import RegistrySettings
from registry.conftest import (
    ArtifactFactory,
    free_port,
    make_settings,
    publish_wakes_poll,
    thread_server,
)
from registry.infrastructure.conftest import (
    NATS_URL,
    TRANSPORTS,
    delete_stream,
    needs_jetstream,
    needs_nats,
    replica_pair,
    with_jetstream,
    woken_again,
)


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
        async with replica_pair(subject, jetstream=True) as (a, _, woken):
            a.broadcast()
            await asyncio.wait_for(woken.wait(), 10)

        async def read(js: Any) -> tuple[Any, Any]:
            info = await js.stream_info(stream_name(subject))
            return info, await js.get_last_msg(stream_name(subject), subject)

        return await with_jetstream(read)

    info, last = asyncio.run(run())
    assert info.config.subjects == [subject]
    assert info.config.storage == "memory"
    assert info.config.max_age == STREAM_MAX_AGE_SECONDS
    assert info.state.messages == 1
    assert not last.data and ORIGIN_HEADER in (last.headers or {})


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
        async with replica_pair(subject, url, jetstream=True, reconnect_seconds=0.2) as (
            a,
            b,
            woken,
        ):
            a.broadcast()
            await asyncio.wait_for(woken.wait(), 10)
            nonlocal server
            await asyncio.to_thread(_stop_server, server)
            server = await asyncio.to_thread(_start_server, port, "-js", "-sd", str(tmp_path / "2"))
            deadline = time.monotonic() + 20
            while not (a.connected and b.connected) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # the wake-up each reconnection gives has come and gone
            return await woken_again(a, woken, seconds=20)

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
        async with replica_pair(subject, jetstream=True, **fast) as (a, _, woken):
            await with_jetstream(lambda js: js.delete_stream(stream_name(subject)))
            return await woken_again(a, woken, seconds=10)  # the first publish finds no stream

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
            delete_stream(stream_name(feed_subject(url)))
    assert [item["model_id"] for item in page["items"]] == [model_id]
    assert waited < 20.0  # woken by the commit on A, not by a re-read after 30 s
