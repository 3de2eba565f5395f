"""Start-up consistency between the database and the artifact store.

A publish renames its file into the store inside the transaction that records the model, while
holding the feed lock.  Collecting orphans while holding the same lock therefore never races a
publish: every file without a committed row is debris of an interrupted publish and is removed.
"""

from __future__ import annotations

import logging

from sqlalchemy import select

from pubsubml.registry.database import Database
from pubsubml.registry.services.feed import FeedWriter
from pubsubml.registry.store import ArtifactStore, OrphanReport
from pubsubml.registry.tables import ModelRow

__all__ = ["collect_orphans"]

log = logging.getLogger("pubsubml.registry")


def collect_orphans(
    db: Database, store: ArtifactStore, *, grace_seconds: float = 0.0
) -> OrphanReport:
    """Remove store files that no committed model references; report rows missing their file."""
    with db.write() as session:
        FeedWriter(session)  # hold the feed lock: no publish is between its rename and its commit
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
