"""Stacking experiments: vertical feature proportions, public defaults, smoke runs of the CLI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from pubsubml.methods.stacking_cli import BENCHMARKS, register
from pubsubml.schema import Feature, FeatureSchema
from pubsubml.sim.stacking_experiments import vertical_task
from pubsubml.sim.stacking_models import client_features, noisy_defaults


@pytest.mark.parametrize("p", [0.25, 0.5, 0.75, 1.0])
def test_vertical_clients_hold_the_requested_proportion_of_predictors(p: float) -> None:
    columns = [f"f{i}" for i in range(12)]
    sets = client_features(columns, 10, p, seed=0)
    measured = [len(set(s)) / len(columns) for s in sets]
    assert measured == [round(p * 12) / 12] * 10
    assert all(set(s) <= set(columns) and len(set(s)) == len(s) for s in sets)
    if p < 1:
        assert len({tuple(s) for s in sets}) > 1  # drawn at random per client


def test_noisy_defaults_are_mode_and_median_plus_scaled_noise() -> None:
    schema = FeatureSchema(
        features=(
            Feature(name="x", lower=-100.0, upper=100.0, default=0.0),
            Feature(name="c", kind="categorical", categories=("a", "b"), default="a"),
        )
    )
    X = pd.DataFrame({"x": [1.0, 2.0, 3.0, 10.0], "c": ["b", "b", "a", "b"]})
    exact = noisy_defaults(X, schema, 0.0, np.random.default_rng(0))
    assert exact.defaults == {"x": 2.5, "c": "b"}
    draws = [
        noisy_defaults(X, schema, 2.0, np.random.default_rng(s))["x"].default for s in range(400)
    ]
    assert np.std(draws) == pytest.approx(2.0 * np.std(X.x, ddof=1), rel=0.15)


def test_dp_defaults_are_charged_to_each_clients_ledger() -> None:
    records = vertical_task(
        0,
        0,
        p=0.5,
        noise=0.0,
        defaults="dp",
        models="rf",
        dataset="hi",
        max_rows=200,
        trees=5,
        n_clients=3,
    )
    assert all(r["defaults_epsilon"] == pytest.approx(1.0, abs=1e-3) for r in records)
    edges = [r for r in records if r["record"] == "edge"]
    assert all(0.0 <= r["jaccard"] <= 1.0 for r in edges)


def test_smoke_benchmarks_write_their_outputs(tmp_path: Path) -> None:
    group = typer.Typer()
    register(group)
    assert {c.name for c in group.registered_commands} == set(BENCHMARKS)
    runner = CliRunner()
    for name in BENCHMARKS:
        args = [name, "--smoke", "--out-dir", str(tmp_path)]
        if name != "stacking-quantity":
            args.append("--no-dp")  # the DP public models are exercised once
        result = runner.invoke(group, args)
        assert result.exit_code == 0, result.output
        for stem in (name, f"{name}-graph"):
            for ext in ("csv", "md", "png"):
                assert (tmp_path / f"{stem}.{ext}").exists(), f"{stem}.{ext}"
    table = pd.read_csv(tmp_path / "stacking-quantity.csv")
    assert set(table.variant) == {"held_out", "pooled"}
    dp = table[table.public != "rf"]
    assert set(dp.public) == {"dp_rf_e1", "dp_lr_e1", "dp_mlp_e1"}
    assert (dp.epsilon <= 1.0 + 1e-9).all() and (
        table[table.public == "rf"].epsilon == np.inf
    ).all()
    assert (tmp_path / "stacking-label-matrix.csv").exists()
    bad = runner.invoke(
        group, ["stacking-natural", "--smoke", "--dataset", "shuttle", "--out-dir", str(tmp_path)]
    )
    assert bad.exit_code == 2
