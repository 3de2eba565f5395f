"""Subscribing to a registry with a long history: how long it takes, how long publishes wait.

A new subscription receives every matching model published before it (pubsub-ml.txt §3.2;
``docs/registry.md``, "Subscriptions and the history").  For each backend and history size N the
script writes N models of one publisher straight into a fresh, migrated database (a third of them
carry the channel's feature ``age``, a fifth are private and listed for the subscriber), then
creates the subscription with ``create_subscription`` in this process.  On PostgreSQL a second
connection meanwhile takes and releases the feed lock every 2 ms, as every publish of every
replica does, and the longest it waited is the stall a publish would have seen.

Columns: ``subscribe s`` (the whole transaction, median of ``--repeats`` new subscriptions),
``lock wait s`` (the longest wait of the second connection during one of them, median over them)
and ``wait / subscribe``: the reference is the subscription itself, which is what a publish would wait if the
whole backfill held the lock.  On SQLite every write transaction holds the database's one write
lock, so a publish waits for the whole subscription there (ratio 1 by construction; not measured).

Run::

    .venv/bin/python benchmarks/subscription_backfill.py [--sizes 1000,10000,50000]
        [--backends sqlite,postgresql] [--repeats 3]

Only 127.0.0.1 is contacted; the PostgreSQL schema is dropped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import insert, text

from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.migrate import upgrade
from pubsubml.registry.schemas import SubscriptionCreate
from pubsubml.registry.services.features import add_features
from pubsubml.registry.services.feed_writer import FeedWriter
from pubsubml.registry.services.subscriptions import create_subscription
from pubsubml.registry.tables import ModelFeatureRow, ModelRow, ModelVisibilityRow, SiteRow
from pubsubml.schema import FeatureSchema
from registry_load import postgres_url


def write_history(db: Database, n: int) -> Principal:
    """Sites ``pub`` and ``sub`` and ``n`` models of ``pub``; returns the subscriber."""
    with db.write() as s:
        add_features(s, ADMIN, FeatureSchema.numeric(["age", "wbc"]).features)
        site_ids = {}
        for name in ("pub", "sub"):
            site = SiteRow(name=name, roles="both", epsilon_budget=1.0, delta_budget=1e-5)
            site.token_hash = name[0] * 64
            s.add(site)
            s.flush()
            site_ids[name] = site.id
        writer = FeedWriter(s)
        start = writer.position + 1
        ids = [f"{i:032x}" for i in range(n)]
        models = [
            dict(
                id=m,
                publisher_id=site_ids["pub"],
                task="classification",
                epsilon=1.0,
                delta=1e-5,
                claimed_epsilon=1.0,
                format="safetensors",
                weights_sha256=m * 2,
                size_bytes=1,
                storage_key=m,
                card_json='{"classes": [0, 1]}',
                public=i % 5 != 0,
                position=start + i,
            )
            for i, m in enumerate(ids)
        ]
        conn = s.connection()
        conn.execute(insert(ModelRow), models)
        names = ("age", "wbc", "wbc")
        conn.execute(
            insert(ModelFeatureRow),
            [dict(model_id=m, feature_name=names[i % 3]) for i, m in enumerate(ids)],
        )
        conn.execute(
            insert(ModelVisibilityRow),
            [dict(model_id=m, site_id=site_ids["sub"]) for m in ids[::5]],
        )
        writer.position = start + n - 1
        writer.close()
    return Principal(kind="site", site_id=site_ids["sub"], name="sub", roles="both")


class LockProbe:
    """Takes and releases the feed lock every 2 ms on its own connection; the longest wait."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._stop = threading.Event()
        self.longest = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _lock_once(self) -> float:
        t0 = time.perf_counter()
        with self._db.engine.begin() as conn:
            conn.execute(text("SELECT position FROM feed_clock WHERE id = 1 FOR UPDATE"))
            return time.perf_counter() - t0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.longest = max(self.longest, self._lock_once())
            time.sleep(0.002)

    def __enter__(self) -> LockProbe:
        self._lock_once()  # the connection is opened here, not timed
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(url: str, n: int, repeats: int, probe: bool) -> tuple[float, float | None]:
    """Median seconds of ``repeats`` subscriptions over ``n`` models, and the median over them
    of the longest lock wait during each."""
    db = Database(url)
    try:
        upgrade(db)
        subscriber = write_history(db, n)
        times, waits = [], []
        for _ in range(repeats):
            body = SubscriptionCreate(channel="age", task="classification")
            lock = LockProbe(db) if probe else None
            with lock or contextlib.nullcontext():
                t0 = time.perf_counter()
                with db.write() as s:
                    create_subscription(s, subscriber, body)
                times.append(time.perf_counter() - t0)
            if lock is not None:
                waits.append(lock.longest)
        return statistics.median(times), (statistics.median(waits) if waits else None)
    finally:
        db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(
        f"{'backend':<12} {'models':>8} {'subscribe s':>12} {'lock wait s':>12} {'wait / subscribe':>17}"
    )
    for backend in args.backends.split(","):
        for n in sizes:
            cleanup: Callable[[], None] | None = None
            with tempfile.TemporaryDirectory() as tmp:
                if backend == "sqlite":
                    url = f"sqlite:///{Path(tmp) / 'registry.db'}"
                else:
                    found = postgres_url()
                    if found is None:
                        print("postgresql: no server on 127.0.0.1:5432, skipped")
                        break
                    url, cleanup = found
                try:
                    seconds, wait = measure(url, n, args.repeats, probe=backend != "sqlite")
                finally:
                    if cleanup is not None:
                        cleanup()
            shown = "—" if wait is None else f"{wait:.3f}"
            ratio = "1 (by design)" if wait is None else f"{wait / seconds:.2f}"
            print(f"{backend:<12} {n:>8,} {seconds:>12.3f} {shown:>12} {ratio:>17}", flush=True)


if __name__ == "__main__":
    main()
