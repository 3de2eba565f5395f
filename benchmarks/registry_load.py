"""Load test of the registry over loopback: publish and feed-read throughput with p50/p99 latency.

For each backend (SQLite file, PostgreSQL schema on 127.0.0.1:5432) the script starts
``python -m pubsubml.cli.registry serve`` as a subprocess, registers publisher and subscriber sites,
then drives it from one asyncio process with 1, 8 and 32 concurrent keep-alive HTTP/1.1
connections (a minimal raw client, so the client costs little of the shared CPU):

* ``publish``: ``POST /v1/models`` of distinct signed MLP artifacts (safetensors, 10 → 16 → 2,
  DP-SGD events: σ = 1.1, q = 0.01, 200 steps); each publisher site publishes many models.
* ``feed``: ``GET /v1/subscriptions/{id}/models?after=C&limit=10`` (no wait) on subscriptions that
  each hold every published model.
* ``health``: ``GET /v1/health`` on the same server, right after the feed on the feed's
  connections — the reference ceiling (no authentication, no database); the ratio column is
  throughput / health throughput.  With several server processes, which one accepted which
  connection decides how the load is shared; feed and health share that split (publishes run on
  their own connections).

The last columns are CPU milliseconds per request, from /proc before and after each
measurement: the server's processes (with ``--workers`` N, its N workers too), their validation
workers, PostgreSQL's processes, and the load generator itself (``client``, its own process
time). Where the time of a request goes thus shows in every run: a publish bound by its server
process's interpreter (``server`` near 1,000 / req/s per process) reads differently from one
waiting on a lock or on the database.  ``cost ×`` is the sum of the four over the same sum for a
health check at the same level: the cost of a request as a multiple of a health check's, which
is the throughput ratio's inverse when the machine's cores are the bound.

Before measuring, one publish per publisher site for up to 4 sites per server process, 8 at a
time, warms the server (each validation worker computes ε of the benchmark's DP configuration
once, 0.2-0.7 s of a core; with ``--history`` every site publishes once).  Request counts and
durations are bounded; only 127.0.0.1 is contacted.  Run::

    .venv/bin/python benchmarks/registry_load.py [--backends sqlite,postgresql] [--seconds 4]
        [--workers 1,2] [--levels 1,8,32] [--store files|database]

``--workers`` runs the server with that many processes (``pubsubml registry serve --workers``);
``postgresql×2`` in the table is PostgreSQL with two.  ``--history N`` gives every publisher site N
earlier releases in its ledger before the publishes are measured (rows written straight into the
database, as a long-running stream publisher would have them), to see whether a publish slows
down with its site's history.  ``--subscriptions N`` adds N subscriptions that every published
model matches (channel ``x0``, written straight into the database for 32 subscriber sites) before
the publishes, so each publish delivers to N feeds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from pubsubml.artifacts import MLPArchitecture, PrivacyRecord
from pubsubml.artifacts.export import Artifact, make_artifact
from pubsubml.artifacts.safetensors_codec import mlp_to_safetensors
from pubsubml.artifacts.signing import generate_signing_key, public_key_to_base64
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.registry.client import RegistryClient
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.migrate import upgrade
from pubsubml.schema import FeatureSchema

ADMIN = "bench-admin-" + secrets.token_hex(16)
LEVELS = (1, 8, 32)
N_PUBLISHERS = 32
N_SUBSCRIBERS = 32
SCHEMA = FeatureSchema.numeric([f"x{i}" for i in range(10)], lower=0.0, upper=1.0)
EVENTS = [
    DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.1, sample_rate=0.01, count=200)
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def register_publishers(admin: RegistryClient, n: int) -> tuple[dict[str, object], dict[str, str]]:
    """Add the dictionary and ``n`` publisher sites (ε budget 10⁶); their keys and tokens."""
    admin.add_features(SCHEMA.features)
    keys = {f"pub{i:02d}": generate_signing_key() for i in range(n)}
    tokens = {
        s: admin.add_site(
            s,
            roles="publisher",
            public_key=public_key_to_base64(k.public_key()),
            epsilon_budget=1e6,
            delta_budget=1e-5,
        )["token"]
        for s, k in keys.items()
    }
    return keys, tokens  # type: ignore[return-value]


def fill_ledgers(url: str, sites: list[str], history: int) -> None:
    """Give each of ``sites`` ``history`` earlier releases of the benchmark's DP events."""
    from pubsubml.privacy.ledger import Release
    from pubsubml.registry.services.ledger import ledger_row
    from pubsubml.registry.tables import SiteRow

    eps = compute_epsilon(EVENTS, 1e-5)
    db = Database(url)
    try:
        for name in sites:
            with db.write() as session:
                site_id = session.query(SiteRow.id).filter(SiteRow.name == name).scalar()
                session.add_all(
                    ledger_row(
                        site_id,
                        Release(release_id=f"earlier-{i}", events=tuple(EVENTS)),
                        epsilon=eps,
                        delta=1e-5,
                        model_id=None,  # type: ignore[arg-type]
                    )
                    for i in range(history)
                )
    finally:
        db.dispose()


