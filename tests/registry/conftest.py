"""Fixtures of the registry tests: backends (SQLite file, PostgreSQL schema), artifacts, servers.

The contract suite runs every ``backend`` test on SQLite (a real file in ``tmp_path``) and on the
PostgreSQL server at 127.0.0.1:5432 (a fresh schema per test session, emptied before each test).
Without a reachable server the PostgreSQL tests fail and say how to start one, unless
``PUBSUBML_SKIP_POSTGRES=1``.  All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import uvicorn
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from sqlalchemy import event, select, text

from pubsubml.artifacts import MLPArchitecture, ModelCard, PrivacyRecord
from pubsubml.artifacts.export import Artifact, make_artifact
from pubsubml.artifacts.safetensors_codec import mlp_to_safetensors
from pubsubml.artifacts.signing import generate_signing_key, public_key_to_base64, sign_card
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.registry.app import create_app
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.migrate import upgrade
from pubsubml.registry.settings import RegistrySettings
from pubsubml.registry.tables import Base, ModelRow
from pubsubml.schema import Feature, FeatureSchema

ADMIN_TOKEN = "test-admin-token-" + "x" * 24
PG_HINT = (
    "the PostgreSQL tests need a server on 127.0.0.1:5432 (trust auth, database 'test'); start it "
    "with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, or set "
    "PUBSUBML_SKIP_POSTGRES=1 to skip them"
)
DICTIONARY = FeatureSchema(
    features=(
        Feature(name="age", lower=0, upper=100, default=50),
        Feature(name="sex", kind="categorical", categories=("f", "m"), default="f"),
        Feature(name="wbc", lower=0, upper=50, default=7),
        Feature(name="icu_los", lower=0, upper=60, default=3),
        Feature(name="bmi", lower=10, upper=60, default=25),
    )
)
# A single Gaussian release keeps the accountant cheap in tests; DP-SGD events appear where they
# matter (SGD_EVENTS).
EVENTS = (DPEvent(mechanism="gaussian", noise_multiplier=5.0),)
SGD_EVENTS = (
    DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.1, sample_rate=0.01, count=200),
)
DELTA = 1e-5
TABLES = [t.name for t in reversed(Base.metadata.sorted_tables)]


# ---- backends ---------------------------------------------------------------------------
@contextlib.contextmanager
def statements(db: Database, fragment: str = "") -> Iterator[list[str]]:
    """The SQL statements ``db``'s engine sends while the block runs (those holding ``fragment``)."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if fragment in statement:
            seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


def model_row(model_id: str, publisher_id: int, position: int, **columns: Any) -> ModelRow:
    """A :class:`ModelRow` with placeholder columns (safetensors, ε = 1, public, card ``{}``),
    for tests that write models straight into the database; ``columns`` override them."""
    values: dict[str, Any] = {
        "task": "classification",
        "epsilon": 1.0,
        "delta": 1e-5,
        "claimed_epsilon": 1.0,
        "format": "safetensors",
        "weights_sha256": model_id * 2,
        "size_bytes": 1,
        "storage_key": model_id,
        "card_json": "{}",
        "public": True,
    }
    values.update(columns)
    return ModelRow(id=model_id, publisher_id=publisher_id, position=position, **values)


def _pg_user() -> str | None:
    import psycopg

    for user in ("postgres", "root"):
        try:
            with psycopg.connect(
                host="127.0.0.1", port=5432, user=user, dbname="test", connect_timeout=3
            ):
                return user
        except psycopg.Error:
            continue
    return None


@pytest.fixture(scope="session")
def pg_user() -> str:
    """The PostgreSQL user to connect as (fails with instructions when no server answers)."""
    if os.environ.get("PUBSUBML_SKIP_POSTGRES") == "1":
        pytest.skip("PUBSUBML_SKIP_POSTGRES=1")
    user = _pg_user()
    if user is None:
        pytest.fail(PG_HINT)
    return user


