"""Tests of pubsubml.registry.services.maintenance: the start-up collection of orphan files."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.validation import validate_untrusted
from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.infrastructure.artifact_store import ArtifactStore
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.schemas import SiteCreate
from pubsubml.registry.services.features import add_features
from pubsubml.registry.services.maintenance import collect_orphans
from pubsubml.registry.services.publish import publish_model
from pubsubml.registry.services.sites import create_site
from pubsubml.registry.tables import ModelRow, SiteRow


class LocalValidator:
    """Runs the validation workers' checks in this process."""

    def validate(
        self, card: ModelCard, weights: bytes, *, site_delta: float, max_weights_bytes: int
    ) -> float:
        return validate_untrusted(
            card, weights, site_delta=site_delta, max_weights_bytes=max_weights_bytes
        )


def _publish_two(db: Database, store: ArtifactStore, artifacts: Any, support: Any) -> list[str]:
    """Publish two models of site a; returns their storage keys."""
    with db.write() as s:
        add_features(s, ADMIN, support.DICTIONARY.features)
        body = SiteCreate(
            name="a", public_key=artifacts.public_key("a"), epsilon_budget=50, delta_budget=1e-5
        )
        create_site(s, ADMIN, body)
        site_id = s.execute(select(SiteRow.id).where(SiteRow.name == "a")).scalar_one()
    principal = Principal(kind="site", site_id=site_id, name="a", roles="both")
    for seed in (600, 601):
        art = artifacts("a", seed=seed)
        publish_model(
            db,
            store,
            principal,
            art.card.to_json(),
            art.weights,
            lock=UploadLock(db, store.root),
            validator=LocalValidator(),  # type: ignore[arg-type]
            max_weights_bytes=1 << 20,
        )
    with db.read() as s:
        return list(s.execute(select(ModelRow.storage_key).order_by(ModelRow.position)).scalars())


def test_unreferenced_files_go_and_missing_files_are_reported(
    db: Database, tmp_path: Path, artifacts: Any, support: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = ArtifactStore(tmp_path / "store")
    kept, lost = _publish_two(db, store, artifacts, support)
    store.path(lost).unlink()  # a committed model whose file vanished
    orphan = store.stage(b"renamed, never committed")
    store.promote(orphan)
    interrupted = store.stage(b"never renamed")
    with caplog.at_level(logging.WARNING, logger="pubsubml.registry"):
        report = collect_orphans(db, store, UploadLock(db, store.root))
    assert report.removed_objects == [orphan.key]
    assert report.removed_tmp == [interrupted.tmp_path.name]
    assert report.missing == [lost]
    assert store.keys() == {kept} and store.tmp_files() == []
    messages = {r.levelname: r.getMessage() for r in caplog.records}
    assert "removed 1 orphan artifact(s) and 1 temporary file(s)" in messages["WARNING"]
    assert lost in messages["ERROR"]


def test_a_consistent_store_is_left_alone_silently(
    db: Database, tmp_path: Path, artifacts: Any, support: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = ArtifactStore(tmp_path / "store")
    keys = _publish_two(db, store, artifacts, support)
    with caplog.at_level(logging.DEBUG, logger="pubsubml.registry"):
        report = collect_orphans(db, store, UploadLock(db, store.root))
    assert (report.removed_objects, report.removed_tmp, report.missing) == ([], [], [])
    assert store.keys() == set(keys)
    assert caplog.records == []
