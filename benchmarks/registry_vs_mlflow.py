"""Our registry against MLflow's model registry, on this machine, in one run: publish and fetch.

Both servers run here over loopback, side by side, each with ``--workers`` processes (default
1), on the same kind of database: SQLite (a file each), then PostgreSQL on 127.0.0.1:5432 (a
database each, created with a random suffix and dropped at the end, even on error).  One
keep-alive ``httpx.AsyncClient`` (HTTP/1.1, a pool of as many connections as concurrent clients)
drives both with 1, 8 and 32 concurrent operations.  The systems take turns: each measurement
runs ``--repeats`` times (default 3) and within a repeat every system once, the first one
changing from repeat to repeat, so that the drifts of a shared machine's speed fall on all of
them alike; ratios and growth use the median of the repeats.

* ``publish`` of a distinct model (safetensors MLP weights of 20 KB, 10 → 400 → 2, or 1 MB,
  10 → 20000 → 2, float32, with its ~2 KB signed card):

  - ours: one multipart ``POST /v1/models`` (card + weights); the server checks the card, the
    SHA-256 and the Ed25519 signature, loads the weights in a sandboxed validation worker and
    recomputes ε there, charges the site's privacy ledger and delivers the model to the feeds;
  - MLflow: ``POST runs/create``, ``PUT`` of the weights through the artifact proxy
    (``/api/2.0/mlflow-artifacts/artifacts/...``), ``POST model-versions/create`` with 5 tags:
    the card's JSON in one (MLflow's model-version tag values may hold 100,000 characters) and
    channel, publisher, weights SHA-256 and ε in four small ones; each publisher site has its
    own registered model (created beforehand, untimed);
  - ``reuse-run``: MLflow again, with the weights uploaded under a fresh path into a run created
    beforehand (2 requests);
  - ``no-signature`` and ``no-signature-no-validation``: ours, with the signature check, then
    also the validation worker (safe loader and ε recomputation: the card's claimed ε is
    taken), switched off in the server process by a launcher in this script (``--serve-unchecked
    VARIANT serve ...``, a benchmark-only monkeypatch, never a server option); the ledger charge
    stays.  Measured at the first size with the 20 KB payload only.

* ``fetch``, a subscriber's "what is new, give it to me", then the first model's weights:

  - ours: ``GET /v1/subscriptions/{id}/models?after=C&limit=10`` then
    ``GET /v1/models/{model_id}/weights`` of the first item;
  - MLflow: ``GET model-versions/search`` with ``filter=tags.channel = 'x0' AND version_number
    > N``, ``order_by=version_number ASC, name ASC``, ``max_results=10``, then the first
    version's weights from the artifact proxy.  MLflow's filter grammar for model versions takes
    ``name``, ``run_id``, ``source_path``, ``version_number`` and tags (tags with =, !=, LIKE,
    ILIKE only); ``creation_timestamp`` is refused in a filter.  ``version_number`` counts per
    registered model (one per publisher site here); the sites publish round-robin, so a version
    number stands for a point in time across them.
  The 20 KB and 1 MB models are on channels of their own (features ``x0`` and ``b0``; MLflow:
  tag ``channel``), so a fetch downloads the payload it is measured with; C and N are drawn so
  that 10 items are new when there are that many.

Each system's registry is measured at ``--sizes`` models (10, 1,000, 10,000 of 20 KB on channel
``x0``, plus 10 of 1 MB on ``b0``, plus what the measured publishes add: the ``models`` column is
the count when a measurement starts); it grows from one size to the next through its own publish
API, untimed, 8 at a time, with distinct weights throughout (a re-publish of the same weights is
idempotent for us).  Ours has 32 publisher sites and one subscriber site with a subscription to
each channel (a publish is delivered to one feed); MLflow 32 registered models.  The database
is ANALYZEd before each size's measurements (PostgreSQL has autovacuum off here).  Per
measurement: operations, throughput, p50/p99 latency, failed operations, and CPU milliseconds per
operation from /proc: the server's process tree (for ours its validation workers apart, as
``valid.``; for MLflow the ``mlflow server`` command and its uvicorn process), PostgreSQL as
``db`` (its postmaster and background processes and the backends connected to the system's
database: other databases' clients of the shared server are left out), and this client process;
each measurement is bounded by ``--seconds`` and a count.  Then the ratios of the same run: ours
/ MLflow throughput per (database, size, payload, concurrency, operation), the growth of each
system from the first size to the last, and our database artifact store / file store
(``--our-stores``; a server that does not support ``--store database`` is reported as skipped).

``--hostile`` adds, once, on SQLite, the same hostile files sent to both: a pickle that would
call ``os.system`` if unpickled (nothing here unpickles anything), ONNX graphs with an
external-data initializer pointing at ``../../etc/passwd``, with a custom operator domain, with a
``ConstantOfShape`` memory bomb and with a ``Loop`` of 10¹² trips, safetensors with NaN weights,
random bytes, and an artifact path with ``..``; ours with validly signed cards whose digest
matches the bytes.  The table says, for each step, the HTTP status and error code, whether the
file is stored (listed, downloadable), and whether what is served back is byte-identical.

MLflow runs from its own virtual environment, ``benchmarks/peers/mlflow/.venv`` (made here when
missing, ``python3.11 -m venv`` + ``pip install -r benchmarks/peers/mlflow/requirements.txt``;
``--mlflow-venv PATH`` reuses another), as ``mlflow server --serve-artifacts
--artifacts-destination file://...`` (uvicorn, its access log off, its telemetry and job runner
off).  Only 127.0.0.1 is contacted.  Run::

    .venv/bin/python benchmarks/registry_vs_mlflow.py [--backends sqlite,postgresql]
        [--sizes 10,1000,10000] [--levels 1,8,32] [--seconds 3] [--repeats 3] [--payloads 20k,1m]
        [--our-stores files,database] [--workers 1] [--hostile] [--json results.json]
    .venv/bin/python benchmarks/registry_vs_mlflow.py --quick        # sizes 10, levels 1,8, 2 s, 20 KB
    .venv/bin/python benchmarks/registry_vs_mlflow.py --skip-mlflow --sizes 10 --levels 1 \\
        --seconds 1 --backends sqlite --our-stores files --payloads 20k --no-unchecked \\
        --max-publishes 10                                          # ours alone, ~20 s

The default run takes about 50 minutes on 2 cores (MLflow's growth to 10,000 models about 5 of
them per database).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import hashlib
import importlib.util
import json
import os
import platform
import re
import secrets
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar
from urllib.parse import quote, urlparse

import httpx
import numpy as np

from pubsubml.artifacts import MLPArchitecture, ModelCard, PrivacyRecord
from pubsubml.artifacts.export import Artifact, make_artifact
from pubsubml.artifacts.safetensors_codec import mlp_to_safetensors
from pubsubml.artifacts.signing import generate_signing_key, sign_card
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.schema import FeatureSchema

HERE = Path(__file__).resolve().parent
PEER = HERE / "peers" / "mlflow"
UNCHECKED_ENV = "REGISTRY_VS_MLFLOW_UNCHECKED"
UNCHECKED = ("no-signature", "no-signature-no-validation")


def _registry_load() -> ModuleType:
    """benchmarks/registry_load.py as a module (its sites, keys, CPU accounting, free ports)."""
    spec = importlib.util.spec_from_file_location("registry_load", HERE / "registry_load.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOAD = _registry_load()
ADMIN = "bench-admin-" + secrets.token_hex(16)
N_PUBLISHERS = 32
GROW_LEVEL = 8
GROW_BATCH = 256
PUBLISH_BYTES_CAP = 256 << 20  # the artifacts of one publish measurement are made beforehand
SCHEMA: FeatureSchema = LOAD.SCHEMA  # x0 … x9: the 20 KB models (channel x0)
SCHEMA_BIG = FeatureSchema.numeric(["b0", *(f"x{i}" for i in range(1, 10))], lower=0.0, upper=1.0)
HIDDEN = {"20k": 400, "1m": 20000}  # 10 → hidden → 2 float32 MLPs
CHANNEL = {"20k": "x0", "1m": "b0"}
BIG_SEED = 10  # 1 MB models published before the first size, so that the 1 MB feed has some
DELTA = 1e-5
API = "/api/2.0/mlflow"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts"
# A hand-written pickle that would call os.system("echo pwned") if unpickled (never done here).
PICKLE_OS_SYSTEM = b"cos\nsystem\n(S'echo pwned'\ntR."


class Skipped(Exception):
    """A system or variant that cannot run here (said in the table, not a crash)."""


# ---- artifacts ------------------------------------------------------------------------------
@dataclass
class Item:
    """One model to publish: its site, artifact, channel and payload kind."""

    site: str
    art: Artifact
    card_json: str
    channel: str
    payload: str


class Maker:
    """Distinct signed MLP artifacts of 20 KB or 1 MB, round-robin over the publisher sites.

    One random network per payload kind; each artifact sets one output bias to a number of its
    own, so every artifact's weights (and SHA-256) differ at the cost of serializing them.
    """

    def __init__(self, keys: dict[str, Any], seed: int) -> None:
        self.keys = keys
        self.sites = sorted(keys)
        self.turn = 0
        self.counter = 0
        self.rng = np.random.default_rng(seed)
        eps = compute_epsilon(LOAD.EVENTS, DELTA)
        self.record = PrivacyRecord.from_events(
            LOAD.EVENTS, epsilon=eps, delta=DELTA, accountant="pld", noise="secure"
        )
        self.layers: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}

    def _base(self, payload: str) -> list[tuple[np.ndarray, np.ndarray]]:
        if payload not in self.layers:
            h = HIDDEN[payload]
            self.layers[payload] = [
                (self.rng.normal(size=(h, 10)), self.rng.normal(size=h)),
                (self.rng.normal(size=(2, h)), self.rng.normal(size=2)),
            ]
        return self.layers[payload]

    def weights(self, payload: str) -> bytes:
        layers = self._base(payload)
        self.counter += 1
        layers[1][1][0] = self.counter / 1024.0  # exact in float32: distinct bytes
        return mlp_to_safetensors(layers)

    def make(self, payload: str, n: int) -> list[Item]:
        schema = SCHEMA if payload == "20k" else SCHEMA_BIG
        arch = MLPArchitecture(
            layer_sizes=[10, HIDDEN[payload], 2], activation="tanh", output_activation="softmax"
        )
        out = []
        for _ in range(n):
            site = self.sites[self.turn % len(self.sites)]
            self.turn += 1
            art = make_artifact(
                self.weights(payload),
                format="safetensors",
                publisher=site,
                schema=schema,
                classes=[0, 1],
                privacy=self.record,
                signing_key=self.keys[site],
                architecture=arch,
            )
            out.append(Item(site, art, art.card.to_json(), CHANNEL[payload], payload))
        return out


def multipart(card_json: str, weights: bytes, filename: str = "w") -> tuple[bytes, str]:
    """The body and content type of our publish request (parts ``card`` and ``weights``)."""
    boundary = "b" + uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="card"\r\n\r\n'.encode()
        + card_json.encode()
        + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="weights"; '
        f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
        + weights
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


# ---- processes and databases ----------------------------------------------------------------
def tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


@dataclass
class Server:
    """A server subprocess, leader of its own process group (its workers die with it)."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        group = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)  # a member of the group is still there
            except ProcessLookupError:
                break
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait()


