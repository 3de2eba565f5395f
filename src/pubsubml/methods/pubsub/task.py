"""The subscriber's learning task: classification or regression (pubsub-ml.txt §4, Algorithm 2).

CUSTOMIZE(s, *loss*) takes its loss from the task at the subscriber: the categorical cross-entropy
over the subscriber's classes, or the squared error (§4 Step 4).  :class:`TaskEstimatorMixin` gives
an estimator with a ``task`` parameter the scikit-learn tags and ``score`` of a classifier or a
regressor (the :class:`~pubsubml.methods.pubsub.customizer.Customizer` and the own model), and
:func:`encode_targets` reads the subscriber's labels as class indices into its label set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils._tags import ClassifierTags, RegressorTags, Tags

from pubsubml.errors import DataValidationError, LabelError

__all__ = ["TASKS", "Task", "TaskEstimatorMixin", "check_task", "encode_targets"]

Task = Literal["classification", "regression"]
TASKS: tuple[str, ...] = ("classification", "regression")


def check_task(task: str) -> None:
    """Refuse a task other than classification or regression.

    Raises
    ------
    ValueError
    """
    if task not in TASKS:
        raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")


class TaskEstimatorMixin:
    """scikit-learn tags and ``score`` of an estimator whose ``task`` parameter makes it a
    classifier or a regressor (the customizer and the own model)."""

    task: str

    def __sklearn_tags__(self) -> Tags:
        tags: Tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.target_tags.required = True
        if self.task == "regression":
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        else:
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
        return tags

    def score(self, X: pd.DataFrame, y: Any, sample_weight: Any = None) -> float:
        """Accuracy (classification) or R² (regression) on ``(X, y)``."""
        pred = self.predict(X)  # type: ignore[attr-defined]  # the estimator's own predict
        if self.task == "classification":
            return float(accuracy_score(y, pred, sample_weight=sample_weight))
        return float(r2_score(y, pred, sample_weight=sample_weight))


def encode_targets(
    y: np.ndarray, task: str, classes: Sequence[Any] | None
) -> tuple[np.ndarray | None, np.ndarray]:
    """The subscriber's label set and ``y`` as class indices (or float targets for regression).

    Raises
    ------
    LabelError
        Missing labels, fewer than two classes, or labels outside ``classes``.
    DataValidationError
        Non-numeric or non-finite regression targets.
    """
    if task == "regression":
        try:
            t = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise DataValidationError(f"regression targets must be numeric: {exc}") from exc
        if not np.all(np.isfinite(t)):
            raise DataValidationError("y contains NaN or infinite values")
        return None, t
    if pd.isna(y).any():
        raise LabelError("y contains missing labels")
    labels = np.unique(y) if classes is None else np.asarray(list(classes))
    if len(labels) < 2 or len(set(labels.tolist())) != len(labels):
        raise LabelError(f"need at least two distinct classes, got {labels.tolist()}")
    index = {c: i for i, c in enumerate(labels.tolist())}
    unknown = {v for v in y.tolist() if v not in index}
    if unknown:
        raise LabelError(f"labels {sorted(map(str, unknown))} are not in classes {labels.tolist()}")
    return labels, np.fromiter((index[v] for v in y.tolist()), np.int64, count=len(y))
