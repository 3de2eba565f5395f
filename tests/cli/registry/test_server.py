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


def test_the_registry_commands_start_without_the_other_groups() -> None:
    import subprocess
    import sys

    code = (
        "import sys, runpy; sys.argv = ['x', '--help']\n"
        "try:\n    runpy.run_module('pubsubml.cli.registry', run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "assert 'torch' not in sys.modules and 'pubsubml.experiments' not in sys.modules\n"
        "print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr
