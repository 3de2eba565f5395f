"""``GET /v1/health``: liveness, schema revision and limits (no authentication)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from pubsubml.registry.api.deps import SettingsDep

__all__ = ["Health", "router"]

router = APIRouter(tags=["health"])


class Health(BaseModel):
    """Liveness answer."""

    status: str
    max_upload_bytes: int


@router.get("/health", response_model=Health)
def health(settings: SettingsDep) -> Health:
    """The service is up; also tells clients the upload limit."""
    return Health(status="ok", max_upload_bytes=settings.max_upload_bytes)
