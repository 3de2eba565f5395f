"""A registry that keeps the weights in its database (``artifact_store="database"``): the publish
path and downloads on both backends, refusals that store nothing, no folder used, and two
replicas that share only the database serving each other's models."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from pubsubml.registry.client import RegistryClient
from pubsubml.registry.tables import ArtifactChunkRow, ArtifactObjectRow


def _counts(registry: Any) -> tuple[int, int]:
    with registry.db.read() as session:
        objects = session.execute(select(func.count()).select_from(ArtifactObjectRow)).scalar_one()
        chunks = session.execute(select(func.count()).select_from(ArtifactChunkRow)).scalar_one()
    return int(objects), int(chunks)


@pytest.fixture
def db_registry(registry_factory: Any) -> Any:
    reg = registry_factory(artifact_store="database")
    reg.add_features()
    for name in ("a", "b"):
        reg.add_site(name)
    return reg


def test_publish_and_download_from_the_database(db_registry: Any, support: Any) -> None:
    reg = db_registry
    arts = [reg.artifacts("a", seed=s, hidden=h) for s, h in ((1, 4), (2, 60_000))]
    assert len(arts[1].weights) > (1 << 20)  # more than one chunk of 1 MiB
    for art in arts:
        r = reg.publish(art, site="a")
        assert r.status_code == 201, r.text
    assert _counts(reg) == (2, 1 + 2)
    for art in arts:
        got = reg.client.get(f"/v1/models/{art.card.model_id}/weights", headers=reg.auth("b"))
        assert got.status_code == 200
        assert got.content == art.weights
        assert got.headers["x-weights-sha256"] == hashlib.sha256(art.weights).hexdigest()
        assert got.headers["content-length"] == str(len(art.weights))
        assert got.headers["content-disposition"] == (
            f'attachment; filename="{art.card.model_id}.safetensors"'
        )
    assert not reg.settings.store_dir.exists()  # no folder was needed


def test_refused_publishes_store_nothing(db_registry: Any, registry_factory: Any) -> None:
    reg = db_registry
    good = reg.artifacts("a", seed=3)
    before = reg.snapshot()
    tampered = reg.publish(site="a", card=good.card.to_json().encode(), weights=b"other bytes")
    assert tampered.status_code == 422 and tampered.json()["error"] == "digest_mismatch"
    poor = reg.artifacts("b", seed=4)
    with reg.db.write() as session:  # b's budget is spent
        from sqlalchemy import update

        from pubsubml.registry.tables import SiteRow

        session.execute(update(SiteRow).where(SiteRow.name == "b").values(epsilon_budget=1e-3))
    over = reg.publish(poor, site="b")
    assert over.status_code == 409, over.text
    after = reg.snapshot()
    assert {k: v for k, v in after.items() if k != "sites"} == {
        k: v for k, v in before.items() if k != "sites"
    }
    assert _counts(reg) == (0, 0)
    small = registry_factory(artifact_store="database", max_upload_bytes=2000)
    small.tokens = reg.tokens  # the same database: the same sites
    big = small.artifacts("a", seed=5, hidden=400)
    r = small.publish(big, site="a")
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert _counts(small) == (0, 0)


def test_a_leftover_of_an_interrupted_publish_is_collected_at_start(
    registry_factory: Any,
) -> None:
    from pubsubml.registry.infrastructure.database_artifact_store import DatabaseArtifactStore

    reg = registry_factory(artifact_store="database")
    leftover = DatabaseArtifactStore(reg.db).stage(b"a publish that never committed")
    assert _counts(reg) == (1, 1)
    registry_factory(artifact_store="database")  # the next replica's start-up collection
    assert _counts(reg) == (0, 0)
    assert leftover.key not in DatabaseArtifactStore(reg.db).keys()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_two_replicas_without_a_shared_folder_serve_each_others_models(
    backend: Any, tmp_path: Path, support: Any, artifacts: Any
) -> None:
    folders = [tmp_path / "host-1" / "store", tmp_path / "host-2" / "store"]
    settings = [
        support.make_settings(backend.url, folder, artifact_store="database") for folder in folders
    ]
    with support.thread_server(settings[0]) as one, support.thread_server(settings[1]) as two:
        tokens = support.sites_a_and_b(one, artifacts)
        published = {}
        for k, (base, site) in enumerate(((one, "a"), (two, "b"))):
            art = artifacts(site, seed=70 + k)
            with RegistryClient(base, tokens[site]) as client:
                published[client.publish(art.card, art.weights)] = art
        for base in (one, two):
            with RegistryClient(base, tokens["a"]) as reader:
                assert sorted(m["model_id"] for m in reader.list_models()) == sorted(published)
                for model_id, art in published.items():
                    assert reader.download_weights(model_id) == art.weights
    assert not any(folder.exists() for folder in folders)
    assert not list(tmp_path.rglob("upload.lock"))
