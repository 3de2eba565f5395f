"""One module per resource of the ``/v1`` API."""

from __future__ import annotations

__all__: list[str] = []
