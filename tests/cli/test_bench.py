"""``pubsubml bench``: one command per experiment, the same options everywhere, exit 2 on bad ones."""

from __future__ import annotations

import inspect
import socket
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from pubsubml.cli import app
from pubsubml.cli.bench import experiment_command, register_experiments
from pubsubml.experiments.base import Experiment, Param, RunOptions
from pubsubml.experiments.catalog import EXPERIMENTS
from pubsubml.experiments.runner import Record

COMMON = ["seeds", "folds", "jobs", "executor", "address", "smoke", "out_dir"]


def test_bench_lists_every_experiment_once() -> None:
    bench = typer.main.get_command(app).commands["bench"]  # type: ignore[attr-defined]
    with typer.Context(bench) as ctx:
        names = bench.list_commands(ctx)
    assert sorted(names) == sorted(EXPERIMENTS) and len(names) == len(set(names))


def test_every_command_takes_the_common_options_then_its_own() -> None:
    for exp in EXPERIMENTS.values():
        params = list(inspect.signature(experiment_command(exp)).parameters)
        assert params == COMMON + [p.name for p in exp.params], exp.name


def fold(seed: int, fold: int, *, scale: float, fast: bool) -> list[Record]:
    return [{"method": "m", "score": scale * (seed + fold), "fast_run": fast}]


def _report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "toy.csv", index=False)
    return [out_dir / "toy.csv"]


TOY = Experiment(
    "toy",
    "A toy for the command line.",
    grid=lambda o: [{"scale": o.params["scale"], "fast": o.params["fast"]}],
    run_fold=fold,
    report=_report,
    folds=2,
    fold_aliases=("repeats",),
    params=(
        Param("scale", 1.0, "Multiplies the score.", minimum=0),
        Param("fast", True, "A switch."),
    ),
)


def _toy_app() -> typer.Typer:
    group = typer.Typer()
    register_experiments(group, [TOY])

    @group.callback()
    def main() -> None:
        """Group (so commands keep their names)."""

    return group


def test_options_reach_the_experiment(tmp_path: Path) -> None:
    args = ["toy", "--seeds", "2", "--repeats", "3", "--scale", "2", "--no-fast"]
    result = CliRunner().invoke(_toy_app(), [*args, "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "toy.csv")
    assert len(table) == 6 and table["score"].tolist() == [0, 2, 4, 2, 4, 6]
    assert not table["fast_run"].any() and "toy: wrote" in result.output


def test_bad_options_exit_2_with_one_line_and_write_nothing(tmp_path: Path) -> None:
    for args, message in (
        (["--scale", "-1"], "--scale must be >= 0"),
        (["--seeds", "0"], "--seeds >= 1"),
        (["--folds", "1"], "--folds/--repeats >= 2"),
        (["--colour", "red"], "No such option"),
    ):
        result = CliRunner().invoke(_toy_app(), ["toy", *args, "--out-dir", str(tmp_path / "o")])
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    assert list(tmp_path.iterdir()) == []


def test_bad_executor_options_exit_2_and_write_nothing(tmp_path: Path) -> None:
    for args, message in (
        (["--executor", "dask"], "unknown executor 'dask'"),
        (["--address", "auto"], "address applies to the ray executor only"),
    ):
        result = CliRunner().invoke(_toy_app(), ["toy", *args, "--out-dir", str(tmp_path / "o")])
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    assert list(tmp_path.iterdir()) == []


def test_a_ray_cluster_where_nothing_answers_exits_2_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ray = pytest.importorskip("ray")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)

    def no_init(**kwargs: Any) -> None:
        raise AssertionError("Ray must not be asked to join an address where nothing answers")

    monkeypatch.setattr(ray, "init", no_init)
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = ["toy", "--executor", "ray", "--address", f"127.0.0.1:{port}"]
    result = CliRunner().invoke(_toy_app(), [*args, "--out-dir", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "error: toy: cannot join the Ray cluster" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "o").exists() or list((tmp_path / "o").iterdir()) == []


@pytest.mark.ray
def test_executor_ray_writes_the_same_table(tmp_path: Path, ray_session: Any) -> None:
    args = ["toy", "--seeds", "2", "--scale", "2"]
    tables = []
    for executor in ("process", "ray"):
        out = tmp_path / executor
        result = CliRunner().invoke(
            _toy_app(), [*args, "--executor", executor, "--out-dir", str(out)]
        )
        assert result.exit_code == 0, result.output
        tables.append(pd.read_csv(out / "toy.csv"))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert tables[1]["score"].tolist() == [0, 2, 2, 4]


@pytest.mark.ray
def test_executor_ray_on_a_cluster_address_writes_the_same_table(
    tmp_path: Path, ray_cluster: str
) -> None:
    args = ["toy", "--seeds", "2", "--scale", "2"]
    tables = []
    for options in (["--executor", "process"], ["--executor", "ray", "--address", ray_cluster]):
        out = tmp_path / options[1]
        result = CliRunner().invoke(_toy_app(), [*args, *options, "--out-dir", str(out)])
        assert result.exit_code == 0, result.output
        tables.append(pd.read_csv(out / "toy.csv"))
    pd.testing.assert_frame_equal(tables[0], tables[1])
