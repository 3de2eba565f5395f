"""The local artifact store: published weights as files, written atomically.

A publish writes the weights to ``tmp/<key>.part`` and fsyncs it (:meth:`ArtifactStore.stage`),
renames it to ``objects/<key[:2]>/<key>`` and fsyncs the directory (:meth:`ArtifactStore.promote`),
and only then commits the database transaction that records the model.  Every key is new (a
random UUID), so no two publishes ever touch the same file.  A committed model row therefore
always has its file; a crash can only leave files that no row references, which
:meth:`ArtifactStore.collect_orphans` removes at start-up.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pubsubml.errors import NotFoundError

__all__ = ["ArtifactStore", "OrphanReport", "StagedArtifact"]

_KEY_RE = re.compile(r"^[0-9a-f]{32}$")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class StagedArtifact:
    """Weights written and fsynced under ``tmp/``, not yet part of the store."""

    key: str
    tmp_path: Path
    final_path: Path
    size: int
    promoted: bool = False


@dataclass
class OrphanReport:
    """What :meth:`ArtifactStore.collect_orphans` found."""

    removed_tmp: list[str] = field(default_factory=list)
    removed_objects: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


class ArtifactStore:
    """Published weights stored as files under ``root``.

    Parameters
    ----------
    root : path-like
        Folder of the store; ``objects/`` and ``tmp/`` are created inside.

    Examples
    --------
    >>> import tempfile
    >>> store = ArtifactStore(tempfile.mkdtemp())
    >>> staged = store.stage(b"weights")
    >>> store.promote(staged)
    >>> store.read(staged.key)
    b'weights'
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.objects = self.root / "objects"
        self.tmp = self.root / "tmp"
        self.objects.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        """Path of the object ``key`` (a 32-character hex key made by :meth:`stage`)."""
        if not _KEY_RE.fullmatch(key):
            raise NotFoundError(f"invalid artifact key {key[:40]!r}")
        return self.objects / key[:2] / key

    @staticmethod
    def new_key() -> str:
        """A fresh artifact key (32 hex characters)."""
        return uuid.uuid4().hex

    def stage(self, data: bytes, key: str | None = None) -> StagedArtifact:
        """Write ``data`` to a new temporary file under ``key`` (default: a fresh one), fsync it."""
        key = key or self.new_key()
        tmp_path = self.tmp / f"{key}.part"
        with open(tmp_path, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return StagedArtifact(key=key, tmp_path=tmp_path, final_path=self.path(key), size=len(data))

    def promote(self, staged: StagedArtifact) -> None:
        """Rename the staged file to its final place and fsync the directories."""
        staged.final_path.parent.mkdir(exist_ok=True)
        os.replace(staged.tmp_path, staged.final_path)
        staged.promoted = True
        _fsync_dir(staged.final_path.parent)

    def discard(self, staged: StagedArtifact) -> None:
        """Remove a staged (or promoted but never committed) file."""
        for p in (staged.tmp_path, staged.final_path):
            p.unlink(missing_ok=True)

    def read(self, key: str) -> bytes:
        """The bytes of object ``key``.

        Raises
        ------
        NotFoundError
            No such object.
        """
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            raise NotFoundError(f"artifact {key!r} is missing from the store") from None

    def keys(self) -> set[str]:
        """Keys of every stored object."""
        return {p.name for p in self.objects.glob("*/*") if _KEY_RE.fullmatch(p.name)}

    def tmp_files(self) -> list[Path]:
        """Temporary files of uploads in progress or interrupted."""
        return sorted(self.tmp.iterdir())

    def collect_orphans(
        self,
        referenced: Iterable[str],
        *,
        grace_seconds: float = 0.0,
    ) -> OrphanReport:
        """Delete objects no committed row references and stale temporary files.

        Parameters
        ----------
        referenced : iterable of str
            Storage keys of committed models (read before calling).
        grace_seconds : float, default=0
            Files younger than this are kept.  The caller makes sure no publish is in progress
            (:func:`pubsubml.registry.services.maintenance.collect_orphans` holds the upload
            lock), so 0 is safe.
        """
        report = OrphanReport()
        wanted = set(referenced)
        now = time.time()

        def stale(p: Path) -> bool:
            try:
                return now - p.stat().st_mtime >= grace_seconds
            except FileNotFoundError:  # pragma: no cover - removed concurrently
                return False

        keep = wanted
        for key in sorted(self.keys() - keep):
            if stale(self.path(key)):
                self.path(key).unlink(missing_ok=True)
                report.removed_objects.append(key)
        for p in self.tmp_files():
            if p.name.split(".")[0] in keep:
                continue
            if stale(p):
                p.unlink(missing_ok=True)
                report.removed_tmp.append(p.name)
        report.missing = sorted(wanted - self.keys())
        return report