def start_server(
    cmd: list[str], env: dict[str, str], cwd: Path, health: str, timeout: float = 180.0
) -> Server:
    """Start ``cmd`` (its ``--port`` already chosen) and wait until ``health`` answers 200."""
    port = int(cmd[cmd.index("--port") + 1])
    log = cwd / f"server-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Server(proc, port, log)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(server.base + health, timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            server.stop()
            raise Skipped(f"the server exited with status {proc.returncode}: {tail(log, 1500)}")
        if time.monotonic() > deadline:
            server.stop()
            raise Skipped(f"the server did not answer in {timeout:g} s: {tail(log, 1500)}")
        time.sleep(0.25)


class Postgres:
    """Databases on the PostgreSQL server at 127.0.0.1:5432, each dropped by :meth:`close`."""

    def __init__(self) -> None:
        import psycopg

        self.conn: Any = None
        self.user = ""
        for user in ("postgres", "root"):
            try:
                self.conn = psycopg.connect(
                    host="127.0.0.1", user=user, dbname="test", autocommit=True, connect_timeout=3
                )
            except psycopg.Error:
                continue
            self.user = user
            break
        self.created: list[str] = []

    @property
    def available(self) -> bool:
        return self.conn is not None

    def create(self, label: str) -> str:
        name = f"bench_{label}_{secrets.token_hex(5)}"
        self.conn.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return name

    def url(self, name: str) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:5432/{name}"

    def analyze(self, name: str) -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", user=self.user, dbname=name, autocommit=True
        ) as conn:
            conn.execute("ANALYZE")

    def drop(self, name: str) -> None:
        self.conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.created.remove(name)

    def close(self) -> None:
        if self.conn is None:
            return
        for name in list(self.created):
            try:
                self.drop(name)
            except Exception as exc:  # report and go on dropping the others
                print(f"  could not drop database {name}: {exc}", flush=True)
        self.conn.close()
        self.conn = None


@dataclass
class Backend:
    """Where one system keeps its data: a SQLite file, or a PostgreSQL database of its own."""

    kind: str  # "sqlite" or "postgresql"
    workdir: Path
    pg: Postgres | None = None
    dbname: str = ""
    sqlite_path: Path | None = None

    @classmethod
    def make(cls, kind: str, label: str, workdir: Path, pg: Postgres | None) -> Backend:
        workdir.mkdir(parents=True, exist_ok=True)
        if kind == "sqlite":
            return cls(kind, workdir, sqlite_path=workdir / f"{label}.db")
        assert pg is not None
        return cls(kind, workdir, pg=pg, dbname=pg.create(label))

    @property
    def url(self) -> str:
        if self.sqlite_path is not None:
            return f"sqlite:///{self.sqlite_path}"
        assert self.pg is not None
        return self.pg.url(self.dbname)

    def analyze(self) -> None:
        if self.sqlite_path is not None:
            conn = sqlite3.connect(self.sqlite_path, timeout=60)
            try:
                conn.execute("ANALYZE")
            finally:
                conn.close()
        elif self.pg is not None:
            self.pg.analyze(self.dbname)

    def close(self) -> None:
        if self.pg is not None and self.dbname in self.pg.created:
            self.pg.drop(self.dbname)


# ---- the two systems ------------------------------------------------------------------------
class Failures:
    """The first failed request of a measurement, kept to be reported with it."""

    failure = ""

    def failed(self, step: str, r: httpx.Response) -> bool:
        if not self.failure:
            self.failure = f"{step} {r.status_code}: {r.text[:300]}"
        return False


Op = Callable[[httpx.AsyncClient], Awaitable[tuple[bool, int] | None]]


