"""``pubsub-small-ceiling``: the rows of one run, their relations, and bad options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pubsubml.cli import app
from pubsubml.experiments.pubsub.small.ceiling import (
    CEILING_DATASETS,
    CEILING_EXPERIMENT,
    CEILING_METHODS,
    ceiling_task,
    summarize_ceiling,
)


def test_one_run_gives_every_row_and_the_ceiling_is_at_least_own() -> None:
    rows = ceiling_task(0, 0, dataset="hyperplane", n_sub=60, kind="sgd_linear", smoke=True)
    scores = {r["method"]: r["score"] for r in rows}
    assert list(scores) == list(CEILING_METHODS)
    assert all(0.0 <= v <= 1.0 for v in scores.values())
    # k = 0 is in the grid and the customizer's own model is the Own baseline (same seed)
    assert scores["Ceiling (test-chosen)"] >= scores["Own"]


def test_summary_pairs_differences_with_own_by_seed() -> None:
    t = pd.DataFrame(
        {
            "dataset": "d",
            "n_sub": 100,
            "publisher": "mlp",
            "seed": [0, 0, 1, 1],
            "method": ["Own", "PubSub-ML"] * 2,
            "score": [0.5, 0.6, 0.7, 0.7],
        }
    )
    s = summarize_ceiling(t)
    row = s[s["method"] == "PubSub-ML"].iloc[0]
    assert row["row − Own"] == "0.0500 ± 0.0500"
    assert np.isclose(row["mean"], 0.65)


def test_bad_arguments(tmp_path: Path) -> None:
    assert "diamonds" not in CEILING_DATASETS  # regression: no class probabilities to pool
    with pytest.raises(ValueError, match="--dataset must be one of"):
        CEILING_EXPERIMENT.options(dataset="diamonds")
    with pytest.raises(ValueError, match="seeds"):
        CEILING_EXPERIMENT.options(seeds=0)
    with pytest.raises(ValueError, match="has no folds"):
        CEILING_EXPERIMENT.options(folds=2)
    grid = CEILING_EXPERIMENT.grid(CEILING_EXPERIMENT.options(dataset="hi", smoke=True))
    assert {g["dataset"] for g in grid} == {"hi"} and {g["n_sub"] for g in grid} == {60}
    result = CliRunner().invoke(
        app, ["bench", "pubsub-small-ceiling", "--seeds", "0", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code != 0 and "--seeds >= 1" in result.output
    assert not list(tmp_path.iterdir())
