"""Shared pieces of the asynchronous DP experiments: sizes, tasks by name, runs, seed means."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsubml.errors import DataValidationError
from pubsubml.experiments.async_dp.reporting import (
    REAL_TASKS,
    mean_over_seeds,
    noise_regime,
    real_task,
    run_sizes,
    run_task,
    seeds_note,
)
from pubsubml.experiments.async_dp.tasks import synthetic_task


def test_run_sizes_are_the_papers_at_full_size() -> None:
    assert run_sizes(False) == (1000, 100)  # T = 1,000 and 100 runs (Fig. 2)
    assert run_sizes(True) == (60, 6)


def test_run_task_uses_the_sizes_and_the_seed() -> None:
    task = synthetic_task(2, 200, seed=3)
    res = run_task(task, 50.0, seed=3, smoke=True, record_path=True)
    assert res.psi.shape == (6,) and res.path is not None and res.path.shape == (60, 6)
    assert res.max_answers <= 60
    again = run_task(task, 50.0, seed=3, smoke=True, replicas=2)
    other = run_task(task, 50.0, seed=4, smoke=True, replicas=2)
    assert again.psi.shape == (2,)
    assert not np.array_equal(again.psi, other.psi)
    np.testing.assert_array_equal(
        run_task(task, 50.0, seed=3, smoke=True, replicas=2).psi, again.psi
    )


def test_real_tasks_are_built_by_name() -> None:
    for name in REAL_TASKS[:2]:
        task = real_task(name, 0)
        assert task.name == name and len(task.parts) == len(task.owner_names) > 1
    with pytest.raises(DataValidationError, match="unknown real task"):
        real_task("lending-club", 0)


def test_noise_regime_is_between_ten_times_the_floor_and_one() -> None:
    psi = np.array([0.05, 0.009, 1.0, 0.5])
    floor = np.full(4, 0.001)
    assert noise_regime(psi, floor).tolist() == [True, False, False, True]


def test_mean_over_seeds_gives_means_and_standard_errors() -> None:
    table = pd.DataFrame(
        {
            "seed": [0, 1, 0, 1],
            "dataset": ["a", "a", "b", "b"],
            "n_records": [10, 10, 7, 8],
            "psi": [1.0, 2.0, 4.0, 8.0],
        }
    )
    out = mean_over_seeds(table, ["dataset"], ["n_records", "psi"], se=["psi"])
    assert list(out.columns) == ["dataset", "n_records", "psi", "psi_se"]
    assert out.dataset.tolist() == ["a", "b"]
    assert out.psi.tolist() == [1.5, 6.0] and out.psi_se.tolist() == [0.5, 2.0]
    assert out.n_records.tolist() == [10.0, 7.5]  # the seeds disagree on b: a mean
    agreeing = mean_over_seeds(table.assign(n_records=[10, 10, 7, 7]), ["dataset"], ["n_records"])
    assert agreeing.n_records.dtype == np.int64 and agreeing.n_records.tolist() == [10, 7]
    one = mean_over_seeds(table[table.seed == 0], ["dataset"], ["psi"], se=["psi"])
    assert list(one.columns) == ["dataset", "psi"] and one.psi.tolist() == [1.0, 4.0]
    assert one.dtypes["psi"] == np.float64


def test_seeds_note_is_empty_for_one_seed() -> None:
    assert seeds_note(1) == ""
    assert seeds_note(2, "medians") == " With 2 seeds (0 … 1): medians."
