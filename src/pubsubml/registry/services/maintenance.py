"""Start-up consistency between the database and the artifact store.

A publish renames its file into the store before committing the row that references it, so a
crash can leave a file without a row, never a row without a file.  At start-up every such file
is removed, and rows whose file is missing are reported.

Several replicas may share one store, and one may start while another publishes.  So a publish
first commits its artifact key as a *pending upload* (``pending_uploads``), then writes the file,
then, in the transaction that inserts the model, deletes its pending row and refuses to commit
if that row is gone.  The collection first deletes pending rows older than
``orphan_grace_seconds`` (crash leftovers: with the default 0, every pending row at a single
process's start-up), then lists the store, then reads the database, and removes only listed
files that no model and no remaining pending row references.  A publish whose pending row a
restarting replica took therefore fails (409, retry) instead of being acknowledged with its file
gone; with the grace above the longest publish, a restart interrupts no other replica's publish.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import delete, select

from pubsubml.registry.database import Database
from pubsubml.registry.store import ArtifactStore, OrphanReport
from pubsubml.registry.tables import ModelRow, PendingUploadRow, utcnow

__all__ = ["collect_orphans"]

log = logging.getLogger("pubsubml.registry")


def collect_orphans(
    db: Database, store: ArtifactStore, *, grace_seconds: float = 0.0
) -> OrphanReport:
    """Remove store files that no committed model or publish in progress references; report rows
    missing their file (see the module notes for the order that makes this safe)."""
    cutoff = utcnow() - timedelta(seconds=grace_seconds)
    with db.write() as session:  # crash leftovers; a live publish then refuses to commit
        session.execute(delete(PendingUploadRow).where(PendingUploadRow.created_at <= cutoff))
    candidates, tmp_candidates = store.keys(), store.tmp_files()  # before the database read
    with db.read() as session:
        referenced = set(session.execute(select(ModelRow.storage_key)).scalars())
        pending = set(session.execute(select(PendingUploadRow.storage_key)).scalars())
    report = store.collect_orphans(
        referenced,
        grace_seconds=grace_seconds,
        candidates=candidates,
        tmp_candidates=tmp_candidates,
        protected=pending,
    )
    if report.removed_objects or report.removed_tmp:
        log.warning(
            "removed %d orphan artifact(s) and %d temporary file(s) left by interrupted publishes",
            len(report.removed_objects),
            len(report.removed_tmp),
        )
    if report.missing:
        log.error("models whose artifact is missing from the store: %s", report.missing[:20])
    return report
