"""Shared input handling of the learners (the parts the estimator checks do not reach)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import DataConversionWarning
from sklearn.linear_model import LogisticRegression

from pubsubml.errors import DataValidationError, LabelError
from pubsubml.learners.base import check_labels, check_regression_targets
from pubsubml.learners.local import LocalModel
from pubsubml.schema import FeatureSchema


def test_declared_classes_keep_their_order_and_codes() -> None:
    classes, codes = check_labels(["b", "a", "b"], ["b", "a"], 3)

    assert classes.tolist() == ["b", "a"] and codes.tolist() == [0, 1, 0]


@pytest.mark.parametrize(
    ("y", "message"),
    [
        (None, "requires y"),
        ([[0, 1], [1, 0]], "1d array"),
        ([0.5, 1.5], "continuous"),
        (np.array(["a", 1], dtype=object), "cannot be sorted"),
        ([0, None], "missing"),
        ([1, 1], "1 class"),
    ],
)
def test_bad_labels_raise_label_error(y: object, message: str) -> None:
    with pytest.raises(LabelError, match=message):
        check_labels(y, None, 2)


def test_column_vector_targets_warn_and_ravel() -> None:
    with pytest.warns(DataConversionWarning):
        _, codes = check_labels(np.array([[0], [1]]), None, 2)
    with pytest.warns(DataConversionWarning):
        values = check_regression_targets(np.array([[0.5], [1.5]]), 2)

    assert codes.tolist() == [0, 1] and values.tolist() == [0.5, 1.5]


def test_regression_targets_must_be_numeric_and_finite() -> None:
    with pytest.raises(DataValidationError):
        check_regression_targets(["a", "b"], 2)
    with pytest.raises(DataValidationError):
        check_regression_targets([1.0, np.inf], 2)


def test_fit_that_fails_on_labels_leaves_a_fresh_estimator_unfitted() -> None:
    model = LocalModel(
        estimator=LogisticRegression(), schema=FeatureSchema.numeric(["a"]), classes=[0, 1]
    )

    with pytest.raises(LabelError):
        model.fit(pd.DataFrame({"a": [0.1, 0.9]}), [0, 2])
    assert not hasattr(model, "schema_") and not hasattr(model, "n_features_in_")
