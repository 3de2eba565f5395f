"""Tests of pubsubml.data.tabular: the scikit-learn data sets and their public schemas."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import datasets

from pubsubml.data.dataset import UnknownDatasetError
from pubsubml.data.tabular import load_sklearn

BUNCHES = {
    "breast_cancer": lambda: datasets.load_breast_cancer(),
    "diabetes": lambda: datasets.load_diabetes(scaled=False),
    "digits": lambda: datasets.load_digits(),
    "wine": lambda: datasets.load_wine(),
}


@pytest.mark.parametrize("name", sorted(BUNCHES))
def test_each_column_holds_the_scikit_learn_feature_of_that_name(name: str) -> None:
    bunch = BUNCHES[name]()

    d = load_sklearn(name)

    for i, raw in enumerate(bunch.feature_names):
        column = str(raw).replace(" ", "_").replace("/", "_")
        if name == "digits":  # scikit-learn names pixels pixel_r_c as well
            assert column == f"pixel_{i // 8}_{i % 8}"
        np.testing.assert_array_equal(d.X[column].to_numpy(dtype=np.float64), bunch.data[:, i])
    np.testing.assert_array_equal(d.y, bunch.target)
    assert sorted(d.X.columns) == sorted(d.schema.names) and len(d.X.columns) == len(
        bunch.feature_names
    )


def test_digit_pixels_are_in_image_order() -> None:
    images = datasets.load_digits().images

    X = load_sklearn("digits").X

    np.testing.assert_array_equal(X["pixel_2_5"].to_numpy(), images[:, 2, 5])
    np.testing.assert_array_equal(X.iloc[0].to_numpy().reshape(8, 8), images[0])


@pytest.mark.parametrize("name", ["digits", "diabetes"])
def test_data_lies_within_the_declared_public_bounds(name: str) -> None:
    d = load_sklearn(name)

    d.schema.validate_frame(d.X, out_of_bounds="error")


def test_diabetes_sex_is_a_categorical_integer_column() -> None:
    d = load_sklearn("diabetes")

    assert d.X["sex"].dtype == np.int64 and set(d.X["sex"].unique().tolist()) == {1, 2}
    assert d.schema["sex"].kind == "categorical" and d.schema["sex"].categories == (1, 2)
    assert d.y.dtype == np.float64 and d.task == "regression" and d.classes is None


@pytest.mark.parametrize("name", [["wine"], None, "iris"])
def test_unknown_or_unhashable_names_raise(name: Any) -> None:
    with pytest.raises(UnknownDatasetError, match="wine"):
        load_sklearn(name)