class Ours(Failures):
    """Our registry: ``python -m pubsubml.cli.registry serve`` on ``backend``."""

    health = "/v1/health"
    requests: ClassVar[dict[str, int]] = {"publish": 1, "fetch": 2}

    def __init__(self, backend: Backend, store: str, workers: int) -> None:
        self.backend = backend
        self.store = store
        self.name = f"ours-{store}"
        self.workers = workers
        self.server: Server | None = None
        self.tokens: dict[str, str] = {}
        self.keys: dict[str, Any] = {}
        self.subs: dict[str, str] = {}
        self.sub_auth: dict[str, str] = {}
        self.count = {ch: 0 for ch in CHANNEL.values()}
        self.cursors: dict[str, list[int]] = {ch: [0] for ch in CHANNEL.values()}

    def command(self, variant: str) -> list[str]:
        store = "database" if self.store == "database" else str(self.backend.workdir / "store")
        serve = [
            "serve",
            "--db",
            self.backend.url,
            "--store",
            store,
            "--port",
            str(LOAD.free_port()),
            "--log-level",
            "error",
            "--workers",
            str(self.workers),
        ]
        if variant == "checked":
            return [sys.executable, "-m", "pubsubml.cli.registry", *serve]
        return [sys.executable, str(Path(__file__).resolve()), "--serve-unchecked", variant, *serve]

    def start(self, variant: str = "checked") -> None:
        from pubsubml.registry.infrastructure.database import Database
        from pubsubml.registry.migrate import upgrade

        if self.server is None:
            db = Database(self.backend.url)
            try:
                upgrade(db)
            finally:
                db.dispose()
        else:
            self.stop()
        env = {**os.environ, "PUBSUBML_ADMIN_TOKEN": ADMIN}
        env.pop(UNCHECKED_ENV, None)
        # The server's folder is its working directory: a server without a database store takes
        # `--store database` for a folder name and makes it there, which is how it is detected.
        self.server = start_server(self.command(variant), env, self.backend.workdir, self.health)
        if self.store == "database" and (self.backend.workdir / "database" / "objects").is_dir():
            self.stop()
            raise Skipped(
                "this server has no database artifact store: it took `--store database` for a "
                "folder name"
            )

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def setup(self) -> None:
        from pubsubml.registry.client import RegistryClient

        assert self.server is not None
        base = self.server.base
        admin = RegistryClient(base, ADMIN)
        try:
            self.keys, self.tokens = LOAD.register_publishers(admin, N_PUBLISHERS)
            admin.add_features(SCHEMA_BIG.features)
            token = admin.add_site(
                "sub00", roles="subscriber", epsilon_budget=1, delta_budget=DELTA
            )["token"]
        finally:
            admin.close()
        self.sub_auth = {"Authorization": f"Bearer {token}"}
        sub = RegistryClient(base, token)
        try:
            for channel in CHANNEL.values():
                self.subs[channel] = sub.subscribe("sub00", channel, task="classification")
        finally:
            sub.close()

    def total(self) -> int:
        return sum(self.count.values())

    async def publish(self, client: httpx.AsyncClient, item: Item, variant: str) -> bool:
        body, ctype = multipart(item.card_json, item.art.weights)
        r = await client.post(
            "/v1/models",
            content=body,
            headers={"Authorization": f"Bearer {self.tokens[item.site]}", "Content-Type": ctype},
        )
        if r.status_code != 201:
            return self.failed("POST /v1/models", r)
        self.count[item.channel] += 1
        return True

    async def refresh(self, client: httpx.AsyncClient) -> None:
        """Read each feed after the last cursor known (untimed): the cursors a fetch starts at."""
        for channel, sub in self.subs.items():
            while True:
                r = await client.get(
                    f"/v1/subscriptions/{sub}/models",
                    params={"after": self.cursors[channel][-1], "limit": 1000},
                    headers=self.sub_auth,
                )
                r.raise_for_status()
                items = r.json()["items"]
                if not items:
                    break
                self.cursors[channel].extend(int(i["cursor"]) for i in items)

    def has_feed(self, channel: str) -> bool:
        return len(self.cursors[channel]) > 1

    async def fetch(
        self, client: httpx.AsyncClient, channel: str, rng: np.random.Generator
    ) -> tuple[bool, int]:
        cursors = self.cursors[channel]
        after = cursors[int(rng.integers(max(1, len(cursors) - 10)))]
        r = await client.get(
            f"/v1/subscriptions/{self.subs[channel]}/models",
            params={"after": after, "limit": 10},
            headers=self.sub_auth,
        )
        if r.status_code != 200:
            return self.failed("GET feed", r), 0
        items = r.json()["items"]
        if not items:
            self.failure = self.failure or "GET feed: no item"
            return False, 0
        w = await client.get(f"/v1/models/{items[0]['model_id']}/weights", headers=self.sub_auth)
        if w.status_code != 200 or not w.content:
            return self.failed("GET weights", w), len(items)
        return True, len(items)


def artifact_url(source: str) -> str:
    """The artifact proxy's URL path of an ``mlflow-artifacts:`` URI."""
    return ARTIFACTS + quote(urlparse(source).path)


def error_code(r: httpx.Response) -> str:
    """``error_code`` of MLflow's error bodies, ``error`` of ours, ``-`` when there is none."""
    if r.status_code < 400:
        return "-"
    try:
        body = r.json()
    except ValueError:
        return "-"
    if isinstance(body, dict):
        return str(body.get("error_code") or body.get("error") or "-")
    return "-"


class MLflow(Failures):
    """MLflow's tracking server and model registry, ``mlflow server`` from its own venv."""

    name = "mlflow"
    health = "/health"
    requests: ClassVar[dict[str, int]] = {"new-run": 3, "reuse-run": 2, "fetch": 2}

    def __init__(self, backend: Backend, venv: Path, workers: int) -> None:
        self.backend = backend
        self.venv = venv
        self.workers = workers
        self.server: Server | None = None
        self.experiment = ""
        self.sites = [f"pub{i:02d}" for i in range(N_PUBLISHERS)]
        self.runs: dict[str, tuple[str, str]] = {}  # site → (run id, artifact URI) for reuse-run
        self.count = {ch: 0 for ch in CHANNEL.values()}
        self.versions: dict[str, list[int]] = {ch: [] for ch in CHANNEL.values()}

    def start(self) -> None:
        artifacts = self.backend.workdir / "mlartifacts"
        artifacts.mkdir(exist_ok=True)
        cmd = [
            str(self.venv / "bin" / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(LOAD.free_port()),
            "--workers",
            str(self.workers),
            "--backend-store-uri",
            self.backend.url,
            "--serve-artifacts",
            "--artifacts-destination",
            artifacts.as_uri(),
            "--uvicorn-opts",
            "--no-access-log",
        ]
        env = {
            **os.environ,
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "true",
            # The job runner (huey consumers for GenAI jobs) has no part in the model registry.
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        }
        for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
            env.pop(name, None)
        self.server = start_server(cmd, env, self.backend.workdir, self.health, timeout=300)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def setup(self) -> None:
        assert self.server is not None
        with httpx.Client(base_url=self.server.base, timeout=60) as client:
            r = client.post(f"{API}/experiments/create", json={"name": "registry-vs-mlflow"})
            r.raise_for_status()
            self.experiment = str(r.json()["experiment_id"])
            for site in self.sites:
                client.post(
                    f"{API}/registered-models/create", json={"name": site}
                ).raise_for_status()
                r = client.post(
                    f"{API}/runs/create",
                    json={"experiment_id": self.experiment, "start_time": int(time.time() * 1000)},
                )
                r.raise_for_status()
                info = r.json()["run"]["info"]
                self.runs[site] = (info["run_id"], info["artifact_uri"])

    def total(self) -> int:
        return sum(self.count.values())

    @staticmethod
    def tags(item: Item) -> list[dict[str, str]]:
        card = item.art.card
        return [
            {"key": "card", "value": item.card_json},
            {"key": "channel", "value": item.channel},
            {"key": "publisher", "value": item.site},
            {"key": "weights_sha256", "value": card.weights_sha256},
            {"key": "epsilon", "value": repr(card.privacy.epsilon)},
        ]

    async def publish(self, client: httpx.AsyncClient, item: Item, variant: str) -> bool:
        if variant == "reuse-run":
            run_id, root = self.runs[item.site]
            source = f"{root}/{uuid.uuid4().hex}/model.safetensors"
        else:
            r = await client.post(
                f"{API}/runs/create",
                json={"experiment_id": self.experiment, "start_time": int(time.time() * 1000)},
            )
            if r.status_code != 200:
                return self.failed("POST runs/create", r)
            info = r.json()["run"]["info"]
            run_id, source = info["run_id"], f"{info['artifact_uri']}/weights/model.safetensors"
        r = await client.put(artifact_url(source), content=item.art.weights)
        if r.status_code != 200:
            return self.failed("PUT artifact", r)
        r = await client.post(
            f"{API}/model-versions/create",
            json={"name": item.site, "source": source, "run_id": run_id, "tags": self.tags(item)},
        )
        if r.status_code != 200:
            return self.failed("POST model-versions/create", r)
        bisect.insort(self.versions[item.channel], int(r.json()["model_version"]["version"]))
        self.count[item.channel] += 1
        return True

    async def refresh(self, client: httpx.AsyncClient) -> None:
        """Nothing to read: the version numbers come from the publishes' answers."""

    def has_feed(self, channel: str) -> bool:
        return bool(self.versions[channel])

    async def fetch(
        self, client: httpx.AsyncClient, channel: str, rng: np.random.Generator
    ) -> tuple[bool, int]:
        versions = self.versions[channel]
        after = versions[int(rng.integers(max(1, len(versions) - 10)))] - 1
        r = await client.get(
            f"{API}/model-versions/search",
            params=[
                ("filter", f"tags.channel = '{channel}' AND version_number > {after}"),
                ("max_results", "10"),
                ("order_by", "version_number ASC"),
                ("order_by", "name ASC"),
            ],
        )
        if r.status_code != 200:
            return self.failed("GET model-versions/search", r), 0
        found = r.json().get("model_versions", [])
        if not found:
            self.failure = self.failure or "GET model-versions/search: no version"
            return False, 0
        w = await client.get(artifact_url(found[0]["source"]))
        if w.status_code != 200 or not w.content:
            return self.failed("GET artifact", w), len(found)
        return True, len(found)


System = Ours | MLflow


# ---- driving --------------------------------------------------------------------------------
_CLIENT_BACKEND = re.compile(rb"\(\d+\)|\[local\]")


def cpu_snapshot(server_pid: int, dbname: str) -> dict[int, tuple[str, float]] | None:
    """CPU seconds (user + system) so far of each process that serves: the server's process
    tree (``validation`` for our validation workers, ``server`` for the rest) and PostgreSQL's
    (``database``: its postmaster and background processes, and the backends connected to
    ``dbname``; the server is shared, other databases' backends are left out).  None where
    /proc cannot be read.  As registry_load.py's ``cpu_seconds``, per process, so that a
    process that ends between two snapshots (another client's connection) takes nothing away.
    """
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    seen: dict[int, tuple[str, bytes, float]] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ")
        except OSError:  # ended meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        parent[pid] = int(fields[1])
        seen[pid] = (name, cmdline, (int(fields[11]) + int(fields[12])) / tick)
    word = f" {dbname} ".encode() if dbname else None
    out: dict[int, tuple[str, float]] = {}
    for pid, (name, cmdline, seconds) in seen.items():
        if name == "postgres":
            if not _CLIENT_BACKEND.search(cmdline) or (word is not None and word in cmdline):
                out[pid] = ("database", seconds)
            continue
        ancestor = pid
        while ancestor not in (server_pid, 0, 1) and ancestor in parent:
            ancestor = parent[ancestor]
        if ancestor == server_pid:
            kind = "validation" if b"validation_worker" in cmdline else "server"
            out[pid] = (kind, seconds)
    return out


def cpu_per_op(
    before: dict[int, tuple[str, float]] | None,
    after: dict[int, tuple[str, float]] | None,
    stats: dict[str, float],
) -> None:
    """Each kind's CPU milliseconds per operation between two :func:`cpu_snapshot` into ``stats``
    (processes started meanwhile count from zero, ended ones are not seen)."""
    totals = {"server": 0.0, "validation": 0.0, "database": 0.0}
    if before is not None and after is not None:
        for pid, (kind, seconds) in after.items():
            start = before.get(pid)
            earlier = start[1] if start is not None and start[1] <= seconds else 0.0
            totals[kind] += seconds - earlier
    for kind, seconds in totals.items():
        ok = before is not None and after is not None and stats["n"]
        stats[f"cpu_{kind}"] = 1000 * seconds / stats["n"] if ok else float("nan")


async def drive(
    system: System, level: int, op: Op, seconds: float, cap: int, cpu: bool = True
) -> dict[str, float]:
    """Run ``op`` on ``level`` concurrent tasks over one keep-alive pool until the time, the
    count or the operations run out; throughput, latency, failures, CPU per operation."""
    assert system.server is not None
    system.failure = ""
    limits = httpx.Limits(
        max_connections=level, max_keepalive_connections=level, keepalive_expiry=120
    )
    async with httpx.AsyncClient(
        base_url=system.server.base, http1=True, http2=False, limits=limits, timeout=300
    ) as client:
        # Open the pool's connections before the clock starts.
        await asyncio.gather(*(client.get(system.health) for _ in range(level)))
        latencies: list[float] = []
        items: list[int] = []
        errors = 0
        started = 0
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal errors, started
            while time.perf_counter() < deadline and started < cap:
                started += 1
                t0 = time.perf_counter()
                try:
                    result = await op(client)
                except httpx.HTTPError:
                    result = (False, 0)
                if result is None:
                    return
                latencies.append(time.perf_counter() - t0)
                ok, n = result
                items.append(n)
                if not ok:
                    errors += 1

        dbname = system.backend.dbname
        before = cpu_snapshot(system.server.pid, dbname) if cpu else None
        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker() for _ in range(level)))
        elapsed, client_cpu = time.perf_counter() - t0, time.process_time() - c0
        after = cpu_snapshot(system.server.pid, dbname) if cpu else None
    ms = sorted(x * 1000 for x in latencies)
    stats: dict[str, float] = {
        "n": len(ms),
        "seconds": elapsed,
        "rps": len(ms) / elapsed if elapsed > 0 else float("nan"),
        "p50": statistics.median(ms) if ms else float("nan"),
        "p99": ms[min(len(ms) - 1, int(0.99 * len(ms)))] if ms else float("nan"),
        "errors": errors,
        "items": statistics.fmean(items) if items else float("nan"),
        "cpu_client": 1000 * client_cpu / len(ms) if ms else float("nan"),
    }
    cpu_per_op(before, after, stats)
    if system.backend.kind != "postgresql":
        stats["cpu_database"] = float("nan")  # PostgreSQL is not this system's database
    return stats


