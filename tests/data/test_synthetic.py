"""Tests of pubsubml.data.synthetic: Hyperplane streams and generated MNIST-1D."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from pubsubml.data.synthetic import (
    MNIST1D_BOUND,
    hyperplane,
    hyperplane_chunks,
    hyperplane_schema,
    load_mnist1d,
    make_mnist1d,
)
from pubsubml.errors import DataValidationError


def test_chunks_are_consecutive_parts_of_one_stream() -> None:
    chunks = list(hyperplane_chunks(3, 4, seed=5, n_features=3))
    [(whole_X, whole_y)] = list(hyperplane_chunks(1, 12, seed=5, n_features=3))

    pd.testing.assert_frame_equal(pd.concat([X for X, _ in chunks], ignore_index=True), whole_X)
    np.testing.assert_array_equal(np.concatenate([y for _, y in chunks]), whole_y)


def test_chunk_values_and_labels_follow_the_public_schema() -> None:
    X, y = next(hyperplane_chunks(1, 200, seed=1, n_features=6))

    assert list(X.columns) == hyperplane_schema(6).names == [f"x{i}" for i in range(6)]
    assert X.dtypes.eq(np.float64).all() and y.dtype == np.int64
    assert X.to_numpy().min() >= 0.0 and X.to_numpy().max() <= 1.0
    assert set(np.unique(y).tolist()) == {0, 1}
    hyperplane_schema(6).validate_frame(X, out_of_bounds="error")


def test_no_chunks_yields_nothing() -> None:
    assert list(hyperplane_chunks(0, 5, seed=0)) == []


@pytest.mark.parametrize(("n_chunks", "chunk_size"), [(-1, 5), (2, 0)])
def test_bad_chunk_counts_raise_when_iterated(n_chunks: int, chunk_size: int) -> None:
    with pytest.raises(ValueError, match="n_chunks"):
        list(hyperplane_chunks(n_chunks, chunk_size, seed=0))


def test_hyperplane_is_the_first_chunk_of_a_stream_without_drift() -> None:
    d = hyperplane(30, seed=2, n_features=5)
    X, y = next(hyperplane_chunks(1, 30, seed=2, n_features=5, mag_change=0.0))

    pd.testing.assert_frame_equal(d.X, X)
    np.testing.assert_array_equal(d.y, y)
    assert (d.task, d.classes, d.schema) == ("classification", (0, 1), hyperplane_schema(5))


def test_same_seed_same_rows_other_seed_other_rows() -> None:
    a, b, c = hyperplane(20, seed=4), hyperplane(20, seed=4), hyperplane(20, seed=5)

    assert a.X.equals(b.X) and np.array_equal(a.y, b.y)
    assert not a.X.equals(c.X)


@pytest.mark.parametrize(("noise", "low", "high"), [(0.0, 0.99, 1.0), (0.3, 0.6, 0.8)])
def test_labels_are_a_hyperplane_up_to_the_label_noise(
    noise: float, low: float, high: float
) -> None:
    d = hyperplane(500, seed=1, noise_percentage=noise)

    fit = LogisticRegression(C=1e4, max_iter=2000).fit(d.X, d.y).score(d.X, d.y)

    assert low <= fit <= high


def test_mnist1d_generation_has_the_requested_parts_and_restores_numpy_state() -> None:
    np.random.seed(11)  # noqa: NPY002 - the generator under test reseeds the legacy global one
    expected = np.random.random(3)  # noqa: NPY002
    np.random.seed(11)  # noqa: NPY002

    X_tr, y_tr, X_te, y_te = make_mnist1d(30, 10, 123)

    np.testing.assert_array_equal(np.random.random(3), expected)  # noqa: NPY002
    assert (X_tr.shape, X_te.shape, y_tr.shape, y_te.shape) == ((30, 40), (10, 40), (30,), (10,))
    assert (X_tr.dtype, y_tr.dtype) == (np.float32, np.int64)
    assert np.bincount(np.concatenate([y_tr, y_te]), minlength=10).tolist() == [4] * 10


@pytest.mark.parametrize(("n_train", "n_test"), [(25, 10), (0, 10), (10, 0)])
def test_mnist1d_generation_refuses_unbalanced_or_empty_parts(n_train: int, n_test: int) -> None:
    with pytest.raises(DataValidationError, match="multiple of 10"):
        make_mnist1d(n_train, n_test, 0)


def test_load_mnist1d_joins_the_generated_parts_in_order() -> None:
    d = load_mnist1d(50, seed=123)

    X_tr, y_tr, X_te, y_te = make_mnist1d(40, 10, 123)  # a fifth of the rows is the test part

    np.testing.assert_array_equal(d.X.to_numpy(), np.concatenate([X_tr, X_te]))
    np.testing.assert_array_equal(d.y, np.concatenate([y_tr, y_te]))
    assert d.X.dtypes.eq(np.float64).all()
    lows = {f.lower for f in d.schema}
    assert lows == {-MNIST1D_BOUND} and {f.upper for f in d.schema} == {MNIST1D_BOUND}


@pytest.mark.parametrize("n", [True, 20.0, "20"])
def test_load_mnist1d_refuses_a_count_that_is_not_an_integer(n: Any) -> None:
    with pytest.raises(DataValidationError):
        load_mnist1d(n)


def test_hyperplane_chunks_checks_its_arguments_at_the_call() -> None:
    with pytest.raises(ValueError, match="n_chunks"):
        hyperplane_chunks(-1, 5, seed=0)
