"""``/v1/sites``: register sites (administrator), read the site directory, rotate and revoke a
site's token (the site itself or the administrator)."""

from __future__ import annotations

from fastapi import APIRouter, status

from pubsubml.registry.api.deps import DatabaseDep, PrincipalDep, StateDep
from pubsubml.registry.schemas import (
    SiteCreate,
    SiteCreated,
    SiteList,
    SitePublic,
    SiteToken,
    TokenRotate,
)
from pubsubml.registry.services import sites as service

__all__ = ["router"]

router = APIRouter(prefix="/sites", tags=["sites"])


@router.post("", response_model=SiteCreated, status_code=status.HTTP_201_CREATED)
def create_site(body: SiteCreate, principal: PrincipalDep, db: DatabaseDep) -> SiteCreated:
    """Register a site; the answer holds its token, which is never shown again."""
    with db.write() as session:
        return service.create_site(session, principal, body)


@router.get("", response_model=SiteList)
def list_sites(principal: PrincipalDep, db: DatabaseDep) -> SiteList:
    """Every site with its roles, public key and declared budget."""
    with db.read() as session:
        return SiteList(sites=service.list_sites(session))


@router.get("/{name}", response_model=SitePublic)
def get_site(name: str, principal: PrincipalDep, db: DatabaseDep) -> SitePublic:
    """One site."""
    with db.read() as session:
        return service.site_public(service.get_site_row(session, name))


@router.post("/{name}/token", response_model=SiteToken)
def rotate_token(
    name: str, principal: PrincipalDep, db: DatabaseDep, state: StateDep, body: TokenRotate
) -> SiteToken:
    """A new token for the site (shown once); the old one stops working at once on this
    replica and within the principal cache's few seconds on the others."""
    with db.write() as session:
        result = service.rotate_token(session, principal, name, body)
    state.principals.clear()
    return result


@router.delete("/{name}/token", response_model=SitePublic)
def revoke_token(
    name: str, principal: PrincipalDep, db: DatabaseDep, state: StateDep
) -> SitePublic:
    """Revoke the site's token until the administrator rotates it."""
    with db.write() as session:
        result = service.revoke_token(session, principal, name)
    state.principals.clear()
    return result
