"""A replica's start-up collection never leaves an acknowledged model without its file, and
interrupts no publish when its grace covers one (both backends)."""

from __future__ import annotations

import hashlib
import os
import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from pubsubml.registry.services.maintenance import collect_orphans
from pubsubml.registry.store import ArtifactStore
from pubsubml.registry.tables import ModelRow, PendingUploadRow, utcnow


def _collect_after_promote(registry: Any, monkeypatch: Any, grace: float) -> list[Any]:
    """Make replica B start (and collect orphans) at the worst moment of replica A's publish:
    the file is in the store, the model row not yet committed."""
    store = ArtifactStore(registry.settings.store_dir)
    promote = ArtifactStore.promote
    reports: list[Any] = []

    def promote_then_other_replica_starts(self: ArtifactStore, staged: Any) -> None:
        promote(self, staged)
        reports.append(collect_orphans(registry.db, store, grace_seconds=grace))

    monkeypatch.setattr(ArtifactStore, "promote", promote_then_other_replica_starts)
    return reports


def _downloadable(registry: Any, art: Any) -> bool:
    r = registry.client.get(f"/v1/models/{art.card.model_id}/weights", headers=registry.auth("b"))
    return r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == art.card.weights_sha256


def test_with_a_grace_a_restart_interrupts_no_publish(registry: Any, monkeypatch: Any) -> None:
    reports = _collect_after_promote(registry, monkeypatch, grace=60.0)
    art = registry.artifacts("a", seed=93)
    r = registry.publish(art, site="a")
    assert r.status_code == 201, r.text
    assert reports[0].removed_objects == [] and reports[0].missing == []
    assert _downloadable(registry, art)
    with registry.db.read() as session:
        assert session.execute(select(PendingUploadRow)).first() is None


def test_without_a_grace_the_publish_fails_instead_of_losing_its_file(
    registry: Any, monkeypatch: Any
) -> None:
    reports = _collect_after_promote(registry, monkeypatch, grace=0.0)
    art = registry.artifacts("a", seed=94)
    before = registry.snapshot()
    r = registry.publish(art, site="a")
    assert r.status_code == 409 and "publish again" in r.json()["detail"], r.text
    assert len(reports[0].removed_objects) == 1  # B took the file for a crash leftover ...
    assert registry.snapshot() == before  # ... and A acknowledged nothing
    monkeypatch.undo()
    assert registry.publish(art, site="a").status_code == 201
    assert _downloadable(registry, art)


@pytest.mark.parametrize("grace", [0.0, 60.0])
def test_crash_leftovers_are_collected_once_older_than_the_grace(
    registry: Any, grace: float
) -> None:
    store = ArtifactStore(registry.settings.store_dir)
    fresh, old = store.stage(b"fresh bytes"), store.stage(b"old bytes")
    store.promote(fresh)
    store.promote(old)
    past = time.time() - 7200
    os.utime(store.path(old.key), (past, past))
    with registry.db.write() as session:
        session.add(PendingUploadRow(storage_key=fresh.key, created_at=utcnow()))
        session.add(PendingUploadRow(storage_key=old.key, created_at=utcnow() - timedelta(hours=2)))
    report = collect_orphans(registry.db, store, grace_seconds=grace)
    removed = {old.key} if grace else {old.key, fresh.key}
    assert set(report.removed_objects) == removed
    assert store.keys() == {fresh.key, old.key} - removed
    with registry.db.read() as session:
        pending = set(session.execute(select(PendingUploadRow.storage_key)).scalars())
        assert session.execute(select(ModelRow)).first() is None
    assert pending == ({fresh.key} if grace else set())