@contextlib.contextmanager
def pg_schema(user: str) -> Iterator[str]:
    """A fresh schema, dropped afterwards; yields the SQLAlchemy URL that uses it."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(host="127.0.0.1", user=user, dbname="test", autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    try:
        yield f"postgresql+psycopg://{user}@127.0.0.1:5432/test?options=-csearch_path%3D{name}"
    finally:
        with psycopg.connect(host="127.0.0.1", user=user, dbname="test", autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture(scope="session")
def pg_migrated(pg_user: str) -> Iterator[str]:
    """A migrated PostgreSQL schema for this test session."""
    with pg_schema(pg_user) as url:
        db = Database(url)
        upgrade(db)
        db.dispose()
        yield url


@pytest.fixture
def pg_factory(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Make fresh, unmigrated PostgreSQL schemas (dropped after the test); returns their URLs."""
    stack = contextlib.ExitStack()

    def make() -> str:
        return stack.enter_context(pg_schema(request.getfixturevalue("pg_user")))

    with stack:
        yield make


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for every test."""
    path = tmp_path_factory.mktemp("template") / "registry.db"
    db = Database(f"sqlite:///{path}")
    upgrade(db)
    db.dispose()
    return path


@pytest.fixture
def db(sqlite_template: Path, tmp_path: Path) -> Iterator[Database]:
    """A migrated, empty SQLite registry database in a real file of its own."""
    path = tmp_path / "registry.db"
    shutil.copy(sqlite_template, path)
    database = Database(f"sqlite:///{path}")
    yield database
    database.dispose()


def _empty_postgres(url: str) -> None:
    db = Database(url)
    with db.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
        conn.execute(text("INSERT INTO feed_clock (id, position) VALUES (1, 0)"))
    db.dispose()


@dataclass
class Backend:
    """A migrated, empty database."""

    name: str
    url: str


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each contract test runs once per storage backend."""
    if request.param == "sqlite":
        path = tmp_path / "registry.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        return Backend("sqlite", f"sqlite:///{path}")
    url = request.getfixturevalue("pg_migrated")
    _empty_postgres(url)
    return Backend("postgresql", url)


