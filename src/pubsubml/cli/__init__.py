"""The ``pubsubml`` command line (:mod:`pubsubml.cli.commands`), loaded on first use.

``pubsubml.cli.commands`` mounts every command group, and with them the experiments, torch and the
plotting stack.  This package face loads it only when ``app`` or ``main`` is asked for, so that a
single group (``python -m pubsubml.cli.registry serve``, which a registry replica runs) starts
without them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from pubsubml.cli.commands import app, main

        return {"app": app, "main": main}[name]
    raise AttributeError(f"module 'pubsubml.cli' has no attribute {name!r}")