def publish_op(system: System, items: Sequence[Item], variant: str) -> Op:
    it = iter(items)

    async def op(client: httpx.AsyncClient) -> tuple[bool, int] | None:
        item = next(it, None)
        if item is None:
            return None
        return await system.publish(client, item, variant), 1

    return op


def fetch_op(system: System, channel: str, seed: int) -> Op:
    rng = np.random.default_rng(seed)

    async def op(client: httpx.AsyncClient) -> tuple[bool, int] | None:
        return await system.fetch(client, channel, rng)

    return op


async def grow(system: System, maker: Maker, payload: str, target: int, label: str) -> None:
    """Publish distinct models of ``payload``, 8 at a time, until its channel holds ``target``."""
    channel = CHANNEL[payload]
    if system.count[channel] >= target:
        return
    t0 = time.perf_counter()
    while system.count[channel] < target:
        n = min(GROW_BATCH, target - system.count[channel])
        batch = maker.make(payload, n)
        stats = await drive(
            system, GROW_LEVEL, publish_op(system, batch, "new-run"), 3600.0, n, cpu=False
        )
        if stats["errors"] == stats["n"]:
            raise RuntimeError(f"{label}: none of {n} growth publishes succeeded: {system.failure}")
    print(
        f"  [{label}] {system.count[channel]} models of {payload} on channel {channel} "
        f"({time.perf_counter() - t0:.0f} s, untimed)",
        flush=True,
    )


# ---- one system through all sizes -----------------------------------------------------------
@dataclass
class Run:
    """What one invocation measures, and what it found."""

    args: argparse.Namespace
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    hostile: list[dict[str, Any]] = field(default_factory=list)

    def record(
        self,
        backend: str,
        size: int,
        system: System,
        variant: str,
        op: str,
        payload: str,
        level: int,
        models: int,
        stats: dict[str, float],
        repeat: int = 0,
    ) -> None:
        if isinstance(system, MLflow):
            per_op = system.requests["fetch" if op == "fetch" else variant]
        else:
            per_op = system.requests[op]
        row = {
            "backend": backend,
            "size": size,
            "models": models,
            "system": system.name,
            "variant": variant,
            "op": op,
            "payload": payload,
            "level": level,
            "repeat": repeat,
            "requests_per_op": per_op,
            **stats,
            "first_failure": system.failure,
        }
        self.rows.append(row)
        print(
            f"  {backend:<10} size {size:<6} {system.name:<13} {variant:<27} {op:<7} {payload:<3} "
            f"×{level:<3} #{repeat} {stats['rps']:8.1f} op/s  p50 {stats['p50']:8.2f} ms  "
            f"p99 {stats['p99']:8.2f} ms  {int(stats['errors'])} failed of {int(stats['n'])}",
            flush=True,
        )
        if system.failure:
            print(f"    first failure: {system.failure}", flush=True)

    def skip(self, backend: str, system: str, variant: str, reason: str) -> None:
        self.skipped.append(
            {"backend": backend, "system": system, "variant": variant, "reason": reason}
        )
        print(f"  [{backend} {system} {variant}] skipped: {reason}", flush=True)


