"""Contract tests (every backend): upload limits, faults inside the publish transaction, schema
migrations, settings, and the artifact store's start-up collection."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from pubsubml.errors import SchemaVersionError
from pubsubml.registry.api.deps import get_state
from pubsubml.registry.app import create_app
from pubsubml.registry.infrastructure.artifact_store import ArtifactStore
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.migrate import check_schema, current_revision, head_revision, upgrade
from pubsubml.registry.settings import RegistrySettings

LIMIT = 64 * 1024


def _multipart_chunks(card: bytes, n_chunks: int, consumed: list[int]) -> Any:
    boundary = "bnd"
    yield (
        f'--{boundary}\r\nContent-Disposition: form-data; name="card"\r\n\r\n'.encode()
        + card
        + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="weights"; filename="w"\r\n\r\n'.encode()
    )
    for _ in range(n_chunks):
        consumed.append(1)
        yield b"\x00" * 16384
    yield f"\r\n--{boundary}--\r\n".encode()


async def _asgi_post(app: Any, token: str, chunks: Any) -> tuple[int, bytes]:
    """POST /v1/models straight through ASGI, handing the body over chunk by chunk on demand."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/models",
        "raw_path": b"/v1/models",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"multipart/form-data; boundary=bnd"),
            (b"transfer-encoding", b"chunked"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    out: dict[str, Any] = {"body": b""}

    async def receive() -> dict[str, Any]:
        chunk = next(chunks, None)
        return {"type": "http.request", "body": chunk or b"", "more_body": chunk is not None}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
        elif message["type"] == "http.response.body":
            out["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return int(out["status"]), bytes(out["body"])


def test_oversized_upload_is_refused_while_streaming(registry_factory: Any) -> None:
    reg = registry_factory(max_upload_bytes=LIMIT)
    reg.add_features()
    reg.add_site("a")
    art = reg.artifacts("a", seed=60)
    before = reg.snapshot()
    # Declared too large: refused before reading the body.
    r = reg.publish(art, site="a", weights=b"\x00" * (LIMIT + 1))
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert "limit" in r.json()["detail"]
    # Chunked (no Content-Length): refused once the count passes the limit, long before the end.
    consumed: list[int] = []
    status, body = asyncio.run(
        _asgi_post(
            reg.client.app,
            reg.tokens["a"],
            _multipart_chunks(art.card.to_json().encode(), 1000, consumed),
        )
    )
    assert status == 413 and b"while streaming" in body
    assert len(consumed) < 10
    assert reg.snapshot() == before
    assert reg.publish(art, site="a").status_code == 201  # a normal upload still works


class FailingStore(ArtifactStore):
    """A store whose rename into place fails after writing the file (a fault mid-transaction)."""

    def promote(self, staged: Any) -> None:
        super().promote(staged)
        raise OSError("disk vanished")


def test_fault_inside_the_publish_transaction_leaves_nothing(registry: Any) -> None:
    before = registry.snapshot()
    app = registry.client.app
    failing = dataclasses.replace(
        app.state.registry, store=FailingStore(registry.settings.store_dir)
    )
    app.dependency_overrides[get_state] = lambda: failing
    art = registry.artifacts("a", seed=61)
    client = TestClient(app, raise_server_exceptions=False)
    try:
        r = client.post(
            "/v1/models",
            files=[
                ("card", (None, art.card.to_json().encode(), "application/json")),
                ("weights", ("w", art.weights, "application/octet-stream")),
            ],
            headers=registry.auth("a"),
        )
    finally:
        app.dependency_overrides.clear()
    assert r.status_code == 500 and r.json()["error"] == "internal_error"
    assert registry.snapshot() == before


def test_unmigrated_database_is_refused_then_migrated(
    tmp_path: Path, backend: Any, support: Any, pg_factory: Any
) -> None:
    url = pg_factory() if backend.name == "postgresql" else f"sqlite:///{tmp_path / 'fresh.db'}"
    settings = support.make_settings(url, tmp_path / "store")
    with pytest.raises(SchemaVersionError, match="not migrated"):
        with TestClient(create_app(settings)):
            pass
    db = Database(url)
    try:
        assert current_revision(db) is None
        assert upgrade(db) == head_revision()
        assert check_schema(db) == head_revision()
        with TestClient(create_app(settings, database=db)) as client:
            assert client.get("/v1/health").json()["status"] == "ok"
        with db.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        with pytest.raises(SchemaVersionError, match="newer"):
            check_schema(db)
        with pytest.raises(SchemaVersionError, match="newer"):
            upgrade(db)
    finally:
        db.dispose()


def test_orphans_are_collected_at_start(registry_factory: Any, tmp_path: Path) -> None:
    reg = registry_factory()
    reg.add_features()
    reg.add_site("a")
    assert reg.publish(reg.artifacts("a", seed=62), site="a").status_code == 201
    store = ArtifactStore(reg.settings.store_dir)
    kept = store.keys()
    orphan = store.stage(b"left by a crash")
    store.promote(orphan)
    leftover = store.stage(b"interrupted")
    assert leftover.tmp_path.exists()
    again = registry_factory()  # a new start on the same database and store
    assert store.keys() == kept and not leftover.tmp_path.exists()
    listed = again.client.get("/v1/models", headers={"Authorization": f"Bearer {reg.tokens['a']}"})
    assert len(listed.json()["models"]) == 1


@pytest.mark.parametrize("token", ["", "   ", "changeme", "admin", "short-token"])
def test_settings_refuse_weak_admin_tokens(tmp_path: Path, token: str) -> None:
    with pytest.raises(ValueError, match="refusing to start"):
        RegistrySettings(database_url="sqlite://", store_dir=tmp_path, admin_token=token)


def test_settings_dev_mode_and_env(tmp_path: Path) -> None:
    dev = RegistrySettings(database_url="sqlite://", store_dir=tmp_path, dev=True)
    assert len(dev.admin_token.get_secret_value()) >= 32
    env = {
        "PUBSUBML_REGISTRY_DATA": str(tmp_path),
        "PUBSUBML_ADMIN_TOKEN": "z" * 32,
        "PUBSUBML_MAX_UPLOAD_BYTES": "1000",
        "PUBSUBML_VALIDATION_WORKERS": "3",
        "PUBSUBML_VALIDATION_CPU_SECONDS": "2.5",
        "PUBSUBML_MAX_CONCURRENT_PUBLISHES": "4",
    }
    s = RegistrySettings.from_env(env)
    assert (s.validation_workers, s.validation_cpu_seconds, s.max_concurrent_publishes) == (
        3,
        2.5,
        4,
    )
    with pytest.raises(ValueError, match="validation_workers"):
        RegistrySettings.from_env({**env, "PUBSUBML_VALIDATION_WORKERS": "0"})
    assert (
        s.database_url == f"sqlite:///{tmp_path / 'registry.db'}"
        and s.store_dir == tmp_path / "artifacts"
    )
    assert s.max_upload_bytes == 1000 and s.is_sqlite
    with pytest.raises(ValueError):
        RegistrySettings.from_env({"PUBSUBML_ADMIN_TOKEN": ""})
