"""``GET /v1/whoami``: the authenticated caller."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from pubsubml.registry.api.deps import PrincipalDep

__all__ = ["WhoAmI", "router"]

router = APIRouter(tags=["auth"])


class WhoAmI(BaseModel):
    """Who the token belongs to."""

    kind: str
    name: str
    roles: str | None


@router.get("/whoami", response_model=WhoAmI)
def whoami(principal: PrincipalDep) -> WhoAmI:
    """The caller's kind (``admin`` or ``site``), name and roles."""
    return WhoAmI(kind=principal.kind, name=principal.name, roles=principal.roles)
