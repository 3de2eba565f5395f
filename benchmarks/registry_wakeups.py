"""Cross-replica wake-up latency: a publish on replica A wakes a long poll waiting on replica B.

Two registry replicas (``python -m pubsubml.cli.registry serve`` subprocesses) share one
PostgreSQL schema on 127.0.0.1:5432 and one artifact folder.  A subscriber long-polls its feed
on one replica while a publisher publishes on A; the latency is the time from A's acknowledgement
of the publish (its transaction has committed) to the poll's answer, 0 when the poll answered
first.  Three configurations, measured in the same run:

* ``same replica``: the poll waits on A itself (the in-process wake-up);
* ``cross, LISTEN/NOTIFY``: the poll waits on B, woken through PostgreSQL (the default);
* ``cross, NATS``: the poll waits on a replica with ``LISTEN`` off, woken through the NATS
  server on 127.0.0.1:4222 (``PUBSUBML_NATS_URL``; A publishes there too); left out when no
  NATS server answers;
* ``cross, NATS JetStream``: the same through a JetStream stream (``PUBSUBML_NATS_JETSTREAM``):
  a fifth replica publishes, a sixth with ``LISTEN`` off polls; the stream is deleted afterwards
  (left out when the server does not run JetStream);
* ``cross, re-read only``: the poll waits on B with wake-ups off (``PUBSUBML_FEED_WAKEUPS=false``),
  so B sees the model at its next re-read (``feed_poll_interval``, 0.5 s by default): the
  reference, what replicas did without wake-ups; the ratio column is p99 over its p99.

Target: cross-replica wake-up p99 ≤ 100 ms.  Run::

    .venv/bin/python benchmarks/registry_wakeups.py [--rounds 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from pubsubml.registry.client import RegistryClient
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.jetstream import jetstream_available
from pubsubml.registry.infrastructure.nats_subjects import feed_subject, stream_name
from pubsubml.registry.migrate import upgrade
from registry_load import ADMIN, free_port, make_artifacts, postgres_url, register_publishers

NATS_URL = "nats://127.0.0.1:4222"


def nats_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 4222), timeout=1):
            return True
    except OSError:
        return False


def delete_stream(name: str) -> None:
    """Remove the JetStream stream the JetStream replicas created for this run's database."""

    async def delete() -> None:
        import nats
        from nats.js.errors import NotFoundError

        client = await nats.connect(NATS_URL)
        try:
            await client.jetstream().delete_stream(name)
        except NotFoundError:
            pass
        finally:
            await client.close()

    asyncio.run(delete())


