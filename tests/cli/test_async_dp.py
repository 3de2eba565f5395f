"""The ``forecast`` and ``bench async-dp-*`` commands and the experiments' smoke configurations."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from pubsubml.cli.async_dp import BENCHMARKS, app, register
from pubsubml.experiments.async_dp.experiments import EXPERIMENTS

runner = CliRunner()


def test_forecast_prints_a_verdict() -> None:
    result = runner.invoke(
        app, ["forecast", "--owners", "10", "--records", "10000", "--epsilon", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "predicted ψ, private collaboration" in result.output
    assert "predicted ψ, one owner alone" in result.output
    assert "Verdict: collaborating is" in result.output


def test_forecast_rejects_bad_model(tmp_path: Path) -> None:
    bad = tmp_path / "model.json"
    bad.write_text("{}")
    result = runner.invoke(
        app, ["forecast", "--owners", "2", "--records", "10", "--epsilon", "1", "--model", str(bad)]
    )
    assert result.exit_code == 2 and "error" in result.output


def test_register_mounts_forecast_and_benchmarks() -> None:
    root, bench = typer.Typer(), typer.Typer()
    root.add_typer(bench, name="bench")
    register(root, bench)
    result = runner.invoke(
        root, ["forecast", "--owners", "3", "--records", "1000", "--epsilon", "10"]
    )
    assert result.exit_code == 0 and "Verdict" in result.output
    assert (
        sorted(c.name for c in bench.registered_commands)
        == sorted(BENCHMARKS)
        == sorted(EXPERIMENTS)
    )


@pytest.mark.parametrize("name", BENCHMARKS)
def test_bench_smoke_writes_outputs(name: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["bench", name, "--smoke", "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    stem = "async-dp-calibration" if name == "async-dp-calibrate" else name
    table = pd.read_csv(tmp_path / f"{stem}.csv")
    assert len(table) > 0 and (tmp_path / f"{stem}.md").exists()
    if name != "async-dp-calibrate":
        assert (tmp_path / f"{name}.png").stat().st_size > 0
    assert not list(tmp_path.glob("*.json"))  # the smoke calibration never overwrites the model
