"""Tests of pubsubml.registry.infrastructure.artifact_store: the artifact store's staging, promotion and collection."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from pubsubml.errors import NotFoundError
from pubsubml.registry.infrastructure.artifact_store import ArtifactStore, OrphanReport


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(tmp_path / "nested" / "store")


def test_the_store_creates_its_folders(store: ArtifactStore) -> None:
    assert store.objects.is_dir() and store.tmp.is_dir()
    assert store.keys() == set() and store.tmp_files() == []
    ArtifactStore(store.root)  # opening an existing store is fine


def test_new_keys_are_fresh_hex(store: ArtifactStore) -> None:
    keys = {store.new_key() for _ in range(50)}
    assert len(keys) == 50 and all(re.fullmatch(r"[0-9a-f]{32}", k) for k in keys)


@pytest.mark.parametrize(
    "key", ["", "../" + "0" * 29, "0" * 31, "0" * 33, "A" * 32, "g" * 32, "0" * 32 + "/x"]
)
def test_invalid_keys_are_not_found(store: ArtifactStore, key: str) -> None:
    with pytest.raises(NotFoundError, match="invalid artifact key"):
        store.path(key)
    with pytest.raises(NotFoundError):
        store.read(key)


def test_a_staged_file_is_invisible_until_promoted(store: ArtifactStore) -> None:
    staged = store.stage(b"weights")
    assert staged.tmp_path.parent == store.tmp and staged.tmp_path.read_bytes() == b"weights"
    assert staged.size == 7 and not staged.promoted
    assert staged.final_path == store.objects / staged.key[:2] / staged.key
    assert store.keys() == set() and store.tmp_files() == [staged.tmp_path]
    with pytest.raises(NotFoundError, match="missing from the store"):
        store.read(staged.key)
    store.promote(staged)
    assert staged.promoted and not staged.tmp_path.exists()
    assert store.keys() == {staged.key} and store.tmp_files() == []
    assert store.read(staged.key) == b"weights"


def test_stage_under_a_chosen_key_refuses_to_overwrite(store: ArtifactStore) -> None:
    key = "ab" * 16
    staged = store.stage(b"", key=key)
    assert staged.key == key and staged.size == 0
    with pytest.raises(FileExistsError):
        store.stage(b"other", key=key)
    store.promote(staged)
    assert store.read(key) == b""


def test_discard_removes_a_staged_or_promoted_file(store: ArtifactStore) -> None:
    staged, promoted = store.stage(b"1"), store.stage(b"2")
    store.promote(promoted)
    for s in (staged, promoted):
        store.discard(s)
        store.discard(s)  # twice is harmless
    assert store.keys() == set() and store.tmp_files() == []


def test_keys_ignore_foreign_files(store: ArtifactStore) -> None:
    kept = store.stage(b"x")
    store.promote(kept)
    (store.objects / kept.key[:2] / "notes.txt").write_text("hello")
    (store.objects / "zz").mkdir()
    (store.objects / "zz" / ("Z" * 32)).write_bytes(b"")
    assert store.keys() == {kept.key}


def test_collect_orphans_keeps_what_rows_reference(store: ArtifactStore) -> None:
    referenced, orphan = store.stage(b"ref"), store.stage(b"orphan")
    for s in (referenced, orphan):
        store.promote(s)
    pending = store.stage(b"a referenced upload not yet renamed")
    stale = store.stage(b"stale")
    stray = store.tmp / "stray.part"
    stray.write_bytes(b"?")
    never_written = "cd" * 16
    report = store.collect_orphans([referenced.key, pending.key, never_written])
    assert isinstance(report, OrphanReport)
    assert report.removed_objects == [orphan.key]
    assert sorted(report.removed_tmp) == sorted([stale.tmp_path.name, stray.name])
    assert report.missing == sorted([pending.key, never_written])
    assert store.keys() == {referenced.key}
    assert store.tmp_files() == [pending.tmp_path]


def test_collect_orphans_spares_files_younger_than_the_grace(store: ArtifactStore) -> None:
    young, old = store.stage(b"young"), store.stage(b"old")
    store.promote(young)
    store.promote(old)
    young_tmp, old_tmp = store.stage(b"young tmp"), store.stage(b"old tmp")
    an_hour_ago = time.time() - 3600
    for p in (old.final_path, old_tmp.tmp_path):
        os.utime(p, (an_hour_ago, an_hour_ago))
    report = store.collect_orphans([], grace_seconds=60)
    assert report.removed_objects == [old.key] and report.removed_tmp == [old_tmp.tmp_path.name]
    assert store.keys() == {young.key} and store.tmp_files() == [young_tmp.tmp_path]


def test_names_and_keys_with_a_trailing_newline_are_refused(tmp_path: Path) -> None:
    from pubsubml.registry.schemas import check_site_name

    with pytest.raises(ValueError):
        check_site_name("a\n")
    with pytest.raises(NotFoundError, match="invalid artifact key"):
        ArtifactStore(tmp_path).path("0" * 32 + "\n")
