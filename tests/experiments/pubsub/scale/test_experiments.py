"""The Hyperplane experiments of PubSub-ML (``pubsub-noisy``, ``-publishers``, ``-selection``,
``-streams``): their commands, smoke runs and bad options."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from pubsubml.cli.bench import register_experiments
from pubsubml.experiments.pubsub.scale.experiments import EXPERIMENTS

BENCHMARKS = [e.name for e in EXPERIMENTS]


# ---- commands -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bench_app() -> typer.Typer:
    app = typer.Typer()
    register_experiments(app, EXPERIMENTS)

    @app.callback()
    def main() -> None:
        """Group (so commands keep their names)."""

    return app


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCHMARKS)
def test_smoke_command_writes_results(bench_app: typer.Typer, name: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(bench_app, [name, "--smoke", "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for ext in ("csv", "md", "png"):
        assert (tmp_path / f"{name}.{ext}").stat().st_size > 0
    table = pd.read_csv(tmp_path / f"{name}.csv")
    scores = table["score"].dropna()
    assert len(scores) > 0 and scores.between(0, 1).all()
    md = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
    assert "Differences from the paper" in md and "± " in md
    if name == "pubsub-selection":
        fused = table[table["method"].isin(["All", "Top-4", "Top-2"])]
        assert fused.groupby("method")["n_models"].first().to_dict() == {
            "All": 7,
            "Top-4": 4,
            "Top-2": 2,
        }
        assert {"FedAvg(V)", "FedProx(F)", "FedAdam(F)", "Own"} <= set(table["method"])
    if name == "pubsub-streams":  # a subscriber sees the others' models only
        warm = table[table["chunk"] >= table["k"]]
        assert (warm["n_models"] == 2 * warm[["k", "chunk"]].min(axis=1)).all()
        assert table["epsilon"].max() <= 1.0 + 1e-9
    if name == "pubsub-noisy":
        assert set(table["n_noisy"]) == {0, 2}


def test_bad_options_exit_2(bench_app: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        bench_app, ["pubsub-noisy", "--smoke", "--seeds", "0", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    result = CliRunner().invoke(
        bench_app, ["pubsub-noisy", "--smoke", "--folds", "9", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    result = CliRunner().invoke(
        bench_app, ["pubsub-streams", "--smoke", "--folds", "2", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "chunk by chunk" in result.output
    assert not list(tmp_path.iterdir())


def test_smoke_runs_the_smaller_split_and_refuses_more_folds() -> None:
    by_name = {e.name: e for e in EXPERIMENTS}
    selection = by_name["pubsub-selection"]
    assert selection.options(smoke=True).folds == 2 and selection.options().folds == 5
    assert selection.options(smoke=True, folds=1).folds == 1
    with pytest.raises(ValueError, match="the split has 2 folds"):
        selection.options(smoke=True, folds=3)
    with pytest.raises(ValueError, match="has no folds"):
        by_name["pubsub-streams"].options(folds=5)
