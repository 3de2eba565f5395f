"""The experiment runner: grid expansion, mean ± SE, folds, parallel runs and atomic outputs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.reports import summarize
from pubsubml.experiments.runner import Record, kfold_indices, run_grid

KNOWN = {0: [0.6, 0.7, 0.8], 1: [0.5, 0.9, 0.7]}  # score by seed, then fold


def fake_method(seed: int, fold: int, offset: float = 0.0) -> list[Record]:
    """A method whose scores are known in advance."""
    return [
        {"method": "a", "score": KNOWN[seed][fold] + offset},
        {"method": "b", "score": 1.0},
    ]


def test_summary_is_mean_and_standard_error_over_seeds_and_folds() -> None:
    table = run_grid(fake_method, seeds=2, folds=3, progress=False)
    assert len(table) == 12
    assert set(table.columns) >= {"seed", "fold", "method", "score"}
    summary = summarize(table, ["method"]).set_index("method")
    values = np.array(KNOWN[0] + KNOWN[1])
    assert summary.loc["a", "mean"] == pytest.approx(values.mean())
    assert summary.loc["a", "se"] == pytest.approx(values.std(ddof=1) / math.sqrt(6))
    assert summary.loc["a", "n"] == 6
    assert summary.loc["b", "se"] == 0.0


def test_grid_parameters_become_columns_and_groups() -> None:
    table = run_grid(
        fake_method, seeds=[1], folds=3, grid=[{"offset": 0.0}, {"offset": 1.0}], progress=False
    )
    summary = summarize(table[table.method == "a"], ["offset"])
    assert summary["mean"].tolist() == pytest.approx([0.7, 1.7])


def test_parallel_run_gives_the_same_table() -> None:
    serial = run_grid(fake_method, seeds=2, folds=3, progress=False)
    parallel = run_grid(fake_method, seeds=2, folds=3, jobs=2, progress=False)
    pd.testing.assert_frame_equal(serial, parallel)


def _clashing(seed: int, fold: int) -> list[Record]:
    return [{"fold": 3, "score": 1.0}]


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError):
        run_grid(fake_method, seeds=0, progress=False)
    with pytest.raises(ValueError):
        run_grid(fake_method, folds=0, progress=False)
    with pytest.raises(ValueError, match="redefine"):
        run_grid(_clashing, folds=1, progress=False)
    with pytest.raises(KeyError):
        summarize(pd.DataFrame({"score": [1.0]}), ["method"])


def test_kfold_indices_partition_the_rows_and_stratify() -> None:
    y = np.array([0] * 80 + [1] * 20)
    tests = []
    for fold in range(5):
        train, test = kfold_indices(y, 5, fold, seed=3)
        assert set(train).isdisjoint(test)
        assert len(train) + len(test) == 100
        assert y[test].sum() == 4  # stratified: 20 % of the positives in every fold
        tests.append(test)
    assert sorted(np.concatenate(tests).tolist()) == list(range(100))
    a, _ = kfold_indices(100, 5, 1, seed=0)
    b, _ = kfold_indices(100, 5, 1, seed=0)
    assert np.array_equal(a, b)
    with pytest.raises(ValueError):
        kfold_indices(10, 5, 5, seed=0)


@pytest.mark.ray
def test_ray_and_the_process_pool_give_the_same_table_and_errors(ray_session: Any) -> None:
    grid = [{"offset": 0.0}, {"offset": 1.0}]
    serial = run_grid(fake_method, seeds=2, folds=3, grid=grid, progress=False)
    on_ray = run_grid(
        fake_method, seeds=2, folds=3, grid=grid, jobs=2, executor="ray", progress=False
    )
    pd.testing.assert_frame_equal(on_ray, serial)  # and so the pool's (the test above)
    assert on_ray[["offset", "seed", "fold"]].drop_duplicates().values.tolist() == [
        [o, s, f] for o in (0.0, 1.0) for s in (0, 1) for f in (0, 1, 2)
    ]
    with pytest.raises(ValueError, match="redefine"):
        run_grid(_clashing, folds=1, executor="ray", progress=False)


def test_bad_executor_choices_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown executor 'threads'"):
        run_grid(fake_method, folds=1, executor="threads", progress=False)
    with pytest.raises(ValueError, match="address applies to the ray executor only"):
        run_grid(fake_method, folds=1, address="auto", progress=False)
