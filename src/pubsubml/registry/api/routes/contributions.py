"""``/v1/contributions``: subscribers' normalized contribution scores (pfl-stacking.txt §3)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from pubsubml.registry.api.deps import DatabaseDep, PrincipalDep
from pubsubml.registry.schemas import ContributionList, ContributionReport
from pubsubml.registry.services import contributions as service

__all__ = ["router"]

router = APIRouter(prefix="/contributions", tags=["contributions"])


@router.post("", response_model=ContributionList, status_code=status.HTTP_201_CREATED)
def report(body: ContributionReport, principal: PrincipalDep, db: DatabaseDep) -> ContributionList:
    """Store a subscriber's scores (the subscriber itself only)."""
    with db.write() as session:
        return ContributionList(
            contributions=service.report_contributions(session, principal, body)
        )


@router.get("", response_model=ContributionList)
def list_contributions(
    principal: PrincipalDep,
    db: DatabaseDep,
    model_id: Annotated[str | None, Query(max_length=64)] = None,
    subscriber: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=10000)] = 1000,
) -> ContributionList:
    """Scores of models the caller may see, newest first."""
    with db.read() as session:
        rows = service.list_contributions(
            session, principal, model_id=model_id, subscriber=subscriber, limit=limit
        )
    return ContributionList(contributions=rows)
