"""Tests of pubsubml.data.dataset: the Dataset record and its row selection."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from pubsubml.data.dataset import Dataset
from pubsubml.schema import FeatureSchema

SCHEMA = FeatureSchema.numeric(["a", "b"])


def _dataset() -> Dataset:
    X = pd.DataFrame({"a": [0.0, 0.1, 0.2, 0.3, 0.4], "b": [1.0, 0.9, 0.8, 0.7, 0.6]})
    X.index = [10, 20, 30, 40, 50]  # labels that are not positions
    return Dataset(
        X=X, y=np.array([0, 1, 2, 1, 0]), schema=SCHEMA, task="classification", classes=(0, 1, 2)
    )


def test_take_selects_positions_in_the_given_order_and_resets_the_index() -> None:
    d = _dataset()

    part = d.take(np.array([3, 0, 3]))

    assert part.X["a"].tolist() == [0.3, 0.0, 0.3]
    assert part.y.tolist() == [1, 0, 1]
    assert part.X.index.tolist() == [0, 1, 2]
    assert (part.schema, part.task, part.classes) == (d.schema, d.task, d.classes)


def test_take_accepts_a_slice() -> None:
    part = _dataset().take(slice(1, 4))

    assert len(part) == 3
    assert part.X["b"].tolist() == [0.9, 0.8, 0.7] and part.y.tolist() == [1, 2, 1]


def test_take_of_no_rows_is_an_empty_dataset_with_the_same_columns() -> None:
    part = _dataset().take(np.array([], dtype=np.int64))

    assert len(part) == 0 and list(part.X.columns) == ["a", "b"] and part.y.shape == (0,)


def test_take_leaves_the_original_unchanged() -> None:
    d = _dataset()

    d.take(np.array([4, 1]))

    assert d.X.index.tolist() == [10, 20, 30, 40, 50] and len(d) == 5


def test_a_dataset_is_immutable() -> None:
    d = _dataset()

    with pytest.raises(dataclasses.FrozenInstanceError):
        d.task = "regression"  # type: ignore[misc]


def test_regression_metadata_survives_take() -> None:
    d = Dataset(
        X=pd.DataFrame({"a": [0.1, 0.2], "b": [0.3, 0.4]}),
        y=np.array([1.5, 2.5]),
        schema=SCHEMA,
        task="regression",
        target_range=(0.0, 3.0),
    )

    part = d.take(np.array([1]))

    assert part.target_range == (0.0, 3.0) and part.classes is None and part.y.tolist() == [2.5]


def test_take_copies_the_labels() -> None:
    data = _dataset()
    part = data.take(slice(0, 2))
    before = data.y.copy()
    part.y[0] = part.y[0] + 1
    assert np.array_equal(data.y, before)
