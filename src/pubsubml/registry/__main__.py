"""``python -m pubsubml.registry serve|migrate``: the registry commands without the top-level CLI."""

from __future__ import annotations

from pubsubml.registry.cli import registry_app

if __name__ == "__main__":
    registry_app()
