"""``GET /v1/sites/{name}/ledger``: a site's privacy ledger; ``/v1/sites/{name}/scopes``: the data
chunks it declared disjoint (registered before a release may name them)."""

from __future__ import annotations

from fastapi import APIRouter

from pubsubml.registry.api.deps import DatabaseDep, PrincipalDep
from pubsubml.registry.schemas import LedgerPublic, ScopeList, ScopeRegister
from pubsubml.registry.services import ledger as service

__all__ = ["router"]

router = APIRouter(prefix="/sites", tags=["ledger"])


@router.get("/{name}/ledger", response_model=LedgerPublic)
def read_ledger(name: str, principal: PrincipalDep, db: DatabaseDep) -> LedgerPublic:
    """Declared budget, charged releases and spent ε (the site itself or the administrator)."""
    with db.read() as session:
        return service.read_ledger(session, principal, name)


@router.post("/{name}/scopes", response_model=ScopeList)
def register_scopes(
    name: str, body: ScopeRegister, principal: PrincipalDep, db: DatabaseDep
) -> ScopeList:
    """Declare disjoint data chunks (the site itself); labels already registered are kept."""
    with db.write() as session:
        return service.register_scopes(session, principal, name, body)


@router.get("/{name}/scopes", response_model=ScopeList)
def list_scopes(name: str, principal: PrincipalDep, db: DatabaseDep) -> ScopeList:
    """The site's registered data chunks, with when (the site itself or the administrator)."""
    with db.read() as session:
        return service.list_scopes(session, principal, name)
