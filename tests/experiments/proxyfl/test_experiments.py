"""Offline data, non-IID split and private architectures of the ProxyFL experiments (§4.1–4.2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pubsubml.data.synthetic import make_mnist1d
from pubsubml.errors import DataValidationError
from pubsubml.experiments.proxyfl.experiments import (
    make_federated,
    partition_majority,
    run_method,
    run_regular_models,
)
from pubsubml.methods.proxyfl.architectures import ARCHITECTURES, private_factory
from pubsubml.methods.proxyfl.protocol import DMLConfig


def test_majority_split_is_disjoint_and_skewed() -> None:
    y = np.repeat(np.arange(10), 300)
    idx, majority = partition_majority(
        y, n_clients=8, n_per_client=200, p_major=0.8, n_classes=10, rng=np.random.default_rng(0)
    )
    everything = np.concatenate(idx)
    assert len(everything) == len(set(everything.tolist())) == 1600  # no record used twice
    assert len(set(majority)) == 8
    for rows, c in zip(idx, majority, strict=True):
        assert (y[rows] == c).sum() == 160
        assert len(np.unique(y[rows])) > 5  # the rest is drawn from the other classes


def test_split_refuses_to_reuse_records() -> None:
    y = np.repeat(np.arange(10), 50)
    with pytest.raises(DataValidationError, match="rows left"):
        partition_majority(
            y,
            n_clients=8,
            n_per_client=100,
            p_major=0.8,
            n_classes=10,
            rng=np.random.default_rng(0),
        )


def test_digits_gives_120_distinct_rows_per_client_and_test_sets() -> None:
    split = make_federated("digits", seed=0)
    assert [len(X) for X, _ in split.clients] == [120] * 8
    assert split.test[0].shape == (540, 64) and split.test[0].max() <= 1.0
    for (_, y), c in zip(split.client_tests, split.majority, strict=True):
        assert (y == c).mean() == pytest.approx(0.8)


def test_mnist1d_is_generated_offline_without_touching_the_global_rng() -> None:
    state = np.random.get_state()[1].copy()  # noqa: NPY002 - checking it is left alone
    X, y, X_te, _ = make_mnist1d(900, 100, seed=1)
    assert X.shape == (900, 40) and X_te.shape == (100, 40) and set(np.unique(y)) == set(range(10))
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # noqa: NPY002


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
@pytest.mark.parametrize("shape", [(1, 40), (1, 8, 8)])
def test_architectures_take_flat_rows_of_1d_and_2d_inputs(
    arch: str, shape: tuple[int, ...]
) -> None:
    d = int(np.prod(shape))
    assert private_factory(arch, shape)(d, 10)(torch.zeros(2, d)).shape == (2, 10)


def test_runs_report_rows_for_both_models_and_both_test_sets() -> None:
    split = make_federated("digits", n_clients=4, n_per_client=40, n_test_per_client=10)
    cfg = DMLConfig(batch_size=10, delta=1e-3)
    run = run_method("ProxyFL", split, rounds=1, config=cfg, private=["mlp", "cnn1", "mlp", "cnn1"])
    assert {(r["model"], r["test"]) for r in run.rows} == {
        (m, t) for m in ("private", "proxy") for t in ("global", "local")
    }
    assert len(run.epsilons) == 4
    regular = run_regular_models(split, ["cnn1", "mlp", "lenet", "cnn2"], rounds=1, config=cfg)
    assert len(regular.rows) == 8 and regular.epsilons[0] == pytest.approx(run.epsilons[0])
