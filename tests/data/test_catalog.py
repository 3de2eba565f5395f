"""Tests of pubsubml.data.catalog: loading every offline data set by name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.data.catalog import LOADERS, load
from pubsubml.data.dataset import Dataset, UnknownDatasetError
from pubsubml.data.synthetic import hyperplane
from pubsubml.data.tabular import load_sklearn
from pubsubml.errors import DataValidationError


def _assert_same(a: Dataset, b: Dataset) -> None:
    pd.testing.assert_frame_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    assert (a.schema, a.task, a.classes, a.target_range) == (
        b.schema,
        b.task,
        b.classes,
        b.target_range,
    )


def test_hyperplane_defaults_to_a_thousand_rows_of_seed_zero() -> None:
    _assert_same(load("hyperplane"), hyperplane(1000, seed=0))


def test_keyword_arguments_reach_the_loader() -> None:
    loaded = load("hyperplane", n_rows=7, seed=3, n_features=4, noise_percentage=0.0)

    _assert_same(loaded, hyperplane(7, seed=3, n_features=4, noise_percentage=0.0))
    assert loaded.X.shape == (7, 4)


@pytest.mark.parametrize("name", ["wine", "diabetes"])
def test_scikit_learn_names_load_the_scikit_learn_data_sets(name: str) -> None:
    _assert_same(load(name), load_sklearn(name))


@pytest.mark.parametrize("name", [["wine"], None, "Wine", ""])
def test_unknown_or_unhashable_names_raise_a_data_validation_error(name: Any) -> None:
    with pytest.raises(UnknownDatasetError, match="available") as caught:
        load(name)
    assert isinstance(caught.value, DataValidationError)
    assert "hyperplane" in str(caught.value)


def test_arguments_a_loader_does_not_take_raise_a_type_error() -> None:
    with pytest.raises(TypeError):
        load("wine", n=3)


def test_the_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        LOADERS["mine"] = lambda: None  # type: ignore[index]
    assert "mine" not in LOADERS
