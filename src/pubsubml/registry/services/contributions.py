"""Contribution scores: how much each received model helped a subscriber (pfl-stacking.txt §3).

A subscriber reports the normalized importance of every model in its personalized (stacked)
model; the federation aggregates the reports into a contribution graph.  Reports are stored as
sent (append-only, one ``report_id`` per report); a caller sees the scores of models it may see.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from pubsubml.errors import NotFoundError, PermissionDeniedError
from pubsubml.registry.auth import Principal
from pubsubml.registry.schemas import ContributionPublic, ContributionReport
from pubsubml.registry.services.model_reads import model_visible_clause
from pubsubml.registry.services.sites import get_site_row
from pubsubml.registry.tables import ContributionRow, ModelRow, SiteRow, utcnow

__all__ = ["list_contributions", "report_contributions"]


def report_contributions(
    session: Session, principal: Principal, body: ContributionReport
) -> list[ContributionPublic]:
    """Store a subscriber's scores.

    Raises
    ------
    PermissionDeniedError
        A site reports for another site, or lacks the subscriber role (only a subscriber's
        CUSTOMIZE produces contribution scores, pubsub-ml.txt §3.2).
    NotFoundError
        A score names a model the subscriber may not see (or that does not exist).
    """
    principal.require_site(body.subscriber, "report contributions")
    site = get_site_row(session, body.subscriber)
    if site.roles not in ("subscriber", "both"):
        raise PermissionDeniedError(f"site {site.name!r} does not have the subscriber role")
    viewer = Principal(kind="site", site_id=site.id, name=site.name, roles=site.roles)  # type: ignore[arg-type]
    ids = sorted(body.scores)
    visible = set(
        session.execute(
            select(ModelRow.id).where(ModelRow.id.in_(ids), model_visible_clause(viewer))
        ).scalars()
    )
    missing = [m for m in ids if m not in visible]
    if missing:
        raise NotFoundError(f"contribution scores name models that were not found: {missing[:5]}")
    report_id = uuid.uuid4().hex
    now = utcnow()
    rows = [
        ContributionRow(
            report_id=report_id,
            subscriber_id=site.id,
            model_id=m,
            score=body.scores[m],
            created_at=now,
        )
        for m in ids
    ]
    session.add_all(rows)
    session.flush()
    return [
        ContributionPublic(
            report_id=report_id,
            subscriber=site.name,
            model_id=r.model_id,
            score=r.score,
            created_at=now,
        )
        for r in rows
    ]


def list_contributions(
    session: Session,
    principal: Principal,
    *,
    model_id: str | None = None,
    subscriber: str | None = None,
    limit: int = 1000,
) -> list[ContributionPublic]:
    """Stored scores of models the caller may see, newest report first, optionally filtered."""
    stmt = (
        select(ContributionRow, SiteRow.name)
        .join(SiteRow, SiteRow.id == ContributionRow.subscriber_id)
        .join(ModelRow, ModelRow.id == ContributionRow.model_id)
        .where(model_visible_clause(principal))
    )
    if model_id is not None:
        stmt = stmt.where(ContributionRow.model_id == model_id)
    if subscriber is not None:
        stmt = stmt.where(SiteRow.name == subscriber)
    stmt = stmt.order_by(ContributionRow.id.desc()).limit(limit)
    return [
        ContributionPublic(
            report_id=r.report_id,
            subscriber=name,
            model_id=r.model_id,
            score=r.score,
            created_at=r.created_at,
        )
        for r, name in session.execute(stmt).all()
    ]
