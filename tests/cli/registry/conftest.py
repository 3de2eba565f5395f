"""Fixtures of the registry command tests: a real uvicorn registry on 127.0.0.1 and a CLI runner.

The backends, artifacts and server helpers are the registry suite's (``tests/registry/conftest.py``),
re-exported here so the command tests run on the same SQLite and PostgreSQL contract backends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import typer
from click.testing import Result
from typer.testing import CliRunner

from pubsubml.cli.registry import (
    budget_command,
    features_app,
    models_app,
    publish_command,
    pull_command,
    site_app,
    subscribe_command,
)
from registry.conftest import (  # the registry suite's fixtures, shared
    artifacts,
    backend,
    pg_migrated,
    pg_user,
    server,
    sqlite_template,
    support,
)

__all__ = [
    "artifacts",
    "backend",
    "pg_migrated",
    "pg_user",
    "server",
    "sqlite_template",
    "support",
]


@pytest.fixture
def invoke(server: dict[str, Any], support: Any) -> Callable[..., Result]:
    """``invoke(args, token=None)``: run the registry's client commands against ``server``.

    Without ``token`` the command runs with the administrator token only.
    """
    app = typer.Typer()
    app.add_typer(site_app, name="site")
    app.add_typer(features_app, name="features")
    app.add_typer(models_app, name="models")
    app.command("publish")(publish_command)
    app.command("subscribe")(subscribe_command)
    app.command("pull")(pull_command)
    app.command("budget")(budget_command)
    runner = CliRunner()
    base = {"PUBSUBML_REGISTRY_URL": server["url"], "PUBSUBML_ADMIN_TOKEN": support.ADMIN_TOKEN}

    def run(args: list[str], token: str | None = None) -> Result:
        env = base if token is None else {**base, "PUBSUBML_TOKEN": token}
        return runner.invoke(app, args, env=env)

    return run
