"""Cross-replica wake-ups over NATS (the server on 127.0.0.1:4222): a publish on one replica wakes
a long poll on another that shares its SQLite file; the subject is per database; a replica with no
NATS server still serves (its readers re-read at their interval); bad URLs are refused."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from pubsubml.registry.database import Database
from pubsubml.registry.migrate import upgrade
from pubsubml.registry.services.nats_wakeups import NatsWakeups, check_nats_url, feed_subject
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


@needs_nats
def test_a_replica_is_woken_by_another_but_not_by_itself() -> None:
    async def run() -> tuple[int, int]:
        subject = feed_subject(f"sqlite:///{time.monotonic_ns()}.db")  # this test's own subject
        woken = {"a": 0, "b": 0}
        b_woke = asyncio.Event()

        def wake_b() -> None:
            woken["b"] += 1
            b_woke.set()

        a = NatsWakeups(NATS_URL, subject, lambda: woken.__setitem__("a", woken["a"] + 1))
        b = NatsWakeups(NATS_URL, subject, wake_b)
        await a.start()
        await b.start()
        try:
            assert a.connected and b.connected
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


@needs_nats
def test_a_publish_on_one_replica_wakes_a_long_poll_on_the_other(
    tmp_path: Path, artifacts: ArtifactFactory
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
    }
    settings = make_settings(url, tmp_path / "store", **changes)
    with thread_server(settings) as url_a, thread_server(settings) as url_b:
        page, waited, model_id = publish_wakes_poll(url_a, url_b, artifacts, seed=12)
    assert [item["model_id"] for item in page["items"]] == [model_id]
    assert waited < 20.0  # woken by the commit on A, not by a re-read after 30 s
