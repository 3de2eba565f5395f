"""Tests of pubsubml.schema.column_checks: numeric and categorical columns, checked in one pass."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsubml.errors import DataValidationError
from pubsubml.schema.column_checks import (
    NumericBlock,
    checked_categorical,
    checked_numeric,
    float_columns,
)


def test_numeric_columns_are_clipped_or_refused_outside_their_bounds() -> None:
    col = pd.Series(["0.5", 2, -1])

    np.testing.assert_array_equal(checked_numeric("a", col, 0.0, 1.0, "clip"), [0.5, 1.0, 0.0])
    with pytest.raises(DataValidationError, match=r"'a': 2 values outside .*\[0.0, 1.0\]"):
        checked_numeric("a", col, 0.0, 1.0, "error")
    with pytest.raises(DataValidationError, match="not numeric"):
        checked_numeric("a", pd.Series(["x"]), 0.0, 1.0, "clip")
    with pytest.raises(DataValidationError, match="NaN or infinite"):
        checked_numeric("a", pd.Series([np.inf]), 0.0, 1.0, "clip")


def test_categorical_columns_hold_declared_categories_only() -> None:
    assert checked_categorical("c", pd.Series(["x", "y"]), ["x", "y"]).tolist() == ["x", "y"]
    with pytest.raises(DataValidationError, match=r"values \['z'\] outside its categories"):
        checked_categorical("c", pd.Series(["x", "z"]), ["x", "y"])
    with pytest.raises(DataValidationError, match="missing values"):
        checked_categorical("c", pd.Series(["x", None]), ["x"])


def test_a_numeric_block_checks_like_the_column_checks_in_order() -> None:
    frame = pd.DataFrame({"b": [0.5, 3.0], "a": [np.nan, 0.2]})
    values = float_columns(frame, ["a", "b"])
    assert values.tolist()[1] == [0.2, 3.0]

    block = NumericBlock(["a", "b"], [0.0, 0.0], [1.0, 1.0], values, "error")

    with pytest.raises(DataValidationError, match="'a' contains NaN"):
        block.raise_first_error()
    with pytest.raises(DataValidationError, match="'b': 1 values outside"):
        block.checked("b")
    clipping = NumericBlock(["b"], [0.0], [1.0], float_columns(frame, ["b"]), "clip")
    np.testing.assert_array_equal(clipping.checked("b"), [0.5, 1.0])
