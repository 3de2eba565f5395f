"""Service functions of the registry: the routes call these, never the database directly."""

from __future__ import annotations

__all__: list[str] = []
