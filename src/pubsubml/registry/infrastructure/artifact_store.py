"""The local artifact store: published weights as files, written atomically.

Both stores (this one and
:class:`~pubsubml.registry.infrastructure.database_artifact_store.DatabaseArtifactStore`) follow the
:class:`ArtifactStorage` contract: :meth:`~ArtifactStorage.stage` refuses an upload over the size
limit or whose SHA-256 is not the one expected, with nothing stored; a staged artifact is invisible
until promoted; :meth:`~ArtifactStorage.collect_orphans` removes what no committed row references.

A publish writes the weights to ``tmp/<key>.part`` and fsyncs it (:meth:`ArtifactStore.stage`),
renames it to ``objects/<key[:2]>/<key>`` and fsyncs the directory (:meth:`ArtifactStore.promote`),
and only then commits the database transaction that records the model.  Every key is new (a
random UUID), so no two publishes ever touch the same file.  A committed model row therefore
always has its file; a crash can only leave files that no row references, which
:meth:`ArtifactStore.collect_orphans` removes at start-up.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from pubsubml.errors import DigestMismatchError, NotFoundError, PayloadTooLargeError

__all__ = [
    "ArtifactStorage",
    "ArtifactStore",
    "OrphanReport",
    "StagedArtifact",
    "check_key",
    "check_upload",
    "new_key",
]

_KEY_RE = re.compile(r"^[0-9a-f]{32}$")
_READ_CHUNK = 1 << 20


def new_key() -> str:
    """A fresh artifact key (32 hex characters)."""
    return uuid.uuid4().hex


def check_key(key: str) -> str:
    """``key`` if it is a 32-character hex key, else :class:`NotFoundError`."""
    if not _KEY_RE.fullmatch(key):
        raise NotFoundError(f"invalid artifact key {key[:40]!r}")
    return key


def check_upload(data: bytes, *, max_bytes: int | None, sha256: str | None) -> str:
    """The SHA-256 of ``data`` after the checks every store makes before writing anything.

    Raises
    ------
    PayloadTooLargeError
        ``data`` is larger than ``max_bytes``.
    DigestMismatchError
        ``sha256`` is given and is not the digest of ``data``.
    """
    if max_bytes is not None and len(data) > max_bytes:
        raise PayloadTooLargeError(
            f"the artifact has {len(data)} bytes, the store's limit is {max_bytes} bytes"
        )
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and digest != sha256:
        raise DigestMismatchError(f"the artifact has SHA-256 {digest}, {sha256} was expected")
    return digest


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class StagedArtifact:
    """Weights written durably, not yet referenced by a committed row.

    In the file store they lie under ``tmp/`` (``tmp_path``) until promoted to ``final_path``;
    in the database store they are rows from the start (no paths).
    """

    key: str
    size: int
    tmp_path: Path | None = None
    final_path: Path | None = None
    promoted: bool = False
    sha256: str = ""


@dataclass
class OrphanReport:
    """What :meth:`ArtifactStore.collect_orphans` found."""

    removed_tmp: list[str] = field(default_factory=list)
    removed_objects: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


class ArtifactStorage(Protocol):
    """What the publish path, the downloads and the start-up collection need of a store."""

    max_bytes: int | None

    def stage(
        self, data: bytes, key: str | None = None, *, sha256: str | None = None
    ) -> StagedArtifact:
        """Write ``data`` durably under a fresh key (or ``key``), invisible until promoted."""
        ...

    def promote(self, staged: StagedArtifact) -> None:
        """Make a staged artifact part of the store (still unreferenced until a row commits)."""
        ...

    def discard(self, staged: StagedArtifact) -> None:
        """Remove a staged (or promoted but never committed) artifact."""
        ...

    def read(self, key: str, *, sha256: str | None = None) -> bytes:
        """The bytes of ``key`` (checked against ``sha256`` when given)."""
        ...

    def chunks(self, key: str, *, sha256: str | None = None) -> Iterator[bytes]:
        """The bytes of ``key`` in chunks; the digest is checked after the last one."""
        ...

    def keys(self) -> set[str]:
        """Keys of every stored artifact."""
        ...

    def collect_orphans(
        self, referenced: Iterable[str], *, grace_seconds: float = 0.0
    ) -> OrphanReport:
        """Delete what no committed row references (see :class:`ArtifactStore`)."""
        ...


class ArtifactStore:
    """Published weights stored as files under ``root``.

    Parameters
    ----------
    root : path-like
        Folder of the store; ``objects/`` and ``tmp/`` are created inside.
    max_bytes : int, optional
        Largest artifact :meth:`stage` accepts (default: no limit of its own).

    Examples
    --------
    >>> import tempfile
    >>> store = ArtifactStore(tempfile.mkdtemp())
    >>> staged = store.stage(b"weights")
    >>> store.promote(staged)
    >>> store.read(staged.key)
    b'weights'
    """

    def __init__(self, root: str | os.PathLike[str], *, max_bytes: int | None = None) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.objects = self.root / "objects"
        self.tmp = self.root / "tmp"
        self.objects.mkdir(parents=True, exist_ok=True)
        self.tmp.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        """Path of the object ``key`` (a 32-character hex key made by :meth:`stage`)."""
        return self.objects / check_key(key)[:2] / key

    new_key = staticmethod(new_key)

    def stage(
        self, data: bytes, key: str | None = None, *, sha256: str | None = None
    ) -> StagedArtifact:
        """Write ``data`` to a new temporary file under ``key`` (default: a fresh one), fsync it.

        Raises
        ------
        PayloadTooLargeError, DigestMismatchError
            Over ``max_bytes``, or not the ``sha256`` expected: nothing is written.
        FileExistsError
            ``key`` is taken.
        """
        digest = check_upload(data, max_bytes=self.max_bytes, sha256=sha256)
        key = check_key(key or self.new_key())
        if self.path(key).exists():
            raise FileExistsError(f"artifact {key!r} already exists in the store")
        tmp_path = self.tmp / f"{key}.part"
        with open(tmp_path, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return StagedArtifact(
            key=key, tmp_path=tmp_path, final_path=self.path(key), size=len(data), sha256=digest
        )

    def promote(self, staged: StagedArtifact) -> None:
        """Rename the staged file to its final place and fsync the directories."""
        assert staged.tmp_path is not None and staged.final_path is not None
        staged.final_path.parent.mkdir(exist_ok=True)
        os.replace(staged.tmp_path, staged.final_path)
        staged.promoted = True
        _fsync_dir(staged.final_path.parent)

    def discard(self, staged: StagedArtifact) -> None:
        """Remove a staged (or promoted but never committed) file."""
        for p in (staged.tmp_path, staged.final_path):
            if p is not None:
                p.unlink(missing_ok=True)

    def read(self, key: str, *, sha256: str | None = None) -> bytes:
        """The bytes of object ``key``.

        Raises
        ------
        NotFoundError
            No such object.
        DigestMismatchError
            ``sha256`` is given and the file's bytes have another digest.
        """
        try:
            data = self.path(key).read_bytes()
        except FileNotFoundError:
            raise NotFoundError(f"artifact {key!r} is missing from the store") from None
        if sha256 is not None:
            check_upload(data, max_bytes=None, sha256=sha256)
        return data

    def chunks(self, key: str, *, sha256: str | None = None) -> Iterator[bytes]:
        """The bytes of ``key`` in chunks of 1 MiB, the digest checked after the last.

        Raises
        ------
        NotFoundError
            No such object (when called, before any chunk).
        DigestMismatchError
            After the last chunk, when the bytes do not have ``sha256``.
        """
        try:
            fh = open(self.path(key), "rb")  # closed by the generator
        except FileNotFoundError:
            raise NotFoundError(f"artifact {key!r} is missing from the store") from None
        return _file_chunks(fh, key, sha256)

    def keys(self) -> set[str]:
        """Keys of every stored object (promoted, whether referenced or not)."""
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


def _file_chunks(fh: BinaryIO, key: str, sha256: str | None) -> Iterator[bytes]:
    digest = hashlib.sha256()
    with fh:
        while chunk := fh.read(_READ_CHUNK):
            digest.update(chunk)
            yield chunk
    if sha256 is not None and digest.hexdigest() != sha256:
        raise DigestMismatchError(
            f"artifact {key!r} has SHA-256 {digest.hexdigest()} in the store, {sha256} was expected"
        )