def add_subscriptions(admin: RegistryClient, url: str, n: int) -> None:
    """``n`` subscriptions to ``x0`` spread over 32 new subscriber sites."""
    from pubsubml.registry.tables import SiteRow, SubscriptionRow

    names = [f"many{i:02d}" for i in range(32)]
    for name in names:
        admin.add_site(name, roles="subscriber", epsilon_budget=1, delta_budget=1e-5)
    db = Database(url)
    try:
        with db.write() as session:
            ids = dict(session.query(SiteRow.name, SiteRow.id).filter(SiteRow.name.in_(names)))
            session.add_all(
                SubscriptionRow(
                    id=uuid.uuid4().hex,
                    site_id=ids[names[i % len(names)]],
                    channel="x0",
                    task="classification",
                    classes_json=None,
                )
                for i in range(n)
            )
    finally:
        db.dispose()


def make_artifacts(n: int, keys: dict[str, object], seed: int) -> list[tuple[str, Artifact]]:
    """``n`` distinct signed artifacts, round-robin over the publisher sites."""
    eps = compute_epsilon(EVENTS, 1e-5)
    # Synthetic weights under a real DP configuration, recorded as a release records it: the
    # registry refuses cards whose noise is seeded or not recorded.
    record = PrivacyRecord.from_events(
        EVENTS, epsilon=eps, delta=1e-5, accountant="pld", noise="secure"
    )
    arch = MLPArchitecture(layer_sizes=[10, 16, 2], activation="tanh", output_activation="softmax")
    rng = np.random.default_rng(seed)
    names = sorted(keys)
    out = []
    for i in range(n):
        site = names[i % len(names)]
        layers = [
            (rng.normal(size=(16, 10)), rng.normal(size=16)),
            (rng.normal(size=(2, 16)), rng.normal(size=2)),
        ]
        art = make_artifact(
            mlp_to_safetensors(layers),
            format="safetensors",
            publisher=site,
            schema=SCHEMA,
            classes=[0, 1],
            privacy=record,
            signing_key=keys[site],  # type: ignore[arg-type]
            architecture=arch,
        )
        out.append((site, art))
    return out


