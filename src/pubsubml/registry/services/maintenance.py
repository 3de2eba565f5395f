"""Start-up consistency between the database and the artifact store.

A publish renames its file into the store before committing the row that references it, so a
crash can leave a file without a row, never a row without a file.  At start-up every such file
is removed, and rows whose file is missing are reported.

Several replicas may share one store, and one may start while another publishes.  The
collection therefore holds the upload lock exclusively
(:class:`~pubsubml.registry.infrastructure.upload_lock. UploadLock`) while it lists the store, reads
the database and removes the unreferenced files; every publish holds it shared from before its file
is written until its transaction ended.  A file seen by the collection thus belongs to a committed
model or to a publish that will never commit: a restart interrupts no other replica's publish, and
an acknowledged model never loses its file.
"""

from __future__ import annotations

import logging

from sqlalchemy import select

from pubsubml.registry.infrastructure.artifact_store import ArtifactStorage, OrphanReport
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.tables import ModelRow

__all__ = ["collect_orphans"]

log = logging.getLogger("pubsubml.registry")


def collect_orphans(
    db: Database, store: ArtifactStorage, lock: UploadLock, *, grace_seconds: float = 0.0
) -> OrphanReport:
    """Remove store files that no committed model references and report rows missing their
    file, holding the upload lock exclusively (see the module notes).

    ``grace_seconds`` keeps unreferenced files younger than that (for an operator who wants
    time to inspect leftovers); the lock alone makes the collection safe.

    Raises
    ------
    ServiceBusyError
        The publishes in progress did not finish within the lock's timeout.
    """
    with lock.exclusive():
        with db.read() as session:
            referenced = set(session.execute(select(ModelRow.storage_key)).scalars())
        report = store.collect_orphans(referenced, grace_seconds=grace_seconds)
    if report.removed_objects or report.removed_tmp:
        log.warning(
            "removed %d orphan artifact(s) and %d temporary file(s) left by interrupted publishes",
            len(report.removed_objects),
            len(report.removed_tmp),
        )
    if report.missing:
        log.error("models whose artifact is missing from the store: %s", report.missing[:20])
    return report
