"""Smoke runs of the ``domain-experts-*`` benchmarks through the CLI group."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer
from typer.testing import CliRunner

from pubsubml.methods.domain_experts_cli import BENCHMARKS, register


def test_smoke_benchmarks_write_their_outputs(tmp_path: Path) -> None:
    group = typer.Typer()
    register(group)
    runner = CliRunner()
    for name in BENCHMARKS:
        result = runner.invoke(group, [name, "--smoke", "--out-dir", str(tmp_path)])
        assert result.exit_code == 0, result.output
        assert (tmp_path / f"{name}.csv").exists() and (tmp_path / f"{name}.md").exists()
    assert (tmp_path / "domain-experts-regression-gates.png").exists()
    assert (tmp_path / "domain-experts-classification.png").exists()
    table = pd.read_csv(tmp_path / "domain-experts-regression.csv")
    assert set(table.method) == {"Baseline", "FL", "Alg 1", "Alg 2", "FT-FL", "FT-DP-FL"}
    assert (table.rmse > 0).all()
    # σ = 2 and 4 are accounted: finite ε, larger for less noise.
    eps = table.groupby("sigma").epsilon.max()
    assert eps[0.0] == float("inf") and eps[2.0] > eps[4.0] > 0