# ---- artifacts --------------------------------------------------------------------------
def mlp_to_onnx(
    layers: Sequence[tuple[Any, Any]], *, activation: str, output_activation: str
) -> bytes:
    """A plain ONNX graph of a tanh network (built here with onnx.helper, opset 18)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, current = [], [], "input"
    for i, (w, b) in enumerate(layers):
        inits += [
            numpy_helper.from_array(np.asarray(w, np.float32), f"{i}.weight"),
            numpy_helper.from_array(np.asarray(b, np.float32), f"{i}.bias"),
        ]
        nodes.append(
            helper.make_node("Gemm", [current, f"{i}.weight", f"{i}.bias"], [f"l{i}"], transB=1)
        )
        current = f"l{i}"
        if i < len(layers) - 1:
            nodes.append(helper.make_node("Tanh", [current], [f"a{i}"]))
            current = f"a{i}"
    op = "Softmax" if output_activation == "softmax" else "Identity"
    nodes.append(
        helper.make_node(op, [current], ["output"], **({"axis": -1} if op == "Softmax" else {}))
    )
    n_in, n_out = int(np.shape(layers[0][0])[1]), int(np.shape(layers[-1][0])[0])
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", n_in])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", n_out])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def privacy_record(
    events: Sequence[DPEvent] = EVENTS, delta: float = DELTA, **changes: Any
) -> PrivacyRecord:
    """A correct privacy record of ``events`` (ε by the PLD accountant), with optional changes."""
    eps = compute_epsilon(list(events), delta) if delta > 0 else 1.0
    data: dict[str, Any] = {
        "epsilon": eps,
        "delta": delta,
        "accountant": "pld",
        "noise": "secure",
        **changes,
    }
    return PrivacyRecord.from_events(list(events), **data)


class ArtifactFactory:
    """Small signed MLP artifacts (a few hundred bytes), cached per arguments."""

    def __init__(self) -> None:
        self.keys: dict[str, Ed25519PrivateKey] = {}
        self._cache: dict[tuple[Any, ...], Artifact] = {}

    def key(self, site: str) -> Ed25519PrivateKey:
        """The signing key of ``site`` (created on first use)."""
        if site not in self.keys:
            self.keys[site] = generate_signing_key()
        return self.keys[site]

    def public_key(self, site: str) -> str:
        """Base64 public key of ``site``."""
        return public_key_to_base64(self.key(site).public_key())

    def __call__(
        self,
        publisher: str,
        *,
        features: Sequence[str] = ("age", "sex"),
        classes: Sequence[Any] | None = (0, 1),
        fmt: str = "safetensors",
        seed: int = 0,
        privacy: PrivacyRecord | None = None,
        hidden: int = 4,
    ) -> Artifact:
        """A signed artifact of ``publisher`` (different seeds give different weights)."""
        cache_key = (
            publisher,
            tuple(features),
            None if classes is None else tuple(classes),
            fmt,
            seed,
            hidden,
            None if privacy is None else privacy.model_dump_json(),
        )
        if cache_key in self._cache:
            return self._cache[cache_key]
        schema = DICTIONARY.subset(features)
        n_in = schema.n_encoded
        n_out = 1 if classes is None else len(classes)
        rng = np.random.default_rng(seed)
        layers = [
            (rng.normal(size=(hidden, n_in)), rng.normal(size=hidden)),
            (rng.normal(size=(n_out, hidden)), rng.normal(size=n_out)),
        ]
        out_act = "identity" if classes is None else "softmax"
        if fmt == "safetensors":
            weights = mlp_to_safetensors(layers)
            arch: MLPArchitecture | None = MLPArchitecture(
                layer_sizes=[n_in, hidden, n_out], activation="tanh", output_activation=out_act
            )
        else:
            weights = mlp_to_onnx(layers, activation="tanh", output_activation=out_act)
            arch = None
        art = make_artifact(
            weights,
            format=fmt,  # type: ignore[arg-type]
            publisher=publisher,
            schema=schema,
            classes=None if classes is None else list(classes),
            privacy=privacy or privacy_record(),
            signing_key=self.key(publisher),
            architecture=arch,
        )
        self._cache[cache_key] = art
        return art

    def resign(self, card: ModelCard, weights: bytes, site: str, **changes: Any) -> Artifact:
        """Re-sign ``card`` (with ``changes`` and a recomputed digest/id) for ``weights``."""
        from pubsubml.artifacts.card import derive_model_id

        digest = hashlib.sha256(weights).hexdigest()
        data = card.model_dump()
        data.update(changes)
        data.update(
            weights_sha256=digest,
            model_id=derive_model_id(data["publisher"], digest),
            signature=None,
        )
        return Artifact(
            card=sign_card(ModelCard.model_validate(data), self.key(site)), weights=weights
        )


@pytest.fixture(scope="session")
def artifacts() -> ArtifactFactory:
    """Session-wide artifact factory (keys and artifacts made once)."""
    return ArtifactFactory()


# ---- the in-process registry ------------------------------------------------------------
@dataclass
class Registry:
    """A registry app on a backend, driven through FastAPI's TestClient."""

    client: TestClient
    settings: RegistrySettings
    db: Database
    artifacts: ArtifactFactory
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def admin(self) -> dict[str, str]:
        """Admin auth header."""
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def auth(self, site: str) -> dict[str, str]:
        """Auth header of a site."""
        return {"Authorization": f"Bearer {self.tokens[site]}"}

    def add_site(
        self, name: str, *, roles: str = "both", epsilon: float = 50.0, delta: float = 1e-5
    ) -> str:
        """Register ``name`` with its factory key; returns its token."""
        body = {
            "name": name,
            "roles": roles,
            "public_key": None if roles == "subscriber" else self.artifacts.public_key(name),
            "epsilon_budget": epsilon,
            "delta_budget": delta,
        }
        r = self.client.post("/v1/sites", json=body, headers=self.admin)
        assert r.status_code == 201, r.text
        self.tokens[name] = r.json()["token"]
        return self.tokens[name]

    def add_features(self, names: Sequence[str] | None = None) -> None:
        """Add features of the test dictionary (all by default)."""
        chosen = DICTIONARY if names is None else DICTIONARY.subset(names)
        payload = {"features": [f.model_dump(mode="json") for f in chosen]}
        r = self.client.post("/v1/features", json=payload, headers=self.admin)
        assert r.status_code in (200, 201), r.text

    def publish(
        self,
        artifact: Artifact | None = None,
        *,
        site: str,
        card: bytes | None = None,
        weights: bytes | None = None,
        visible_to: Sequence[str] | None = None,
    ) -> httpx.Response:
        """POST a publish request as ``site``."""
        card_bytes = card if card is not None else artifact.card.to_json().encode()  # type: ignore[union-attr]
        data = weights if weights is not None else artifact.weights  # type: ignore[union-attr]
        files: list[tuple[str, tuple[str | None, bytes, str]]] = [
            ("card", (None, card_bytes, "application/json")),
            ("weights", ("weights", data, "application/octet-stream")),
        ]
        if visible_to is not None:
            files.append(("visible_to", (None, ",".join(visible_to).encode(), "text/plain")))
        return self.client.post("/v1/models", files=files, headers=self.auth(site))

    def subscribe(
        self, site: str, channel: str, task: str = "classification", classes: Any = (0, 1)
    ) -> str:
        """Create a subscription; returns its id."""
        body = {
            "channel": channel,
            "task": task,
            "classes": None if classes is None else list(classes),
        }
        r = self.client.post("/v1/subscriptions", json=body, headers=self.auth(site))
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    def feed(self, site: str, sub: str, after: int = 0) -> list[dict[str, Any]]:
        """Feed items of a subscription."""
        r = self.client.get(
            f"/v1/subscriptions/{sub}/models", params={"after": after}, headers=self.auth(site)
        )
        assert r.status_code == 200, r.text
        return list(r.json()["items"])

    def snapshot(self) -> dict[str, Any]:
        """Every row of every table and every file of the store (to assert 'nothing changed')."""
        return snapshot(self.db, self.settings.store_dir)


