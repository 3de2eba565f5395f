"""``pubsubml registry serve|migrate``: serving refuses a database that is not migrated, and
``migrate`` upgrades it to this version's newest revision."""

from __future__ import annotations

from pathlib import Path

from pubsubml.registry.database import Database
from pubsubml.registry.migrate import check_schema, head_revision

ADMIN_TOKEN = "cli-admin-token-" + "x" * 24


def test_cli_serve_refuses_unmigrated_and_migrate_upgrades(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pubsubml.cli.registry import registry_app

    runner = CliRunner()
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {"PUBSUBML_ADMIN_TOKEN": ADMIN_TOKEN}
    r = runner.invoke(registry_app, ["serve", "--db", url, "--store", str(tmp_path / "s")], env=env)
    assert (
        r.exit_code == 1 and "not migrated" in r.output and "pubsubml registry migrate" in r.output
    )
    r = runner.invoke(
        registry_app, ["serve", "--db", url], env={"PUBSUBML_ADMIN_TOKEN": "changeme"}
    )
    assert r.exit_code == 2 and "refusing to start" in r.output
    r = runner.invoke(registry_app, ["migrate", "--db", url])
    assert r.exit_code == 0 and head_revision() in r.output
    db = Database(url)
    assert check_schema(db) == head_revision()
    db.dispose()
