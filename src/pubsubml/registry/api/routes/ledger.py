"""``GET /v1/sites/{name}/ledger``: a site's privacy ledger."""

from __future__ import annotations

from fastapi import APIRouter

from pubsubml.registry.api.deps import DatabaseDep, PrincipalDep
from pubsubml.registry.schemas import LedgerPublic
from pubsubml.registry.services import ledger as service

__all__ = ["router"]

router = APIRouter(prefix="/sites", tags=["ledger"])


@router.get("/{name}/ledger", response_model=LedgerPublic)
def read_ledger(name: str, principal: PrincipalDep, db: DatabaseDep) -> LedgerPublic:
    """Declared budget, charged releases and spent ε (the site itself or the administrator)."""
    with db.read() as session:
        return service.read_ledger(session, principal, name)
