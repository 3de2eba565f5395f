"""``pubsubml publish|subscribe|pull|models list|budget`` against a real registry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from click.testing import Result
from typer.testing import CliRunner

from pubsubml.cli.registry import pull_command, subscribe_command


def test_publish_subscribe_pull_and_list(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    a, b = server["tokens"]["a"], server["tokens"]["b"]
    art = artifacts("a", seed=77)
    art.save(tmp_path / "card")
    r = invoke(["publish", str(tmp_path / "card")], token=a)
    assert r.exit_code == 0 and f"published: {art.card.model_id}" in r.output, r.output
    r = invoke(["publish", str(tmp_path / "card")], token=a)
    assert "already published" in r.output

    r = invoke(["subscribe", "age & sex", "--class", "0", "--class", "1"], token=b)
    assert r.exit_code == 0, r.output
    sub = r.stdout.strip()
    r = invoke(["subscribe", "age &"], token=b)
    assert r.exit_code == 1 and "error" in r.output
    r = invoke(["pull", sub, "--into", str(tmp_path / "inbox")], token=b)
    assert r.exit_code == 0 and "1 model(s) pulled" in r.output, r.output
    assert (tmp_path / "inbox" / art.card.model_id / "card.json").exists()
    r = invoke(["pull", sub, "--into", str(tmp_path / "inbox")], token=b)
    assert "0 model(s) pulled" in r.output  # resumed from the saved cursor

    r = invoke(["models", "list", "--publisher", "a"], token=b)
    assert r.exit_code == 0 and art.card.model_id[:8] in r.output


def test_budget_shows_the_own_ledger_and_refuses_another_sites(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    a = server["tokens"]["a"]
    artifacts("a", seed=78).save(tmp_path / "card")
    assert invoke(["publish", str(tmp_path / "card")], token=a).exit_code == 0
    r = invoke(["budget"], token=a)
    assert r.exit_code == 0 and "site a: spent ε" in r.output
    r = invoke(["budget", "a"], token=server["tokens"]["b"])
    assert r.exit_code == 1 and "may not read the privacy ledger" in r.output


def test_publish_over_budget_is_refused_and_nothing_is_listed(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    artifacts("poor", seed=79).save(tmp_path / "card")
    r = invoke(["publish", str(tmp_path / "card")], token=server["tokens"]["poor"])
    assert r.exit_code == 1 and "budget" in r.output
    r = invoke(["models", "list", "--publisher", "poor"], token=server["tokens"]["b"])
    assert r.exit_code == 0 and "poor" not in r.stdout


def test_client_commands_without_a_token_exit_2(invoke: Callable[..., Result]) -> None:
    r = invoke(["budget"])
    assert r.exit_code == 2 and "no token" in r.output


def test_subscribe_help_gives_the_channel_grammar_and_the_wildcard() -> None:
    app = typer.Typer()
    app.command("subscribe")(subscribe_command)
    app.command("pull")(pull_command)

    r = CliRunner().invoke(app, ["subscribe", "--help"], env={"COLUMNS": "200"})

    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "'&' binds tighter than '|'" in text
    assert "'*' alone is the channel of every model of the task" in text
    assert "'*' for every model of the task" in text
