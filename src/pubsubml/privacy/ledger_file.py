"""A site's privacy ledger in a JSON file: read, charged and saved under an exclusive lock.

The order that keeps a ledger honest through a crash (DESIGN.md, "Privacy is accounted, never
assumed"): take the lock, read the ledger, check the planned release against the budget, do the
work, charge the release and save the ledger (written to a temporary file, flushed to disk,
renamed over the old one, the folder flushed), and only then let the release leave the site.
A crash at any point leaves a ledger that shows at least what was released; the lock, held from
the read to the end, makes two processes on one ledger take turns instead of both spending the
same remaining budget.  The lock is an advisory ``flock`` on a companion file (``NAME.lock``),
released by the operating system when the process ends, killed or not.

References
----------
pubsub-ml.txt §3.1 (Theorem 1: a site's releases compose) and §6.2 (the site's ledger).
"""

from __future__ import annotations

import fcntl
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.ledger import PrivacyLedger

__all__ = ["LedgerFile"]


class LedgerFile:
    """The ledger of one site kept at ``path``, with a lock file beside it.

    Parameters
    ----------
    path : path
        The ledger's JSON file (:meth:`PrivacyLedger.to_json`); the lock is ``path`` + ``.lock``.

    Examples
    --------
    >>> import tempfile
    >>> from pubsubml.privacy import DPEvent, Release
    >>> file = LedgerFile(Path(tempfile.mkdtemp()) / "ledger.json")
    >>> new = lambda: PrivacyLedger(site="h1", epsilon_budget=1.0, delta=1e-5)
    >>> with file.locked(create=new) as ledger:
    ...     _ = ledger.charge(Release(release_id="m1", events=(DPEvent(mechanism="gaussian",
    ...                                                                 noise_multiplier=10.0),)))
    ...     file.save(ledger)
    >>> [r.release_id for r in file.read().releases]
    ['m1']
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    def read(self) -> PrivacyLedger:
        """The ledger as saved (no lock: a saved ledger is always a whole file).

        Raises
        ------
        InvalidPrivacyParameterError
            The file is unreadable or does not hold a ledger.
        """
        try:
            return PrivacyLedger.from_json(self.path.read_bytes())
        except OSError as exc:
            raise InvalidPrivacyParameterError(
                f"cannot read the ledger {self.path}: {exc}"
            ) from None

    @contextmanager
    def locked(
        self, *, create: Callable[[], PrivacyLedger] | None = None
    ) -> Iterator[PrivacyLedger]:
        """Hold the ledger's exclusive lock and yield the ledger read under it.

        Parameters
        ----------
        create : callable, optional
            Makes the ledger when the file does not exist yet (it is saved only by
            :meth:`save`).  Without it a missing file is an error.

        Raises
        ------
        InvalidPrivacyParameterError
            No ledger file and no ``create``, or a file that does not hold a ledger.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if self.path.exists():
                ledger = self.read()
            elif create is not None:
                ledger = create()
            else:
                raise InvalidPrivacyParameterError(f"no ledger at {self.path}")
            yield ledger
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def save(self, ledger: PrivacyLedger) -> None:
        """Replace the file with ``ledger`` atomically and durably (call under :meth:`locked`)."""
        data = ledger.to_json().encode("utf-8")
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        folder = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
