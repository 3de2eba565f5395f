"""The ProxyFL command line: mounting ``launch`` and its rank ranges."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from pubsubml.cli import proxyfl as proxyfl_cli


def _root() -> typer.Typer:
    root = typer.Typer()
    root.add_typer(proxyfl_cli.app, name="proxyfl")
    return root


def test_launch_is_mounted_and_the_benches_are_not_under_proxyfl() -> None:
    assert "launch" in CliRunner().invoke(_root(), ["proxyfl", "--help"]).output
    assert CliRunner().invoke(_root(), ["proxyfl", "bench", "accuracy"]).exit_code != 0


def test_rank_ranges() -> None:
    assert proxyfl_cli._ranks("0-2,5", 8) == [0, 1, 2, 5]
    assert proxyfl_cli._ranks(None, 3) == [0, 1, 2]