def publish_cap(args: argparse.Namespace, payload: str, payload_bytes: dict[str, int]) -> int:
    return max(1, min(args.max_publishes, PUBLISH_BYTES_CAP // payload_bytes[payload]))


def _turns(systems: Sequence[Any], repeat: int) -> list[Any]:
    """``systems`` starting with a different one at each repeat (no system always goes first)."""
    k = repeat % len(systems) if systems else 0
    return [*systems[k:], *systems[:k]]


async def measure_publish(
    run: Run,
    backend: str,
    size: int,
    system: System,
    maker: Maker,
    variant: str,
    payload: str,
    level: int,
    cap: int,
    repeat: int,
) -> None:
    """One publish measurement of ``cap`` distinct models made beforehand, recorded."""
    batch = maker.make(payload, cap)
    models = system.total()
    stats = await drive(system, level, publish_op(system, batch, variant), run.args.seconds, cap)
    run.record(backend, size, system, variant, "publish", payload, level, models, stats, repeat)


async def bench_size(
    run: Run,
    backend: str,
    systems: Sequence[tuple[System, Maker]],
    index: int,
    size: int,
    payload_bytes: dict[str, int],
) -> None:
    """Every measurement at ``size`` models, the systems taking turns: each measurement is run
    ``--repeats`` times, and within a repeat every system once, so that drifts of the shared
    machine's speed fall on all systems alike (a ratio compares measurements seconds apart)."""
    args = run.args
    for system, maker in systems:
        label = f"{backend} {system.name}"
        await grow(system, maker, "20k", size, label)
        if index == 0 and "1m" in args.payloads:
            await grow(system, maker, "1m", BIG_SEED, label)
        system.backend.analyze()
        assert system.server is not None
        async with httpx.AsyncClient(base_url=system.server.base, timeout=300) as client:
            await system.refresh(client)
    seed = 1000 * index
    for payload in args.payloads:
        channel = CHANNEL[payload]
        ready = []
        for system, _ in systems:
            if system.has_feed(channel):
                ready.append(system)
            else:
                run.skip(backend, system.name, f"fetch {payload}", "no model on its channel")
        for level in args.levels:
            for repeat in range(args.repeats):
                for system in _turns(ready, repeat):
                    seed += 1
                    models = system.total()
                    stats = await drive(
                        system,
                        level,
                        fetch_op(system, channel, seed),
                        args.seconds,
                        args.max_fetches,
                    )
                    run.record(
                        backend, size, system, "-", "fetch", payload, level, models, stats, repeat
                    )
    for payload in args.payloads:
        cap = publish_cap(args, payload, payload_bytes)
        for level in args.levels:
            for repeat in range(args.repeats):
                for system, maker in _turns(systems, repeat):
                    variants = (
                        ["new-run", "reuse-run"] if isinstance(system, MLflow) else ["checked"]
                    )
                    for variant in variants:
                        await measure_publish(
                            run, backend, size, system, maker, variant, payload, level, cap, repeat
                        )
    if index == 0 and args.unchecked:
        for system, maker in systems:
            if isinstance(system, Ours):
                await bench_unchecked(run, backend, system, maker, size, payload_bytes)


async def bench_unchecked(
    run: Run,
    backend: str,
    system: Ours,
    maker: Maker,
    size: int,
    payload_bytes: dict[str, int],
) -> None:
    """Our publish with the signature check, then the validation too, switched off (20 KB)."""
    args = run.args
    payload = "20k"
    cap = publish_cap(args, payload, payload_bytes)
    try:
        for variant in UNCHECKED:
            try:
                system.start(variant)
            except Skipped as exc:
                run.skip(backend, system.name, variant, str(exc))
                continue
            await warm(system, maker, variant)
            for level in args.levels:
                for repeat in range(args.repeats):
                    await measure_publish(
                        run, backend, size, system, maker, variant, payload, level, cap, repeat
                    )
    finally:
        system.start("checked")
    await warm(system, maker, "checked")


async def warm(system: Ours, maker: Maker, variant: str) -> None:
    """After a start: 8 publishes per server process, 8 at a time, untimed (each validation
    worker computes ε of the benchmark's DP configuration once, 0.2-0.7 s of a core); they are
    models of the first size."""
    n = GROW_LEVEL * system.workers
    batch = maker.make("20k", n)
    stats = await drive(system, GROW_LEVEL, publish_op(system, batch, variant), 300.0, n, cpu=False)
    if stats["errors"]:
        raise RuntimeError(f"{system.name} {variant}: warm-up publishes failed: {system.failure}")


async def bench_backend(
    run: Run, backend: str, tmp: Path, venv: Path | None, payload_bytes: dict[str, int]
) -> None:
    """Start every system on ``backend`` (each its own database), then measure them size by
    size, taking turns (:func:`bench_size`)."""
    args = run.args
    pg: Postgres | None = None
    if backend == "postgresql":
        pg = Postgres()
        if not pg.available:
            run.skip(backend, "*", "*", "no PostgreSQL server answers on 127.0.0.1:5432")
            return
    systems: list[tuple[System, Maker]] = []
    stores: list[Backend] = []
    try:
        names = [f"ours-{s}" for s in args.our_stores] + ([] if venv is None else ["mlflow"])
        for name in names:
            label = name.replace("-", "_")
            store = Backend.make(backend, label, tmp / f"{backend}-{name}", pg)
            stores.append(store)
            system: System
            if name == "mlflow":
                assert venv is not None
                system = MLflow(store, venv, args.workers)
            else:
                system = Ours(store, name.removeprefix("ours-"), args.workers)
            print(f"[{backend}] {name}: starting", flush=True)
            try:
                system.start()
                system.setup()
                keys = (
                    system.keys
                    if isinstance(system, Ours)
                    else {s: generate_signing_key() for s in system.sites}
                )
                maker = Maker(keys, seed=len(systems) + 7)
                if isinstance(system, Ours):
                    await warm(system, maker, "checked")
            except Skipped as exc:
                run.skip(backend, name, "*", str(exc))
                system.stop()
                continue
            systems.append((system, maker))
        for index, size in enumerate(args.sizes):
            await bench_size(run, backend, systems, index, size, payload_bytes)
    finally:
        for system, _ in systems:
            system.stop()
        for store in stores:
            store.close()
        if pg is not None:
            pg.close()


# ---- hostile files --------------------------------------------------------------------------
def _onnx(nodes: list[Any], initializers: list[Any], extra_domains: Sequence[str] = ()) -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        "hostile",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, 10])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [None, 2])],
        initializer=initializers,
    )
    opsets = [helper.make_opsetid("", 18)] + [helper.make_opsetid(d, 1) for d in extra_domains]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return bytes(model.SerializeToString())


def hostile_files() -> list[tuple[str, str, bytes]]:
    """(case, card format, bytes), built as tests/artifacts/test_onnx_safety.py and
    tests/registry/test_hostile_input.py build them (the tests are not imported)."""
    from onnx import TensorProto, helper, numpy_helper

    def weight() -> Any:
        return numpy_helper.from_array(np.ones((2, 10), np.float32), "w")

    external = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 10])
    external.data_location = TensorProto.EXTERNAL
    entry = external.external_data.add()
    entry.key, entry.value = "location", "../../etc/passwd"
    gemm = helper.make_node("Gemm", ["input", "w"], ["output"], transB=1)
    to_h = helper.make_node("Gemm", ["input", "w"], ["h"], transB=1)
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["x_in"], ["x_out"]),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [None, 2]),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [None, 2]),
        ],
    )
    rng = np.random.default_rng(0)
    nan_layers = [
        (rng.normal(size=(4, 10)), rng.normal(size=4)),
        (rng.normal(size=(2, 4)), np.zeros(2)),
    ]
    nan_layers[0][0][0, 0] = np.nan
    return [
        ("pickle calling os.system", "safetensors", PICKLE_OS_SYSTEM),
        ("ONNX external data ../../etc/passwd", "onnx", _onnx([gemm], [external])),
        (
            "ONNX custom operator domain",
            "onnx",
            _onnx(
                [to_h, helper.make_node("Exfiltrate", ["h"], ["output"], domain="com.evil")],
                [weight()],
                ["com.evil"],
            ),
        ),
        (
            "ONNX ConstantOfShape 16384×16384",
            "onnx",
            _onnx(
                [
                    to_h,
                    helper.make_node("ConstantOfShape", ["shape"], ["big"]),
                    helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
                    helper.make_node("Add", ["h", "s"], ["output"]),
                ],
                [weight(), numpy_helper.from_array(np.array([16384, 16384], np.int64), "shape")],
            ),
        ),
        (
            "ONNX Loop of 10^12 trips",
            "onnx",
            _onnx(
                [to_h, helper.make_node("Loop", ["trips", "cond", "h"], ["output"], body=body)],
                [
                    weight(),
                    numpy_helper.from_array(np.array(10**12, np.int64), "trips"),
                    numpy_helper.from_array(np.array(True), "cond"),
                ],
            ),
        ),
        ("safetensors with NaN weights", "safetensors", mlp_to_safetensors(nan_layers)),
        ("random bytes (4 KiB)", "safetensors", np.random.default_rng(1).bytes(4096)),
    ]


def resign(card: ModelCard, weights: bytes, key: Any) -> Artifact:
    """``card`` for ``weights``: their digest, the model id derived from it, a fresh signature
    (as the ``artifacts.resign`` helper of tests/registry/conftest.py does)."""
    from pubsubml.artifacts.card import derive_model_id

    digest = hashlib.sha256(weights).hexdigest()
    data = card.model_dump()
    data.update(
        weights_sha256=digest, model_id=derive_model_id(data["publisher"], digest), signature=None
    )
    return Artifact(card=sign_card(ModelCard.model_validate(data), key), weights=weights)


