"""HTTP layer of the registry: dependencies, error answers, upload parsing and routes."""

from __future__ import annotations

__all__: list[str] = []
