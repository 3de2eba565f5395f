"""The ProxyFL command line: mounting, rank ranges and a smoke bench."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import typer
from typer.testing import CliRunner

from pubsubml.cli import proxyfl as proxyfl_cli


@pytest.fixture(autouse=True)
def _restore_torch_threads() -> Iterator[None]:
    """The bench commands set one torch thread for their process: restore it after each test."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)  # the commands set one thread for their process


def _root() -> typer.Typer:
    root, bench = typer.Typer(), typer.Typer()
    root.add_typer(proxyfl_cli.app, name="proxyfl")
    root.add_typer(bench, name="bench")
    proxyfl_cli.register_bench_commands(bench)
    return root


def test_bench_commands_are_mounted_under_their_names() -> None:
    result = CliRunner().invoke(_root(), ["bench", "--help"])
    for name in ("proxyfl-accuracy", "proxyfl-communication", "proxyfl-ablations"):
        assert name in result.output
    assert "launch" in CliRunner().invoke(_root(), ["proxyfl", "--help"]).output


def test_rank_ranges() -> None:
    assert proxyfl_cli._ranks("0-2,5", 8) == [0, 1, 2, 5]
    assert proxyfl_cli._ranks(None, 3) == [0, 1, 2]


def test_benches_are_reachable_once_with_the_shared_options(tmp_path: Path) -> None:
    assert CliRunner().invoke(_root(), ["proxyfl", "bench", "accuracy"]).exit_code != 0
    bad = tmp_path / "a-file"
    bad.write_text("")

    result = CliRunner().invoke(
        _root(), ["bench", "proxyfl-accuracy", "--smoke", "--out-dir", str(bad)]
    )

    assert result.exit_code == 2, result.output  # the folder is checked before anything runs
    assert bad.read_text() == ""


def test_epsilon_rows_say_what_epsilon_covers() -> None:
    from pubsubml.experiments.proxyfl.experiments import MethodRun, make_federated

    setup = proxyfl_cli._setups(True)[0]
    split = make_federated(setup.dataset, **setup.split_kw)  # type: ignore[arg-type]
    k = len(split.clients)
    for guarantee in ("dp", "paper accounting"):
        run = MethodRun(rows=[], epsilons=[1.0] * k, seconds=0.0, guarantee=guarantee)
        rows = proxyfl_cli._eps_rows("ProxyFL", split, setup, run)
        assert [r["guarantee"] for r in rows] == [guarantee] * k