def good_cards(key: Any) -> dict[str, ModelCard]:
    """A valid safetensors card (10 → 4 → 2) and a valid ONNX card of site ``pub00``."""
    from pubsubml.artifacts.onnx_export import mlp_to_onnx

    rng = np.random.default_rng(5)
    layers = [
        (rng.normal(size=(4, 10)), rng.normal(size=4)),
        (rng.normal(size=(2, 4)), rng.normal(size=2)),
    ]
    eps = compute_epsilon(LOAD.EVENTS, DELTA)
    record = PrivacyRecord.from_events(
        LOAD.EVENTS, epsilon=eps, delta=DELTA, accountant="pld", noise="secure"
    )
    common: dict[str, Any] = {
        "publisher": "pub00",
        "schema": SCHEMA,
        "classes": [0, 1],
        "privacy": record,
        "signing_key": key,
    }
    arch = MLPArchitecture(layer_sizes=[10, 4, 2], activation="tanh", output_activation="softmax")
    st = make_artifact(
        mlp_to_safetensors(layers), format="safetensors", architecture=arch, **common
    )
    onnx_weights = mlp_to_onnx(layers, activation="tanh", output_activation="softmax")
    ox = make_artifact(onnx_weights, format="onnx", **common)
    return {"safetensors": st.card, "onnx": ox.card}


