"""Two registry replicas (subprocesses) on one PostgreSQL schema and one artifact store (a shared
folder, or the database itself with no shared folder), under publish load on both, while one is
killed (SIGKILL) and restarted again and again: every model either replica acknowledged stays
listed and downloadable with its digest, and the database and the store agree at the end."""

from __future__ import annotations

import hashlib
import itertools
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pubsubml.errors import RegistryError, RegistryUnreachableError
from pubsubml.registry.client import RegistryClient

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

RESTARTS = 2
UP_SECONDS = 1.0  # served after its first acknowledgements, before it is killed again


def _publish_until(
    stop: threading.Event, bases: list[str], token: str, arts: list[Any], out: dict[str, Any]
) -> None:
    """Publish ``arts`` through the replicas in turn; record acknowledgements (with the replica
    that gave them) and failures."""
    clients = [RegistryClient(base, token, retries=0, timeout=30.0) for base in bases]
    for k, art in enumerate(itertools.cycle(arts)):  # a re-publish is idempotent (200)
        if stop.is_set():
            break
        replica = k % len(clients)
        try:
            out["acked"].append((replica, clients[replica].publish(art.card, art.weights)))
        except RegistryUnreachableError as exc:  # the replica is down: refused or reset
            out["unreachable"].append(type(exc.__cause__ or exc).__name__)
            time.sleep(0.1)
        except RegistryError as exc:  # a 4xx/5xx answer
            out["refused"].append(str(exc))
    for client in clients:
        client.close()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("kind", ["files", "database"])
def test_rolling_restarts_lose_no_acknowledged_model(
    backend: Any, tmp_path: Path, support: Any, artifacts: Any, kind: str
) -> None:
    """With ``kind="database"`` the replicas run in folders of their own (two hosts that share
    only the database) and keep the weights in it."""
    store: Path | str = tmp_path / "store" if kind == "files" else "database"
    hosts = [tmp_path / "host-0", tmp_path / "host-1"]
    for host in hosts:
        host.mkdir()
    ports = [support.free_port(), support.free_port()]
    bases = [f"http://127.0.0.1:{p}" for p in ports]
    procs = [
        support.spawn_server(backend.url, store, p, cwd=host)
        for p, host in zip(ports, hosts, strict=True)
    ]
    try:
        for base, proc in zip(bases, procs, strict=True):
            support.wait_healthy(base, proc=proc)
        admin = RegistryClient(bases[0], support.ADMIN_TOKEN)
        admin.add_features(support.DICTIONARY.features)
        tokens = {
            s: admin.add_site(
                s, public_key=artifacts.public_key(s), epsilon_budget=1e4, delta_budget=1e-5
            )["token"]
            for s in ("a", "b")
        }
        arts = {s: [artifacts(s, seed=1000 + k) for k in range(250)] for s in ("a", "b")}
        stop = threading.Event()
        results = {s: {"acked": [], "refused": [], "unreachable": []} for s in ("a", "b")}
        threads = [
            threading.Thread(
                target=_publish_until, args=(stop, bases, tokens[s], arts[s], results[s])
            )
            for s in ("a", "b")
        ]
        for t in threads:
            t.start()

        def acked_by_replica_1() -> int:
            return sum(1 for r in results.values() for replica, _ in r["acked"] if replica == 1)

        def serve_a_while() -> None:  # at least 2 more acknowledgements from replica 1
            start, deadline = acked_by_replica_1(), time.monotonic() + 60
            while acked_by_replica_1() < start + 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(UP_SECONDS)

        for _ in range(RESTARTS):  # replica 1 dies mid-load and starts again (collecting orphans)
            serve_a_while()
            procs[1].send_signal(signal.SIGKILL)
            procs[1].wait(10)
            procs[1] = support.spawn_server(backend.url, store, ports[1], cwd=hosts[1])
            support.wait_healthy(bases[1], proc=procs[1])
        serve_a_while()
        stop.set()
        for t in threads:
            t.join(60)

        acked = [pair for r in results.values() for pair in r["acked"]]
        by_replica = [sum(1 for replica, _ in acked if replica == i) for i in (0, 1)]
        assert min(by_replica) >= 3 and sum(by_replica) >= 20, (by_replica, results)
        assert sum(len(r["unreachable"]) for r in results.values()) > 0  # it did go down
        server_errors = [m for r in results.values() for m in r["refused"] if "HTTP 5" in m]
        assert server_errors == []
        by_id = {a.card.model_id: a for s in ("a", "b") for a in arts[s]}
        readers = [RegistryClient(base, tokens["a"]) for base in bases]
        try:
            for model_id in sorted({model_id for _, model_id in acked}):  # re-publishes: once
                assert readers[1].get_model(model_id)["model_id"] == model_id
                for reader in readers:
                    weights = reader.download_weights(model_id)
                    digest = by_id[model_id].card.weights_sha256
                    assert hashlib.sha256(weights).hexdigest() == digest
        finally:
            for reader in readers:
                reader.close()
        keys, files = support.keys_and_files(backend.url, store)
        assert keys <= files  # no committed row without its file (crash leftovers may remain)
        if kind == "database":  # nothing was written on either host
            assert [list(host.iterdir()) for host in hosts] == [[], []]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)