def spawn(
    url: str, store: Path, port: int, wakeups: bool, nats: bool = False, jetstream: bool = False
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PUBSUBML_ADMIN_TOKEN": ADMIN,
        "PUBSUBML_FEED_WAKEUPS": "true" if wakeups else "false",
        "PUBSUBML_NATS_URL": NATS_URL if nats or jetstream else "",
        "PUBSUBML_NATS_JETSTREAM": "true" if jetstream else "false",
    }
    cmd = [sys.executable, "-m", "pubsubml.cli.registry", "serve", "--db", url]
    cmd += ["--store", str(store), "--port", str(port), "--log-level", "error"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_up(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{base}/v1/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
                raise RuntimeError(f"replica did not start: {err}") from None
            time.sleep(0.2)


def measure(
    publish_base: str, poll_base: str, rounds: int, seed: int, setup: dict[str, object]
) -> np.ndarray:
    """Latencies (ms) from the publish's acknowledgement on ``publish_base`` to the answer of a
    long poll waiting on ``poll_base``."""
    keys, tokens, sub, sub_token = (setup[k] for k in ("keys", "tokens", "sub", "sub_token"))
    arts = make_artifacts(rounds, keys, seed=seed)  # type: ignore[arg-type]
    with httpx.Client(base_url=poll_base, timeout=30) as reader:
        headers = {"Authorization": f"Bearer {sub_token}"}
        after = max(
            [0]
            + [
                int(i["cursor"])
                for i in reader.get(
                    f"/v1/subscriptions/{sub}/models", params={"limit": 1000}, headers=headers
                ).json()["items"]
            ]
        )
        latencies = []
        for site, art in arts:
            answered: list[float] = []

            def poll(after: int = after, answered: list[float] = answered) -> None:
                r = reader.get(
                    f"/v1/subscriptions/{sub}/models",
                    params={"after": after, "timeout": 10, "limit": 10},
                    headers=headers,
                )
                answered.append(time.perf_counter())
                r.raise_for_status()

            thread = threading.Thread(target=poll)
            thread.start()
            time.sleep(0.05)  # the poll is waiting
            with RegistryClient(publish_base, tokens[site]) as publisher:  # type: ignore[index]
                publisher.publish_model(art.card, art.weights)
            acked = time.perf_counter()
            thread.join(30)
            latencies.append(max(0.0, answered[0] - acked) * 1000)
            # The next round waits for what comes after everything delivered so far.
            items = reader.get(
                f"/v1/subscriptions/{sub}/models",
                params={"after": after, "limit": 1000},
                headers=headers,
            ).json()["items"]
            after = max([after] + [int(i["cursor"]) for i in items])
    return np.asarray(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    found = postgres_url()
    if found is None:
        print("no PostgreSQL server on 127.0.0.1:5432: nothing to measure")
        return
    url, drop = found
    rows = []
    try:
        db = Database(url)
        upgrade(db)
        db.dispose()
        with tempfile.TemporaryDirectory() as tmp:
            nats = nats_up()
            jetstream = nats and asyncio.run(jetstream_available(NATS_URL))
            ports = [free_port() for _ in range(6 if jetstream else 4 if nats else 3)]
            procs = [
                spawn(url, Path(tmp) / "store", ports[0], True, nats),
                spawn(url, Path(tmp) / "store", ports[1], True),
                spawn(url, Path(tmp) / "store", ports[2], False),
            ]
            if nats:
                procs.append(spawn(url, Path(tmp) / "store", ports[3], False, True))
            if jetstream:
                procs.append(spawn(url, Path(tmp) / "store", ports[4], True, jetstream=True))
                procs.append(spawn(url, Path(tmp) / "store", ports[5], False, jetstream=True))
            bases = [f"http://127.0.0.1:{p}" for p in ports]
            try:
                for base, proc in zip(bases, procs, strict=True):
                    wait_up(base, proc)
                admin = RegistryClient(bases[0], ADMIN)
                keys, tokens = register_publishers(admin, 4)
                sub_token = admin.add_site(
                    "sub", roles="subscriber", epsilon_budget=1, delta_budget=1e-5
                )["token"]
                sub = RegistryClient(bases[0], sub_token).subscribe(
                    "sub", "*", task="classification", classes=[0, 1]
                )
                setup = {"keys": keys, "tokens": tokens, "sub": sub, "sub_token": sub_token}
                a, b, b_off = bases[:3]
                configs = [("same replica", a, a, 1), ("cross, LISTEN/NOTIFY", a, b, 2)]
                if nats:
                    configs.append(("cross, NATS", a, bases[3], 4))
                if jetstream:
                    configs.append(("cross, NATS JetStream", bases[4], bases[5], 5))
                configs.append(("cross, re-read only (ref.)", a, b_off, 3))
                for label, publish_base, poll_base, seed in configs:
                    ms = measure(publish_base, poll_base, args.rounds, seed, setup)
                    rows.append((label, ms))
                    print(f"  {label}: {len(ms)} rounds", flush=True)
            finally:
                for proc in procs:
                    proc.terminate()
                    proc.wait(15)
                if jetstream:
                    delete_stream(stream_name(feed_subject(url)))
    finally:
        drop()
    print()
    print(
        f"{'poll waits on':<28}{'rounds':>7}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
        f"{'p99 vs re-read':>16}"
    )
    ref = float(np.percentile(rows[-1][1], 99))
    for label, ms in rows:
        p99 = float(np.percentile(ms, 99))
        ratio = p99 / ref if ref > 0 else float("nan")
        print(
            f"{label:<28}{len(ms):>7}{np.percentile(ms, 50):>9.1f}{p99:>9.1f}{ms.max():>9.1f}"
            f"{ratio:>16.3f}"
        )


if __name__ == "__main__":
    main()