def snapshot(db: Database, store_dir: Path) -> dict[str, Any]:
    """Rows of every table and files of the store."""
    out: dict[str, Any] = {}
    with db.engine.connect() as conn:
        for table in Base.metadata.sorted_tables:
            rows = conn.execute(select(table)).all()
            out[table.name] = sorted(repr(tuple(r)) for r in rows)
        conn.rollback()
    out["store"] = sorted(
        str(p.relative_to(store_dir)) for p in Path(store_dir).rglob("*") if p.is_file()
    )
    return out


def make_settings(url: str, store: Path, **changes: Any) -> RegistrySettings:
    """Settings for tests (strong admin token, short poll interval)."""
    values: dict[str, Any] = {
        "database_url": url,
        "store_dir": store,
        "admin_token": ADMIN_TOKEN,
        "feed_poll_interval": 0.05,
        "sse_heartbeat_seconds": 0.5,
        **changes,
    }
    return RegistrySettings(**values)


@pytest.fixture
def registry_factory(backend: Backend, tmp_path: Path, artifacts: ArtifactFactory) -> Iterator[Any]:
    """Build registries on the test's backend: ``registry_factory(**settings_changes)``."""
    opened: list[contextlib.ExitStack] = []

    def build(**changes: Any) -> Registry:
        settings = make_settings(backend.url, tmp_path / "store", **changes)
        db = Database(settings.database_url)
        stack = contextlib.ExitStack()
        stack.callback(db.dispose)
        client = stack.enter_context(TestClient(create_app(settings, database=db)))
        opened.append(stack)
        return Registry(client=client, settings=settings, db=db, artifacts=artifacts)

    yield build
    for stack in reversed(opened):
        stack.close()


@pytest.fixture
def registry(registry_factory: Any) -> Registry:
    """A registry with the whole test dictionary and sites a, b, c (both roles)."""
    reg: Registry = registry_factory()
    reg.add_features()
    for name in ("a", "b", "c"):
        reg.add_site(name)
    return reg


# ---- real uvicorn servers ---------------------------------------------------------------
def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(
    base_url: str, timeout: float = 60.0, proc: subprocess.Popen[bytes] | None = None
) -> None:
    """Wait until ``/v1/health`` answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise RuntimeError(f"server exited with {proc.returncode}: {out[-2000:]}")
        try:
            if httpx.get(f"{base_url}/v1/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"registry at {base_url} did not start")


@contextlib.contextmanager
def thread_server(settings: RegistrySettings) -> Iterator[str]:
    """A real uvicorn server in a thread of this process; yields its base URL."""
    port = free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        yield base
    finally:
        server.should_exit = True
        thread.join(10)


def spawn_server(
    url: str,
    store: Path | str,
    port: int,
    *,
    extra_env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``python -m pubsubml.cli.registry serve`` as a subprocess on 127.0.0.1:port
    (``store``: a folder, or ``"database"``), in the current folder unless ``cwd``."""
    env = {**os.environ, "PUBSUBML_ADMIN_TOKEN": ADMIN_TOKEN, **(extra_env or {})}
    cmd = [
        sys.executable,
        "-m",
        "pubsubml.cli.registry",
        "serve",
        "--db",
        url,
        "--store",
        str(store),
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd)


