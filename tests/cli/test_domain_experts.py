"""Smoke runs of the ``domain-experts-*`` benchmarks through the CLI group."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from pubsubml.cli.domain_experts import BENCHMARKS, register


@pytest.mark.slow
def test_smoke_benchmarks_write_their_outputs(tmp_path: Path) -> None:
    group = typer.Typer()
    register(group)
    runner = CliRunner()
    assert {c.name for c in group.registered_commands} == set(BENCHMARKS)
    for name in ("domain-experts-regression", "domain-experts-classification"):
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
    # Each row says what its ε covers: Algorithm 1's is paper accounting, not a guarantee.
    noisy = table[table.sigma > 0].groupby("method").guarantee.unique()
    assert list(noisy["Alg 1"]) == ["paper accounting"] and list(noisy["Alg 2"]) == ["dp"]
    assert list(noisy["Baseline"]) == ["nothing released"]
    assert (table[table.method == "Baseline"].epsilon == 0).all()


def test_mnist1d_users_are_disjoint_equal_partitions() -> None:
    from pubsubml.experiments.domain_experts.mnist1d import mnist1d_users

    users = mnist1d_users(3, 20, 10, seed=0)
    assert len(users) == 3
    for u in users:
        assert len(u["train"][0]) == 20 and len(u["tune"][0]) == 16 and len(u["val"][0]) == 4
        assert len(u["test"][0]) == 10 and u["train"][0].shape[1] == 40
    first = users[0]["train"][0].to_numpy()
    assert not any((first == u["train"][0].to_numpy()).all() for u in users[1:])