def publish_request(art: Artifact, token: str) -> bytes:
    boundary = "b" + uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="card"\r\n\r\n'.encode()
        + art.card.to_json().encode()
        + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="weights"; filename="w"\r\n\r\n'.encode()
        + art.weights
        + f"\r\n--{boundary}--\r\n".encode()
    )
    head = (
        f"POST /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def get_request(path: str, token: str | None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n".encode()


async def _roundtrip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> int:
    writer.write(request)
    await writer.drain()
    status_line = await reader.readline()
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return int(status_line.split()[1])


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def open_connections(port: int, concurrency: int) -> list[Connection]:
    """``concurrency`` keep-alive connections to the server."""
    return [await asyncio.open_connection("127.0.0.1", port) for _ in range(concurrency)]


def cpu_seconds(server_pid: int) -> dict[str, float] | None:
    """CPU seconds (user + system) so far of the server's processes, split by kind, from /proc.

    ``server``: the process started by the benchmark and its uvicorn workers; ``validation``:
    their validation workers; ``database``: every ``postgres`` process of the machine (the
    benchmark's server is its only client while it runs).  None where /proc cannot be read.
    """
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    used: dict[int, tuple[str, float]] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:  # ended meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        parent[pid] = int(fields[1])
        kind = "validation" if b"validation_worker" in cmdline else name
        used[pid] = (kind, (int(fields[11]) + int(fields[12])) / tick)
    totals = {"server": 0.0, "validation": 0.0, "database": 0.0}
    for pid, (kind, seconds) in used.items():
        if kind == "postgres":
            totals["database"] += seconds
            continue
        ancestor = pid
        while ancestor not in (server_pid, 0, 1) and ancestor in parent:
            ancestor = parent[ancestor]
        if ancestor == server_pid:
            totals["validation" if kind == "validation" else "server"] += seconds
    return totals


def cpu_per_request(
    before: dict[str, float] | None, after: dict[str, float] | None, stats: dict[str, float]
) -> None:
    """Add each kind's CPU milliseconds per request between two :func:`cpu_seconds` to ``stats``."""
    for kind in ("server", "validation", "database"):
        if before is None or after is None or not stats["n"]:
            stats[f"cpu_{kind}"] = float("nan")
        else:
            stats[f"cpu_{kind}"] = 1000 * (after[kind] - before[kind]) / stats["n"]


async def run_level(
    port: int,
    concurrency: int,
    next_request: Callable[[], bytes | None],
    seconds: float,
    max_requests: int,
    connections: list[Connection] | None = None,
) -> dict[str, float]:
    """Drive ``concurrency`` connections until time, requests or ``next_request`` run out.

    With ``connections``, drive those (left open) instead of opening new ones: with several
    server processes, which process accepted which connection decides how the load is shared,
    so operations compared on the same connections are compared under the same sharing.
    """
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    own = connections is None
    conns = await open_connections(port, concurrency) if connections is None else connections

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal errors
        while time.perf_counter() < deadline and len(latencies) < max_requests:
            request = next_request()
            if request is None:
                return
            t0 = time.perf_counter()
            status = await _roundtrip(reader, writer, request)
            latencies.append(time.perf_counter() - t0)
            if status >= 400:
                errors += 1

    t0, cpu0 = time.perf_counter(), time.process_time()
    try:
        await asyncio.gather(*(worker(r, w) for r, w in conns))
    finally:
        if own:
            for _, writer in conns:
                writer.close()
    elapsed, client_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    ms = sorted(x * 1000 for x in latencies)
    return {
        "n": len(ms),
        "rps": len(ms) / elapsed,
        "p50": statistics.median(ms) if ms else float("nan"),
        "p99": ms[min(len(ms) - 1, int(0.99 * len(ms)))] if ms else float("nan"),
        "errors": errors,
        "cpu_client": 1000 * client_cpu / len(ms) if ms else float("nan"),
    }


def cost(stats: dict[str, float]) -> float:
    """CPU milliseconds a request costs the machine: server, validation, database and client
    (NaN where /proc could not be read)."""
    return sum(stats[f"cpu_{kind}"] for kind in ("server", "validation", "database", "client"))


async def feed_then_health(
    port: int,
    concurrency: int,
    feed_request: Callable[[], bytes],
    health: bytes,
    seconds: float,
    server_pid: int,
) -> tuple[dict[str, float], dict[str, float]]:
    """The feed and then the health check, driven on the same connections."""
    conns = await open_connections(port, concurrency)
    try:
        start = cpu_seconds(server_pid)
        feed = await run_level(port, concurrency, feed_request, seconds, 50_000, conns)
        middle = cpu_seconds(server_pid)
        ref = await run_level(port, concurrency, lambda: health, seconds, 50_000, conns)
        cpu_per_request(start, middle, feed)
        cpu_per_request(middle, cpu_seconds(server_pid), ref)
    finally:
        for _, writer in conns:
            writer.close()
    return feed, ref


def bench_backend(
    name: str,
    url: str,
    seconds: float,
    workdir: Path,
    workers: int = 1,
    levels: tuple[int, ...] = LEVELS,
    history: int = 0,
    subscriptions: int = 0,
    store: str = "files",
) -> list[tuple[str, int, dict[str, float]]]:
    db = Database(url)
    upgrade(db)
    db.dispose()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PUBSUBML_ADMIN_TOKEN": ADMIN}
    cmd = [
        sys.executable,
        "-m",
        "pubsubml.cli.registry",
        "serve",
        "--db",
        url,
        "--store",
        "database" if store == "database" else str(workdir / "store"),
        "--port",
        str(port),
        "--log-level",
        "error",
        "--workers",
        str(workers),
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rows: list[tuple[str, int, dict[str, float]]] = []
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"server did not start: {proc.stderr.read().decode()[-2000:]}"
                    ) from None
                time.sleep(0.2)
        admin = RegistryClient(base, ADMIN)
        keys, tokens = register_publishers(admin, N_PUBLISHERS)
        if history:
            fill_ledgers(url, sorted(keys), history)
        if subscriptions:
            add_subscriptions(admin, url, subscriptions)
        # Warm the server's caches: each validation worker's first ε computation of the
        # configuration (0.2-0.7 s of a core, docs/registry.md) and, with a history, each
        # publisher's releases read once, as a server that has been running would have them.
        # One publish per publisher (all of them with a history, else 4 per server process), 8
        # at a time, so that the processes and their validation workers each get some.
        n_warm = len(keys) if history else min(len(keys), 4 * workers)
        warm_keys = {s: keys[s] for s in sorted(keys)[:n_warm]}
        warm_batch = make_artifacts(len(warm_keys), warm_keys, seed=999)
        warm_requests = iter([publish_request(a, tokens[s]) for s, a in warm_batch])
        warmed = asyncio.run(
            run_level(port, 8, lambda it=warm_requests: next(it, None), 120.0, len(warm_batch))
        )
        if warmed["errors"] or warmed["n"] != len(warm_batch):
            raise RuntimeError(f"the warm-up publishes failed: {warmed}")
        total_publishes = len(warm_batch) - 1
        for level in levels:
            budget = 150 * level if level > 1 else 150
            batch = make_artifacts(budget, keys, seed=level)
            requests = iter([publish_request(a, tokens[s]) for s, a in batch])
            before = cpu_seconds(proc.pid)
            stats = asyncio.run(
                run_level(port, level, lambda it=requests: next(it, None), seconds, budget)
            )
            cpu_per_request(before, cpu_seconds(proc.pid), stats)
            total_publishes += int(stats["n"])
            rows.append(("publish", level, stats))
        subs = {}
        for i in range(N_SUBSCRIBERS):
            s = f"sub{i:02d}"
            tok = admin.add_site(s, roles="subscriber", epsilon_budget=1, delta_budget=1e-5)[
                "token"
            ]
            subs[s] = (tok, RegistryClient(base, tok).subscribe(s, "x0", task="classification"))
        sub_list = []
        for tok, sub in subs.values():
            items = RegistryClient(base, tok).poll(sub, limit=1000)
            sub_list.append((tok, sub, [0] + [i.cursor for i in items]))
        n_feed = len(sub_list[0][2]) - 1
        rng = np.random.default_rng(0)

        def feed_request() -> bytes:
            tok, sub, cursors = sub_list[int(rng.integers(len(sub_list)))]
            after = cursors[int(rng.integers(max(1, len(cursors) - 10)))]
            return get_request(f"/v1/subscriptions/{sub}/models?after={after}&limit=10", tok)

        health = get_request("/v1/health", None)
        for level in levels:
            feed, ref = asyncio.run(
                feed_then_health(port, level, feed_request, health, seconds, proc.pid)
            )
            rows.append(("feed", level, feed))
            rows.append(("health", level, ref))
        admin.close()
        print(
            f"  [{name}] {total_publishes + 1} models published, {n_feed} in each feed", flush=True
        )
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    return rows


def postgres_url() -> tuple[str, Callable[[], None]] | None:
    import psycopg

    for user in ("postgres", "root"):
        try:
            conn = psycopg.connect(
                host="127.0.0.1", user=user, dbname="test", autocommit=True, connect_timeout=3
            )
        except psycopg.Error:
            continue
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        conn.execute(f"CREATE SCHEMA {schema}")

        def drop(conn: psycopg.Connection = conn, schema: str = schema) -> None:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
            conn.close()

        return (
            f"postgresql+psycopg://{user}@127.0.0.1:5432/test?options=-csearch_path%3D{schema}",
            drop,
        )
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--seconds", type=float, default=4.0, help="Upper bound per measurement.")
    parser.add_argument(
        "--workers", default="1", help="Server processes, e.g. '1,2' to measure both."
    )
    parser.add_argument(
        "--levels", default="1,8,32", help="Concurrent client connections to measure, e.g. '8'."
    )
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="Earlier releases in each publisher's ledger before publishing (default 0).",
    )
    parser.add_argument(
        "--store",
        choices=("files", "database"),
        default="files",
        help="Where the server keeps the weights: a folder (default) or the database.",
    )
    parser.add_argument(
        "--subscriptions",
        type=int,
        default=0,
        help="Subscriptions every published model matches, added before publishing (default 0).",
    )
    args = parser.parse_args()
    levels = tuple(int(c) for c in args.levels.split(","))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    results: dict[str, list[tuple[str, int, dict[str, float]]]] = {}
    for workers in (int(w) for w in args.workers.split(",")):
        for name in args.backends.split(","):
            label = name if workers == 1 else f"{name}×{workers}"
            with tempfile.TemporaryDirectory() as tmp:

                def run(
                    url: str, label: str = label, tmp: str = tmp, workers: int = workers
                ) -> None:
                    results[label] = bench_backend(
                        label,
                        url,
                        args.seconds,
                        Path(tmp),
                        workers,
                        levels,
                        args.history,
                        args.subscriptions,
                        args.store,
                    )

                if name == "sqlite":
                    run(f"sqlite:///{Path(tmp) / 'registry.db'}")
                    continue
                found = postgres_url()
                if found is None:
                    print("  [postgresql] no server on 127.0.0.1:5432: skipped")
                    continue
                url, drop = found
                try:
                    run(url)
                finally:
                    drop()
    print()
    print(
        f"{'backend':<15}{'operation':<10}{'clients':>8}{'requests':>10}{'req/s':>10}{'p50 ms':>9}"
        f"{'p99 ms':>9}{'errors':>8}{'vs health':>11}{'server':>8}{'valid.':>8}{'db':>8}"
        f"{'client':>8}{'cost ×':>8}"
    )
    for name, rows in results.items():
        ceiling = {lvl: s["rps"] for op, lvl, s in rows if op == "health"}
        unit = {lvl: cost(s) for op, lvl, s in rows if op == "health"}
        for op, lvl, s in rows:
            ratio = s["rps"] / ceiling[lvl] if ceiling.get(lvl) else float("nan")
            times = cost(s) / unit[lvl] if unit.get(lvl) else float("nan")
            print(
                f"{name:<15}{op:<10}{lvl:>8}{int(s['n']):>10}{s['rps']:>10.0f}{s['p50']:>9.2f}"
                f"{s['p99']:>9.2f}{int(s['errors']):>8}{ratio:>11.2f}{s['cpu_server']:>8.2f}"
                f"{s['cpu_validation']:>8.2f}{s['cpu_database']:>8.2f}{s['cpu_client']:>8.2f}"
                f"{times:>8.2f}"
            )
    print(
        "server / valid. / db / client: CPU milliseconds per request of the server's processes, "
        "its validation workers, PostgreSQL (/proc) and the load generator; cost ×: their sum "
        "over a health check's"
    )


if __name__ == "__main__":
    main()