def keys_and_files(db_url: str, store: Path | str) -> tuple[set[str], set[str]]:
    """Storage keys of the committed models, and the keys of the stored artifacts: names of the
    files in the store's objects, or with ``store="database"`` the database's artifact rows."""
    db = Database(db_url)
    try:
        with db.engine.connect() as conn:
            keys = {r[0] for r in conn.exec_driver_sql("SELECT storage_key FROM models")}
            stored = {
                r[0] for r in conn.exec_driver_sql("SELECT storage_key FROM artifact_objects")
            }
    finally:
        db.dispose()
    if store == "database":
        return keys, stored
    return keys, {p.name for p in (Path(store) / "objects").glob("*/*")}


def card_dict(artifact: Artifact) -> dict[str, Any]:
    """The card of an artifact as a JSON dict."""
    return dict(json.loads(artifact.card.to_json()))


@pytest.fixture
def server(
    backend: Backend, tmp_path: Path, artifacts: ArtifactFactory
) -> Iterator[dict[str, Any]]:
    """A uvicorn server with the test dictionary and sites a, b (ε budget 50) and poor (0.5);
    yields its URL and the sites' tokens."""
    from pubsubml.registry.client import RegistryClient

    settings = make_settings(backend.url, tmp_path / "store")
    with thread_server(settings) as url:
        admin = RegistryClient(url, ADMIN_TOKEN)
        admin.add_features(DICTIONARY.features)
        tokens = {}
        for name, budget in (("a", 50.0), ("b", 50.0), ("poor", 0.5)):
            tokens[name] = admin.add_site(
                name,
                public_key=artifacts.public_key(name),
                epsilon_budget=budget,
                delta_budget=1e-5,
            )["token"]
        admin.close()
        yield {"url": url, "tokens": tokens}


@pytest.fixture(scope="session")
def support() -> Any:
    """This module, so tests reach its helpers and constants without importing a conftest."""
    return sys.modules[__name__]


def terminate_backend(database: Database, pid: int) -> None:
    """End PostgreSQL backend ``pid`` (as a server restart would) and wait until it is gone.

    Another connection ends it; ``pg_stat_activity`` is read afresh at each statement in
    autocommit mode (not once per transaction), and the backend exits asynchronously.
    """
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        assert conn.execute(text(f"SELECT pg_terminate_backend({int(pid)})")).scalar_one()
        gone = text(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {int(pid)}")
        deadline = time.monotonic() + 30
        while conn.execute(gone).scalar_one() and time.monotonic() < deadline:
            time.sleep(0.05)


def sites_a_and_b(url: str, artifacts: ArtifactFactory) -> dict[str, str]:
    """The test dictionary and sites a and b (both roles, keys of ``artifacts``); their tokens."""
    from pubsubml.registry.client import RegistryClient

    with RegistryClient(url, ADMIN_TOKEN) as admin:
        admin.add_features(DICTIONARY.features)
        return {
            name: admin.add_site(
                name, public_key=artifacts.public_key(name), epsilon_budget=50.0, delta_budget=1e-5
            )["token"]
            for name in ("a", "b")
        }


def publish_wakes_poll(
    url_a: str, url_b: str, artifacts: ArtifactFactory, seed: int
) -> tuple[dict[str, Any], float, str]:
    """Site b long-polls replica B while site a publishes on replica A.

    Returns B's answer, the seconds the poll waited and the published model's id.
    """
    from pubsubml.registry.client import RegistryClient

    tokens = sites_a_and_b(url_a, artifacts)
    with RegistryClient(url_b, tokens["b"]) as b:
        sub = b.subscribe("b", "*", task="classification", classes=[0, 1])
    got: list[tuple[dict[str, Any], float]] = []

    def long_poll() -> None:
        with httpx.Client(base_url=url_b, timeout=70.0) as http:
            started = time.monotonic()
            r = http.get(
                f"/v1/subscriptions/{sub}/models",
                params={"after": 0, "timeout": 45},
                headers={"Authorization": f"Bearer {tokens['b']}"},
            )
            got.append((r.json(), time.monotonic() - started))

    reader = threading.Thread(target=long_poll)
    reader.start()
    time.sleep(1.0)  # the poll on B is waiting
    art = artifacts("a", seed=seed)
    with RegistryClient(url_a, tokens["a"]) as a:
        published = a.publish_model(art.card, art.weights)
    reader.join(70)
    page, waited = got[0]
    return page, waited, str(published["model_id"])
