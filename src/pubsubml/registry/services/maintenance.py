"""Start-up consistency between the database and the artifact store.

A publish renames its file into the store before committing the row that references it, so a
crash can leave a file without a row, never a row without a file.  At start-up every such file
is removed (files younger than ``orphan_grace_seconds`` are kept, for registries whose store is
shared with other replicas that may be publishing), and rows whose file is missing are reported.
"""

from __future__ import annotations

import logging

from sqlalchemy import select

from pubsubml.registry.database import Database
from pubsubml.registry.store import ArtifactStore, OrphanReport
from pubsubml.registry.tables import ModelRow

__all__ = ["collect_orphans"]

log = logging.getLogger("pubsubml.registry")


def collect_orphans(
    db: Database, store: ArtifactStore, *, grace_seconds: float = 0.0
) -> OrphanReport:
    """Remove store files that no committed model references; report rows missing their file."""
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
