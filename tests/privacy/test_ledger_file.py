"""A ledger file: read, charged and saved under an exclusive lock (pubsubml.privacy.ledger_file)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.privacy.ledger_file import LedgerFile

EVENT = DPEvent(mechanism="gaussian", noise_multiplier=10.0)


def _new() -> PrivacyLedger:
    return PrivacyLedger(site="h1", epsilon_budget=1.0, delta=1e-5)


def test_a_new_ledger_is_saved_only_when_asked(tmp_path: Path) -> None:
    file = LedgerFile(tmp_path / "sub" / "ledger.json")
    with file.locked(create=_new) as ledger:
        assert ledger.releases == []
    assert not file.path.exists()
    with file.locked(create=_new) as ledger:
        ledger.charge(Release(release_id="m1", events=(EVENT,)))
        file.save(ledger)
    assert [r.release_id for r in file.read().releases] == ["m1"]
    assert file.path.stat().st_mode & 0o077 == 0
    assert [p.name for p in file.path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_the_lock_is_exclusive_while_held(tmp_path: Path) -> None:
    file = LedgerFile(tmp_path / "ledger.json")
    with file.locked(create=_new):
        fd = os.open(file.lock_path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    fd = os.open(file.lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released at the end of the block
    finally:
        os.close(fd)


def test_a_missing_or_corrupt_ledger_is_an_error(tmp_path: Path) -> None:
    file = LedgerFile(tmp_path / "ledger.json")
    with pytest.raises(InvalidPrivacyParameterError, match="no ledger"):
        with file.locked():
            pass
    file.path.write_text("{not json")
    with pytest.raises(InvalidPrivacyParameterError):
        with file.locked(create=_new):
            pass
    assert file.path.read_text() == "{not json"
