"""Tests of pubsubml.methods.pubsub.task: the subscriber's labels and the task's estimator tags."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, is_classifier, is_regressor

from pubsubml.errors import DataValidationError, LabelError
from pubsubml.methods.pubsub.task import TaskEstimatorMixin, check_task, encode_targets


def test_encode_targets_indexes_labels_in_the_given_order() -> None:
    y = np.array(["b", "a", "c", "a"])
    labels, codes = encode_targets(y, "classification", None)
    assert labels is not None and labels.tolist() == ["a", "b", "c"]
    assert codes.tolist() == [1, 0, 2, 0] and codes.dtype == np.int64
    public, codes2 = encode_targets(y, "classification", ["c", "b", "a", "d"])
    assert public is not None and public.tolist() == ["c", "b", "a", "d"]
    assert codes2.tolist() == [1, 2, 0, 2]
    none, values = encode_targets(np.array([1, 2]), "regression", ["ignored"])
    assert none is None and values.dtype == np.float64 and values.tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    ("y", "task", "classes", "error"),
    [
        (np.array(["a", None], dtype=object), "classification", None, LabelError),
        (np.array([1, 1, 1]), "classification", None, LabelError),
        (np.array([1, 2]), "classification", [1, 1, 2], LabelError),
        (np.array([1, 3]), "classification", [1, 2], LabelError),
        (np.array(["x", "1.0"]), "regression", None, DataValidationError),
        (np.array([1.0, math.inf]), "regression", None, DataValidationError),
    ],
)
def test_encode_targets_refuses_bad_labels(
    y: np.ndarray, task: str, classes: list[Any] | None, error: type[Exception]
) -> None:
    with pytest.raises(error):
        encode_targets(y, task, classes)


class _Task(TaskEstimatorMixin, BaseEstimator):
    def __init__(self, task: str = "classification") -> None:
        self.task = task

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return X["a"].to_numpy()


def test_task_mixin_makes_a_classifier_or_a_regressor() -> None:
    assert is_classifier(_Task()) and not is_regressor(_Task())
    assert is_regressor(_Task("regression")) and not is_classifier(_Task("regression"))
    X = pd.DataFrame({"a": [1, 0, 1, 1]})
    assert _Task().score(X, [1, 0, 0, 1]) == 0.75
    assert _Task().score(X, [1, 0, 0, 1], sample_weight=[1, 1, 2, 0]) == 0.5
    assert _Task("regression").score(X, [1, 0, 1, 1]) == 1.0


def test_check_task_names_the_two_tasks() -> None:
    check_task("regression")
    with pytest.raises(ValueError, match="'classification' or 'regression'"):
        check_task("clustering")
