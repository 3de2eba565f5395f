"""``pubsubml registry serve|migrate|wait``: serving refuses a database that is not migrated,
``migrate`` upgrades it to this version's newest revision, and ``wait`` returns once a registry
answers or fails after its timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_wait_exits_0_once_the_registry_answers(server: dict[str, Any]) -> None:
    from typer.testing import CliRunner

    from pubsubml.cli.registry import registry_app

    r = CliRunner().invoke(registry_app, ["wait", "--url", server["url"], "--timeout", "10"])

    assert r.exit_code == 0, r.output
    assert f"registry at {server['url']} is up" in r.stdout


def test_wait_gives_up_with_an_error_after_the_timeout(support: Any) -> None:
    from typer.testing import CliRunner

    from pubsubml.cli.registry import registry_app

    url = f"http://127.0.0.1:{support.free_port()}"  # nothing listens there

    r = CliRunner().invoke(registry_app, ["wait", "--url", url, "--timeout", "0.5"])

    assert r.exit_code == 1, r.output
    assert r.stdout == ""
    assert r.stderr.startswith("error:") and f"no registry answered at {url}" in r.stderr
