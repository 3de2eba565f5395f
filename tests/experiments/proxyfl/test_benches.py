"""The ProxyFL benchmarks as experiments: names, shared options and their commands."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from pubsubml.cli.bench import register_experiments
from pubsubml.experiments.proxyfl.benches import EXPERIMENTS


def _bench_app() -> typer.Typer:
    root, bench = typer.Typer(), typer.Typer()
    root.add_typer(bench, name="bench")
    register_experiments(bench, EXPERIMENTS)
    return root


def test_the_three_figures_are_experiments_without_folds() -> None:
    assert [e.name for e in EXPERIMENTS] == [
        "proxyfl-accuracy", "proxyfl-communication", "proxyfl-ablations"
    ]  # fmt: skip
    for exp, figure in zip(EXPERIMENTS, ("Fig. 3", "Fig. 4", "Fig. 5"), strict=True):
        assert figure in exp.summary
        assert (exp.folds, exp.min_folds, exp.max_folds, exp.seeds) == (1, 1, 1, 1)
        with pytest.raises(ValueError, match="no folds"):
            exp.options(folds=2)


def test_bench_commands_are_mounted_under_their_names() -> None:
    result = CliRunner().invoke(_bench_app(), ["bench", "--help"])
    for exp in EXPERIMENTS:
        assert exp.name in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["proxyfl-accuracy", "--smoke", "--folds", "2"],
        ["proxyfl-communication", "--smoke", "--jobs", "2"],
        ["proxyfl-ablations", "--smoke", "--seeds", "0"],
    ],
)
def test_bad_options_exit_with_code_2_and_write_nothing(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(_bench_app(), ["bench", *args, "--out-dir", str(out)])
    assert result.exit_code == 2, result.output
    assert not out.exists()


def test_the_output_folder_is_checked_before_anything_runs(tmp_path: Path) -> None:
    bad = tmp_path / "a-file"
    bad.write_text("")
    result = CliRunner().invoke(
        _bench_app(), ["bench", "proxyfl-accuracy", "--smoke", "--out-dir", str(bad)]
    )
    assert result.exit_code == 2, result.output
    assert bad.read_text() == ""
