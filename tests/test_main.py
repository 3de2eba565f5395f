"""Tests of pubsubml.__main__: ``python -m pubsubml`` runs the command line.

The module is run in-process with :func:`runpy.run_module` (as ``python -m`` does); a child
interpreter would spend seconds importing the command line again.
"""

from __future__ import annotations

import re
import runpy
import sys

import pytest
import typer

_COMMAND_ROW = re.compile(r"^[│|]?\s{0,2}([a-z][a-z0-9_-]*)\s{2,}\S")


def _run(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int | str | None:
    """Run ``python -m pubsubml *argv``; return its exit status."""
    monkeypatch.setattr(sys, "argv", ["pubsubml", *argv])
    with pytest.raises(SystemExit) as info:
        runpy.run_module("pubsubml", run_name="__main__", alter_sys=False)
    return info.value.code


def _registered_commands() -> set[str]:
    from pubsubml.cli import app

    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    return {name for name, command in group.commands.items() if not command.hidden}


def test_help_exits_zero_and_lists_every_registered_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(["--help"], monkeypatch)

    listed = {
        m.group(1)
        for line in capsys.readouterr().out.splitlines()
        if (m := _COMMAND_ROW.match(line))
    }
    assert code == 0
    registered = _registered_commands()
    assert {"demo", "publish", "subscribe", "registry"} <= registered
    assert registered <= listed


def test_an_unknown_command_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(["no-such-command"], monkeypatch)

    assert code == 2
    assert capsys.readouterr().out == ""  # usage errors go to stderr


def test_a_group_answers_help_through_the_module(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pubsubml.cli import app

    group = typer.main.get_command(app)
    registry = group.commands["registry"]  # type: ignore[attr-defined]
    assert isinstance(registry, typer.core.TyperGroup)

    code = _run(["registry", "--help"], monkeypatch)

    listed = {
        m.group(1)
        for line in capsys.readouterr().out.splitlines()
        if (m := _COMMAND_ROW.match(line))
    }
    assert code == 0
    assert set(registry.commands) <= listed