async def raw_request(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, str]:
    """A request whose request line carries ``path`` as written (httpx resolves ``..``); its
    status and MLflow error code."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 60)
    finally:
        writer.close()
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    found = re.search(rb'"error_code"\s*:\s*"([A-Z_]+)"', answer)
    return status, found.group(1).decode() if found else "-"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _step(name: str, status: int, code: str) -> dict[str, Any]:
    return {"step": name, "status": status, "code": code}


def _on_disk(root: Path, name: str, *candidates: Path) -> list[str]:
    """Files called ``name`` under ``root`` or at ``candidates`` (where a ``..`` would lead)."""
    found = {p.resolve() for p in root.rglob(name)}
    found |= {c.resolve() for c in candidates if c.resolve().exists()}
    return sorted(str(p) for p in found)


async def hostile_ours(run: Run, tmp: Path, cases: list[tuple[str, str, bytes]]) -> None:
    store = Backend.make("sqlite", "ours_hostile", tmp / "hostile-ours", None)
    ours = Ours(store, "files", 1)
    try:
        ours.start()
        ours.setup()
        key = ours.keys["pub00"]
        cards = good_cards(key)
        assert ours.server is not None
        auth = {"Authorization": f"Bearer {ours.tokens['pub00']}"}
        async with httpx.AsyncClient(base_url=ours.server.base, timeout=120) as client:
            jobs: list[tuple[str, Artifact, str]] = [
                (case, resign(cards[fmt], data, key), "w") for case, fmt, data in cases
            ]
            escape = f"escape-{secrets.token_hex(4)}.safetensors"
            valid = Maker(ours.keys, seed=3).make("20k", 1)[0].art
            jobs.append(("artifact path with ..", valid, f"../../../../{escape}"))
            for case, art, filename in jobs:
                body, ctype = multipart(art.card.to_json(), art.weights, filename)
                r = await client.post(
                    "/v1/models", content=body, headers={**auth, "Content-Type": ctype}
                )
                listed = await client.get(f"/v1/models/{art.card.model_id}", headers=auth)
                got = await client.get(f"/v1/models/{art.card.model_id}/weights", headers=auth)
                row: dict[str, Any] = {
                    "case": case,
                    "system": "ours",
                    "steps": [_step("POST /v1/models", r.status_code, error_code(r))],
                    "detail": r.json().get("detail", "") if r.status_code >= 400 else "",
                    "listed": listed.status_code == 200,
                    "downloadable": got.status_code == 200,
                    "identical": _sha(got.content) == _sha(art.weights)
                    if got.status_code == 200
                    else None,
                }
                if filename != "w":
                    found = _on_disk(
                        tmp,
                        escape,
                        store.workdir / "store" / filename,
                        store.workdir / "store" / "tmp" / filename,
                        store.workdir / filename,
                    )
                    row["note"] = (
                        f"multipart filename {filename!r}; files of that name on disk: "
                        f"{len(found)}" + (f" {found}" if found else "")
                    )
                run.hostile.append(row)
    finally:
        ours.stop()
        store.close()


async def hostile_mlflow(
    run: Run, tmp: Path, venv: Path, cases: list[tuple[str, str, bytes]]
) -> None:
    store = Backend.make("sqlite", "mlflow_hostile", tmp / "hostile-mlflow", None)
    peer = MLflow(store, venv, 1)
    try:
        peer.start()
        peer.setup()
        assert peer.server is not None
        run_id, root = peer.runs["pub00"]
        async with httpx.AsyncClient(base_url=peer.server.base, timeout=120) as client:
            for i, (case, _fmt, data) in enumerate(cases):
                source = f"{root}/hostile/{i}/weights.bin"
                put = await client.put(artifact_url(source), content=data)
                create = await client.post(
                    f"{API}/model-versions/create",
                    json={"name": "pub00", "source": source, "run_id": run_id},
                )
                version = (
                    create.json()["model_version"]["version"] if create.status_code == 200 else ""
                )
                listed = False
                if version:
                    mv = await client.get(
                        f"{API}/model-versions/get", params={"name": "pub00", "version": version}
                    )
                    listed = mv.status_code == 200
                got = await client.get(artifact_url(source))
                run.hostile.append(
                    {
                        "case": case,
                        "system": "mlflow",
                        "steps": [
                            _step("PUT artifact", put.status_code, error_code(put)),
                            _step("model-versions/create", create.status_code, error_code(create)),
                        ],
                        "listed": listed,
                        "downloadable": got.status_code == 200,
                        "identical": _sha(got.content) == _sha(data)
                        if got.status_code == 200
                        else None,
                    }
                )
            # A path with "..": written as is in the request line, and percent-encoded; an upload
            # there, a model version whose source holds it, and reads of the SQLite database file
            # next to the artifact root (workdir/mlartifacts) through it.
            port = peer.server.port
            escape = f"escape-{secrets.token_hex(4)}.bin"
            data = b"written outside the artifact root?"
            run_path = urlparse(root).path
            literal = f"{ARTIFACTS}{run_path}/../../../../{escape}"
            encoded = f"{ARTIFACTS}{run_path}/" + "%2e%2e%2f" * 4 + escape
            steps = [
                _step("PUT …/../../../../" + escape, *await raw_request(port, "PUT", literal, data))
            ]
            enc = await client.put(encoded, content=data)
            steps.append(_step("PUT …/(%2e%2e%2f)×4" + escape, enc.status_code, error_code(enc)))
            create = await client.post(
                f"{API}/model-versions/create",
                json={"name": "pub00", "source": f"{root}/../../../../{escape}", "run_id": run_id},
            )
            steps.append(
                _step("model-versions/create source …/../", create.status_code, error_code(create))
            )
            db_name = store.sqlite_path.name if store.sqlite_path else ""
            status, code = await raw_request(port, "GET", f"{ARTIFACTS}/../{db_name}")
            steps.append(_step(f"GET {ARTIFACTS}/../{db_name}", status, code))
            read = await client.get(f"{ARTIFACTS}/%2e%2e%2f{db_name}")
            steps.append(
                _step(f"GET {ARTIFACTS}/%2e%2e%2f{db_name}", read.status_code, error_code(read))
            )
            found = _on_disk(tmp, escape, store.workdir / escape)
            run.hostile.append(
                {
                    "case": "artifact path with ..",
                    "system": "mlflow",
                    "steps": steps,
                    "listed": create.status_code == 200,
                    "downloadable": any(s["status"] == 200 for s in steps[3:]),
                    "identical": None,
                    "note": f"files named {escape} on disk: {len(found)}"
                    + (f" {found}" if found else "")
                    + "; served: whether a GET through .. of the database file beside the "
                    "artifact root answered 200",
                }
            )
    finally:
        peer.stop()
        store.close()


async def bench_hostile(run: Run, tmp: Path, venv: Path | None) -> None:
    print("[hostile] the same hostile files to both registries (SQLite)", flush=True)
    cases = hostile_files()
    try:
        await hostile_ours(run, tmp, cases)
    except Skipped as exc:
        run.skip("sqlite", "ours-files", "hostile", str(exc))
    if venv is None:
        return
    try:
        await hostile_mlflow(run, tmp, venv, cases)
    except Skipped as exc:
        run.skip("sqlite", "mlflow", "hostile", str(exc))


# ---- MLflow's virtual environment -----------------------------------------------------------
def mlflow_venv(path: str | None) -> Path:
    """MLflow's venv: ``path``, else benchmarks/peers/mlflow/.venv, made or updated when it lacks
    the pinned requirements (a stamp in it holds their SHA-256)."""
    requirements = PEER / "requirements.txt"
    if path is not None:
        venv = Path(path).resolve()
        if not (venv / "bin" / "mlflow").exists():
            raise SystemExit(f"--mlflow-venv {path}: no bin/mlflow there")
        return venv
    venv = PEER / ".venv"
    stamp = venv / ".installed"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    if (venv / "bin" / "mlflow").exists() and stamp.exists() and stamp.read_text() == digest:
        return venv
    python = shutil.which("python3.11") or sys.executable
    steps = []
    if not (venv / "bin" / "python").exists():
        steps.append([python, "-m", "venv", str(venv)])
    steps.append(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip"]
    )
    steps.append(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(requirements)]
    )
    print(f"MLflow's virtual environment {venv} is missing or out of date:", flush=True)
    for cmd in steps:
        print("  $ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    stamp.write_text(digest)
    return venv


def versions(venv: Path) -> str:
    out = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from importlib.metadata import version as v; "
            "print(' '.join(f'{p} {v(p)}' for p in ('mlflow', 'uvicorn', 'SQLAlchemy', 'psycopg')))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or out.stderr.strip()[-200:]


# ---- the report -----------------------------------------------------------------------------
def _f(x: float | None, spec: str = ".1f") -> str:
    if x is None or x != x:  # None or NaN
        return "-"
    return format(x, spec)


def ratios(run: Run) -> dict[str, list[dict[str, Any]]]:
    """Ours / MLflow, growth from the first size to the last, database store / file store, and
    the unchecked variants / the checked publish: throughput ratios within this run."""
    repeats: dict[tuple[Any, ...], list[float]] = {}
    for r in run.rows:
        key = (
            r["backend"],
            r["size"],
            r["system"],
            r["variant"],
            r["op"],
            r["payload"],
            r["level"],
        )
        repeats.setdefault(key, []).append(float(r["rps"]))

    def rps(*key: Any) -> float | None:
        """The median throughput of the measurement's repeats."""
        found = repeats.get(key)
        return None if not found else statistics.median(found)

    def div(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b == 0 else a / b

    sizes = run.args.sizes
    args = run.args

    def order(k: tuple[str, int, str, str, int]) -> tuple[int, int, int, int, int]:
        backend, size, op, payload, level = k
        return (
            args.backends.index(backend) if backend in args.backends else 99,
            size,
            ("fetch", "publish").index(op),
            args.payloads.index(payload) if payload in args.payloads else 99,
            level,
        )

    comparison = []
    for b, size, op, payload, level in sorted(
        {(r["backend"], r["size"], r["op"], r["payload"], r["level"]) for r in run.rows},
        key=order,
    ):
        mlflow_variant = "new-run" if op == "publish" else "-"
        files = rps(
            b, size, "ours-files", "checked" if op == "publish" else "-", op, payload, level
        )
        database = rps(
            b, size, "ours-database", "checked" if op == "publish" else "-", op, payload, level
        )
        mlflow = rps(b, size, "mlflow", mlflow_variant, op, payload, level)
        reuse = rps(b, size, "mlflow", "reuse-run", op, payload, level) if op == "publish" else None
        comparison.append(
            {
                "backend": b,
                "size": size,
                "op": op,
                "payload": payload,
                "level": level,
                "ours_files": files,
                "ours_database": database,
                "mlflow": mlflow,
                "mlflow_reuse_run": reuse,
                "files_vs_mlflow": div(files, mlflow),
                "database_vs_mlflow": div(database, mlflow),
                "files_vs_mlflow_reuse_run": div(files, reuse),
                "database_vs_mlflow_reuse_run": div(database, reuse),
                "database_vs_files": div(database, files),
            }
        )
    growth = []
    if len(sizes) > 1:
        first, last = sizes[0], sizes[-1]
        for b, system, variant, op, payload, level in sorted(
            {
                (r["backend"], r["system"], r["variant"], r["op"], r["payload"], r["level"])
                for r in run.rows
            }
        ):
            at_first = rps(b, first, system, variant, op, payload, level)
            at_last = rps(b, last, system, variant, op, payload, level)
            if at_first is None or at_last is None:
                continue
            growth.append(
                {
                    "backend": b,
                    "system": system,
                    "variant": variant,
                    "op": op,
                    "payload": payload,
                    "level": level,
                    "first_size": first,
                    "last_size": last,
                    "rps_first": at_first,
                    "rps_last": at_last,
                    "last_vs_first": div(at_last, at_first),
                }
            )
    unchecked = []
    for key in sorted(k for k in repeats if k[3] in UNCHECKED):
        b, size, system, variant, _, payload, level = key
        checked = rps(b, size, system, "checked", "publish", payload, level)
        median = rps(*key)
        unchecked.append(
            {
                "backend": b,
                "size": size,
                "system": system,
                "variant": variant,
                "payload": payload,
                "level": level,
                "rps": median,
                "rps_checked": checked,
                "vs_checked": div(median, checked),
            }
        )
    return {"ours_vs_mlflow": comparison, "growth": growth, "unchecked_vs_checked": unchecked}


def report(run: Run, figures: dict[str, list[dict[str, Any]]]) -> None:
    if run.rows:
        measurements(run, figures)
    if run.hostile:
        print()
        print("hostile files (SQLite):")
        print(f"{'case':<37}{'system':<8}{'listed':<8}{'served':<8}{'identical':<10}steps")
        for h in run.hostile:
            steps = "; ".join(
                f"{st['step']} {st['status']}" + ("" if st["code"] == "-" else f" {st['code']}")
                for st in h["steps"]
            )
            print(
                f"{h['case']:<37}{h['system']:<8}{_yes(h['listed']):<8}"
                f"{_yes(h['downloadable']):<8}{_yes(h['identical']):<10}{steps}"
                + (f"; {h['note']}" if h.get("note") else "")
            )
        print(
            "steps: HTTP status and error code of each request; listed: the model (version) "
            "answers 200; served: its weights download with 200; identical: their SHA-256 "
            "equals the uploaded bytes' (-: nothing served)"
        )
    for s in run.skipped:
        print(f"skipped: {s['backend']} {s['system']} {s['variant']}: {s['reason'][:300]}")


def measurements(run: Run, figures: dict[str, list[dict[str, Any]]]) -> None:
    print()
    print(
        f"{'backend':<11}{'size':>6}{'models':>8}  {'system':<14}{'variant':<27}{'op':<8}"
        f"{'load':<5}{'clients':>7}{'#':>3}{'ops':>7}{'op/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'failed':>7}{'server':>9}{'valid.':>9}{'db':>9}{'client':>9}"
    )
    for r in run.rows:
        print(
            f"{r['backend']:<11}{r['size']:>6}{r['models']:>8}  {r['system']:<14}"
            f"{r['variant']:<27}{r['op']:<8}{r['payload']:<5}{r['level']:>7}{r['repeat']:>3}"
            f"{int(r['n']):>7}"
            f"{_f(r['rps']):>9}{_f(r['p50'], '.2f'):>9}{_f(r['p99'], '.2f'):>9}"
            f"{int(r['errors']):>7}{_f(r['cpu_server'], '.2f'):>9}{_f(r['cpu_validation'], '.2f'):>9}"
            f"{_f(r['cpu_database'], '.2f'):>9}{_f(r['cpu_client'], '.2f'):>9}"
        )
    print(
        "server / valid. / db / client: CPU milliseconds per operation of the server's process "
        "tree (less its validation workers), our validation workers, PostgreSQL (its own "
        "processes and the backends of the system's database) and this client (/proc); an "
        "MLflow publish is 3 requests (reuse-run 2), ours 1; a fetch is 2 for both"
    )
    print()
    print("throughput (op/s, median of the repeats) and ratios, same run:")
    print(
        f"{'backend':<11}{'size':>6}  {'op':<8}{'load':<5}{'clients':>7}{'files':>9}"
        f"{'database':>9}{'MLflow':>9}{'reuse':>9}{'files/ML':>10}{'db/ML':>8}"
        f"{'files/reuse':>12}{'db/reuse':>9}{'db/files':>9}"
    )
    for c in figures["ours_vs_mlflow"]:
        print(
            f"{c['backend']:<11}{c['size']:>6}  {c['op']:<8}{c['payload']:<5}{c['level']:>7}"
            f"{_f(c['ours_files']):>9}{_f(c['ours_database']):>9}{_f(c['mlflow']):>9}"
            f"{_f(c['mlflow_reuse_run']):>9}{_f(c['files_vs_mlflow'], '.2f'):>10}"
            f"{_f(c['database_vs_mlflow'], '.2f'):>8}{_f(c['files_vs_mlflow_reuse_run'], '.2f'):>12}"
            f"{_f(c['database_vs_mlflow_reuse_run'], '.2f'):>9}{_f(c['database_vs_files'], '.2f'):>9}"
        )
    print(
        "files / database: ours with the file / database artifact store; MLflow: a run per "
        "publish; reuse: MLflow uploading into one earlier run; X/Y: X's op/s over Y's"
    )
    if figures["growth"]:
        g0 = figures["growth"][0]
        print()
        print(f"growth: op/s at {g0['last_size']} models over op/s at {g0['first_size']}:")
        print(
            f"{'backend':<11}{'system':<14}{'variant':<12}{'op':<8}{'load':<5}{'clients':>7}"
            f"{'first':>9}{'last':>9}{'last/first':>11}"
        )
        for g in figures["growth"]:
            print(
                f"{g['backend']:<11}{g['system']:<14}{g['variant']:<12}{g['op']:<8}"
                f"{g['payload']:<5}{g['level']:>7}{_f(g['rps_first']):>9}{_f(g['rps_last']):>9}"
                f"{_f(g['last_vs_first'], '.2f'):>11}"
            )
    if figures["unchecked_vs_checked"]:
        print()
        print("our publish with checks switched off (benchmark-only launcher), same size:")
        print(
            f"{'backend':<11}{'size':>6}  {'system':<14}{'variant':<27}{'load':<5}{'clients':>7}"
            f"{'op/s':>9}{'checked':>9}{'ratio':>7}"
        )
        for u in figures["unchecked_vs_checked"]:
            print(
                f"{u['backend']:<11}{u['size']:>6}  {u['system']:<14}{u['variant']:<27}"
                f"{u['payload']:<5}{u['level']:>7}{_f(u['rps']):>9}{_f(u['rps_checked']):>9}"
                f"{_f(u['vs_checked'], '.2f'):>7}"
            )


def _yes(value: Any) -> str:
    return "-" if value is None else "yes" if value else "no"


# ---- the benchmark-only launcher of our server with checks switched off ---------------------
def patch_unchecked(variant: str) -> None:
    """Switch off, in this process, the signature check (and with ``no-signature-no-validation``
    the validation workers: the card's claimed ε is taken as is).  Benchmark only."""
    from pubsubml.artifacts.validation_pool import ValidationPool
    from pubsubml.registry.services import publish_checks

    def no_signature_check(card: ModelCard, trusted_keys: Any) -> None:
        return None

    publish_checks.verify_card = no_signature_check
    if variant == "no-signature-no-validation":

        def claimed_epsilon(
            self: ValidationPool,
            card: ModelCard,
            weights: bytes,
            *,
            site_delta: float,
            max_weights_bytes: int,
        ) -> float:
            return float(card.privacy.epsilon)

        def no_workers(self: ValidationPool) -> None:
            return None

        ValidationPool.validate = claimed_epsilon  # type: ignore[method-assign]
        ValidationPool.start = no_workers  # type: ignore[method-assign]


def serve_unchecked(variant: str, serve_args: list[str]) -> None:
    """``registry serve`` itself (the same settings, store and uvicorn run), patched first; with
    ``--workers`` > 1 uvicorn's spawned workers run this file as ``__mp_main__``, patched too."""
    if variant not in UNCHECKED:
        raise SystemExit(f"--serve-unchecked takes one of {', '.join(UNCHECKED)}")
    os.environ[UNCHECKED_ENV] = variant
    patch_unchecked(variant)
    from pubsubml.cli.registry.server import registry_app

    registry_app(serve_args, prog_name=f"registry_vs_mlflow.py --serve-unchecked {variant}")


if __name__ == "__mp_main__" and os.environ.get(UNCHECKED_ENV) in UNCHECKED:
    patch_unchecked(os.environ[UNCHECKED_ENV])


# ---- main -----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--sizes", default="10,1000,10000", help="Models registered (20 KB).")
    parser.add_argument("--levels", default="1,8,32", help="Concurrent operations.")
    parser.add_argument("--seconds", type=float, default=3.0, help="Upper bound per measurement.")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="Repeats of each measurement, the systems taking turns; ratios use the medians.",
    )
    parser.add_argument("--payloads", default="20k,1m", help="Weights sizes: 20k, 1m.")
    parser.add_argument(
        "--our-stores",
        default="files,database",
        help="Our artifact stores: files (a folder), database (`serve --store database`).",
    )
    parser.add_argument("--workers", type=int, default=1, help="Server processes, both systems.")
    parser.add_argument(
        "--max-publishes", type=int, default=400, help="Publishes per measurement at most."
    )
    parser.add_argument(
        "--max-fetches", type=int, default=5000, help="Fetches per measurement at most."
    )
    parser.add_argument(
        "--no-unchecked",
        dest="unchecked",
        action="store_false",
        help="Leave out our publish with the signature check / validation switched off.",
    )
    parser.add_argument("--skip-mlflow", action="store_true", help="Measure ours alone.")
    parser.add_argument("--mlflow-venv", help="An existing virtual environment with mlflow.")
    parser.add_argument(
        "--hostile", action="store_true", help="Also send the hostile files to both (SQLite)."
    )
    parser.add_argument(
        "--hostile-only", action="store_true", help="Only the hostile files, no measurement."
    )
    parser.add_argument(
        "--quick", action="store_true", help="Sizes 10, levels 1,8, 2 s, 20 KB only."
    )
    parser.add_argument("--json", help="Write every figure to this file.")
    parser.add_argument(
        "--serve-unchecked",
        metavar="VARIANT",
        help=f"Internal: run our server with checks off ({', '.join(UNCHECKED)}); the rest of "
        "the command line is `serve ...` as for `python -m pubsubml.cli.registry`.",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.levels, args.seconds, args.payloads = "10", "1,8", 2.0, "20k"
        args.repeats = 1
    args.backends = [b for b in args.backends.split(",") if b]
    args.sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    args.levels = [int(c) for c in args.levels.split(",") if c]
    args.payloads = [p for p in args.payloads.split(",") if p]
    args.our_stores = [s for s in args.our_stores.split(",") if s]
    for name, values, allowed in (
        ("--backends", args.backends, ("sqlite", "postgresql")),
        ("--payloads", args.payloads, tuple(HIDDEN)),
        ("--our-stores", args.our_stores, ("files", "database")),
    ):
        bad = [v for v in values if v not in allowed]
        if bad:
            parser.error(f"{name}: {bad} not among {list(allowed)}")
    if not args.sizes or min(args.sizes) < 1:
        parser.error("--sizes: positive model counts")
    if args.repeats < 1:
        parser.error("--repeats: at least 1")
    return args


async def amain(args: argparse.Namespace) -> Run:
    # SIGTERM and SIGINT cancel the run at its next await: the finally blocks on the way out stop
    # the servers and drop the databases.
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    run = Run(args)
    venv = None if args.skip_mlflow else mlflow_venv(args.mlflow_venv)
    payload_bytes = {p: len(Maker({"s": generate_signing_key()}, 0).weights(p)) for p in HIDDEN}
    card_bytes = len(Maker({"s": generate_signing_key()}, 0).make("20k", 1)[0].card_json)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        f"; weights {', '.join(f'{p} = {n:,} B' for p, n in payload_bytes.items())}"
        f"; card {card_bytes:,} B",
        flush=True,
    )
    if venv is not None:
        print(f"MLflow: {venv} ({versions(venv)})", flush=True)
    with tempfile.TemporaryDirectory(prefix="registry-vs-mlflow-") as name:
        tmp = Path(name)
        if not args.hostile_only:
            for backend in args.backends:
                await bench_backend(run, backend, tmp, venv, payload_bytes)
        if args.hostile or args.hostile_only:
            await bench_hostile(run, tmp, venv)
    figures = ratios(run)
    report(run, figures)
    if args.json:
        document = {
            "machine": {
                "arch": platform.machine(),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
            },
            "mlflow": None if venv is None else versions(venv),
            "args": {k: v for k, v in vars(args).items()},
            "weights_bytes": payload_bytes,
            "card_bytes": card_bytes,
            "rows": run.rows,
            "skipped": run.skipped,
            "hostile": run.hostile,
            **figures,
        }
        text = json.dumps(_plain(document), indent=1, default=str, allow_nan=False)
        Path(args.json).write_text(text + "\n")
        print(f"wrote {args.json}")
    return run


def _plain(value: Any) -> Any:
    """``value`` with NaN as None (JSON has no NaN)."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve-unchecked":
        serve_unchecked(sys.argv[2], sys.argv[3:])
        return
    args = parse_args()
    t0 = time.perf_counter()
    try:
        asyncio.run(amain(args))
    except asyncio.CancelledError:
        print(f"interrupted after {time.perf_counter() - t0:.0f} s", flush=True)
        raise SystemExit(130) from None
    print(f"total {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
