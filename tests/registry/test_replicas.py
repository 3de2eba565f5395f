"""A replica's start-up collection never leaves an acknowledged model without its file and
interrupts no publish: it waits for the publishes in progress (both backends)."""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

import pytest
from sqlalchemy import select

from pubsubml.errors import ServiceBusyError
from pubsubml.registry.infrastructure.artifact_store import ArtifactStore, OrphanReport
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.services.maintenance import collect_orphans
from pubsubml.registry.tables import ModelRow


def _downloadable(registry: Any, art: Any) -> bool:
    r = registry.client.get(f"/v1/models/{art.card.model_id}/weights", headers=registry.auth("b"))
    return r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == art.card.weights_sha256


def test_a_restart_during_a_publish_waits_for_it(registry: Any, monkeypatch: Any) -> None:
    """Replica B starts at the worst moment of replica A's publish (file in the store, row not
    yet committed): B's collection waits until A committed, then removes nothing."""
    store = ArtifactStore(registry.settings.store_dir)
    other_replica = UploadLock(registry.db, registry.settings.store_dir, timeout=30.0)
    promote = ArtifactStore.promote
    reports: list[OrphanReport] = []
    waited: list[bool] = []
    threads: list[threading.Thread] = []

    def promote_then_other_replica_starts(self: ArtifactStore, staged: Any) -> None:
        promote(self, staged)
        t = threading.Thread(
            target=lambda: reports.append(collect_orphans(registry.db, store, other_replica))
        )
        t.start()
        threads.append(t)
        time.sleep(0.3)
        waited.append(t.is_alive())  # B is blocked on the upload lock

    monkeypatch.setattr(ArtifactStore, "promote", promote_then_other_replica_starts)
    art = registry.artifacts("a", seed=93)
    r = registry.publish(art, site="a")
    assert r.status_code == 201, r.text
    threads[0].join(30)
    assert waited == [True]
    assert reports[0].removed_objects == [] and reports[0].missing == []
    assert _downloadable(registry, art)


def test_a_collection_that_cannot_get_the_lock_changes_nothing(registry: Any) -> None:
    store = ArtifactStore(registry.settings.store_dir)
    leftover = store.stage(b"a crashed publish")
    store.promote(leftover)
    publishing = UploadLock(registry.db, registry.settings.store_dir)
    impatient = UploadLock(registry.db, registry.settings.store_dir, timeout=0.2)
    with publishing.shared(), pytest.raises(ServiceBusyError, match="retry"):
        collect_orphans(registry.db, store, impatient)
    assert leftover.key in store.keys()


def test_publishes_hold_the_lock_together(registry: Any) -> None:
    lock = UploadLock(registry.db, registry.settings.store_dir, timeout=0.5)
    other = UploadLock(registry.db, registry.settings.store_dir, timeout=0.5)
    with lock.shared(), other.shared():
        pass
    with lock.exclusive(), pytest.raises(ServiceBusyError):
        with other.shared():
            pass


@pytest.mark.parametrize("grace", [0.0, 3600.0])
def test_crash_leftovers_are_collected(registry: Any, grace: float) -> None:
    store = ArtifactStore(registry.settings.store_dir)
    staged = store.stage(b"leftover bytes")
    store.promote(staged)
    tmp_only = store.stage(b"interrupted before the rename")
    lock = UploadLock(registry.db, registry.settings.store_dir)
    report = collect_orphans(registry.db, store, lock, grace_seconds=grace)
    if grace:
        assert report.removed_objects == [] and store.keys() == {staged.key}
        assert tmp_only.tmp_path.exists()
    else:
        assert report.removed_objects == [staged.key] and store.keys() == set()
        assert not tmp_only.tmp_path.exists()
    with registry.db.read() as session:
        assert session.execute(select(ModelRow)).first() is None
