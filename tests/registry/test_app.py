"""Tests of pubsubml.registry.app: the application factory, its routes, OpenAPI document and
start-up and shutdown."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

import pubsubml
from pubsubml.registry.app import create_app
from pubsubml.registry.infrastructure.artifact_store import ArtifactStore
from pubsubml.registry.infrastructure.database import Database

DOCUMENTED_ERRORS = {"401", "403", "404", "409", "422", "503"}


class CountingDatabase(Database):
    """A database handle that counts how often it is disposed."""

    disposed = 0

    def dispose(self) -> None:
        self.disposed += 1
        super().dispose()


def test_routes_openapi_and_state(tmp_path: Path, support: Any) -> None:
    settings = support.make_settings(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "store")

    app = create_app(settings)

    spec = app.openapi()
    paths = list(spec["paths"])
    assert paths and all(p.startswith("/v1/") for p in paths)
    for path in ("/v1/health", "/v1/whoami", "/v1/sites", "/v1/sites/{name}/ledger"):
        assert path in paths
    for path in ("/v1/features", "/v1/models", "/v1/subscriptions", "/v1/events"):
        assert path in paths
    assert "/v1/contributions" in paths
    assert spec["info"]["version"] == pubsubml.__version__ == app.version
    operations = [op for item in spec["paths"].values() for op in item.values()]
    assert len(operations) >= 20
    ids = Counter(op["operationId"] for op in operations)
    assert max(ids.values()) == 1, ids
    for op in operations:
        assert DOCUMENTED_ERRORS <= set(op["responses"]), op["operationId"]
        for status in DOCUMENTED_ERRORS:
            schema = op["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, op["operationId"]

    state = app.state.registry
    assert state.settings is settings
    assert str(state.database.engine.url) == settings.database_url
    assert state.store.root == settings.store_dir
    assert state.validator.size == settings.validation_workers


def test_a_given_database_outlives_the_app_and_an_own_one_is_disposed(
    backend: Any, tmp_path: Path, support: Any
) -> None:
    settings = support.make_settings(backend.url, tmp_path / "store")
    given = CountingDatabase(backend.url)
    try:
        with TestClient(create_app(settings, database=given)) as client:
            assert client.app.state.registry.database is given
            assert client.get("/v1/health").status_code == 200
        assert given.disposed == 0

        own_app = create_app(settings)
        own = own_app.state.registry.database
        with TestClient(own_app) as client:
            admin = {"Authorization": f"Bearer {support.ADMIN_TOKEN}"}
            assert client.get("/v1/features", headers=admin).status_code == 200
            pool = own.engine.pool
        assert own.engine.pool is not pool  # disposed: its connections were closed
    finally:
        given.dispose()


def test_start_up_keeps_orphans_younger_than_the_grace(
    registry_factory: Any, tmp_path: Path
) -> None:
    store = ArtifactStore(tmp_path / "store")  # the store of the registries built below
    orphan = store.stage(b"left by a crash")
    store.promote(orphan)
    leftover = store.stage(b"interrupted")

    reg = registry_factory(orphan_grace_seconds=3600)

    assert reg.settings.store_dir == store.root
    assert store.keys() == {orphan.key} and leftover.tmp_path.exists()
