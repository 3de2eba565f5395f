"""The server killed with SIGKILL during a publish (subprocesses; every backend, both artifact
stores): after a restart no partial model is visible, and the database and the store agree."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pubsubml.registry.client import RegistryClient

HANGING = Path(__file__).with_name("hanging_server.py")


def _start_hanging(
    support: Any, url: str, store: Path | str, port: int, marker: Path
) -> subprocess.Popen[bytes]:
    env_cmd = [sys.executable, str(HANGING), url, str(store), str(port), str(marker)]
    import os

    env = {**os.environ, "PUBSUBML_ADMIN_TOKEN": support.ADMIN_TOKEN}
    proc = subprocess.Popen(env_cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    support.wait_healthy(f"http://127.0.0.1:{port}", proc=proc)
    return proc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


@pytest.mark.parametrize("kind", ["files", "database"])
def test_sigkill_during_upload_and_before_commit(
    backend: Any, tmp_path: Path, support: Any, artifacts: Any, kind: str
) -> None:
    store: Path | str = tmp_path / "store" if kind == "files" else "database"
    port = support.free_port()
    base = f"http://127.0.0.1:{port}"
    marker = tmp_path / "marker"
    proc = _start_hanging(support, backend.url, store, port, marker)
    try:
        admin = RegistryClient(base, support.ADMIN_TOKEN)
        admin.add_features(support.DICTIONARY.features)
        token = admin.add_site(
            "a", public_key=artifacts.public_key("a"), epsilon_budget=50, delta_budget=1e-5
        )["token"]
        art = artifacts("a", seed=90)

        # In flight when the process dies: (1) an upload half sent, (2) a publish transaction
        # that renamed its file into the store and is about to commit.
        body_head = (
            b'--b\r\nContent-Disposition: form-data; name="card"\r\n\r\n'
            + art.card.to_json().encode()
            + b'\r\n--b\r\nContent-Disposition: form-data; name="weights"; filename="w"\r\n\r\n'
        )
        upload = socket.create_connection(("127.0.0.1", port))
        head = (
            f"POST /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: multipart/form-data; boundary=b\r\n"
            f"Content-Length: {len(body_head) + 4_000_000}\r\n\r\n"
        ).encode()
        upload.sendall(head + body_head + b"\x00" * 1_000_000)
        outcome: list[Any] = []
        client = RegistryClient(base, token, retries=0)
        publisher = threading.Thread(
            target=lambda: _capture(outcome, client.publish, art.card, art.weights)
        )
        publisher.start()
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), f"the publish never reached its commit: {outcome}"
        keys, files = support.keys_and_files(backend.url, store)
        assert keys == set() and len(files) == 1  # written (and renamed), but not committed
        _kill(proc)
        upload.close()
        publisher.join(10)
        assert outcome and isinstance(outcome[0], Exception)

        # A normal restart collects the orphan; the model can then be published for real.
        proc = support.spawn_server(backend.url, store, port)
        support.wait_healthy(base, proc=proc)
        site = RegistryClient(base, token)
        assert site.list_models() == [] and site.ledger("a")["releases"] == []
        assert support.keys_and_files(backend.url, store) == (set(), set())
        assert site.publish(art.card, art.weights) == art.card.model_id
        keys, files = support.keys_and_files(backend.url, store)
        assert keys == files and len(keys) == 1
        if kind == "files":
            assert not list((tmp_path / "store" / "tmp").iterdir())
        else:
            assert not (tmp_path / "store").exists()
    finally:
        proc.kill()
        proc.wait(10)


def _capture(outcome: list[Any], fn: Any, *args: Any) -> None:
    try:
        outcome.append(fn(*args))
    except Exception as exc:
        outcome.append(exc)
