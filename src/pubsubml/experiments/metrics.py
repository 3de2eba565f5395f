"""Evaluation metrics of the reproduced experiments, all "higher is better".

pubsub-ml.txt §7.4 scores imbalanced data by the F1 score of the minority class, balanced data by
accuracy and regression by 1 − MSE; pfl-stacking.txt §4 uses balanced accuracy and ROC AUC.  ROC AUC
is always computed from predicted probabilities, never from hard labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    f1_score,
    mean_squared_error,
    roc_auc_score,
)

__all__ = ["METRICS", "minority_class", "score"]

METRICS = ("accuracy", "balanced_accuracy", "f1_minority", "one_minus_mse", "roc_auc")


def minority_class(y_true: Any) -> Any:
    """The least frequent label of ``y_true`` (ties: the smallest label).

    Examples
    --------
    >>> minority_class([0, 0, 1, 1, 1])
    np.int64(0)
    """
    labels, counts = np.unique(np.asarray(y_true), return_counts=True)
    if len(labels) == 0:
        raise ValueError("no labels")
    return labels[int(np.argmin(counts))]


def score(
    metric: str,
    y_true: Any,
    y_pred: Any = None,
    *,
    proba: np.ndarray | None = None,
    classes: Sequence[Any] | None = None,
    minority: Any = None,
) -> float:
    """The value of ``metric`` on one test set.

    Parameters
    ----------
    metric : {"accuracy", "balanced_accuracy", "f1_minority", "one_minus_mse", "roc_auc"}
    y_true : array-like of shape (n,)
    y_pred : array-like of shape (n,), optional
        Hard predictions (all metrics but ``roc_auc``).
    proba : ndarray of shape (n, n_classes), optional
        Predicted probabilities, columns in the order of ``classes`` (``roc_auc`` only).
    classes : sequence, optional
        The labels of the columns of ``proba``.  Binary: the AUC of the second class's column;
        multiclass: one-vs-rest, macro-averaged over the classes present in ``y_true``.
    minority : label, optional
        The class ``f1_minority`` scores; ``None``: the least frequent label of ``y_true``.  Pass
        it when it is known publicly, so that every test part scores the same class.

    Raises
    ------
    ValueError
        Unknown metric or missing input.

    Examples
    --------
    >>> score("f1_minority", [0, 0, 0, 1], [0, 0, 1, 1])
    0.6666666666666666
    >>> score("f1_minority", [0, 0, 0, 1], [0, 0, 1, 1], minority=0)
    0.8
    >>> score("roc_auc", [0, 1, 1], proba=np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]]),
    ...       classes=[0, 1])
    1.0
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose from {METRICS}")
    y_true = np.asarray(y_true)
    if metric == "roc_auc":
        if proba is None or classes is None:
            raise ValueError("roc_auc needs predicted probabilities and their classes")
        P = np.asarray(proba, dtype=float)
        cls = np.asarray(list(classes))
        if P.ndim != 2 or P.shape != (len(y_true), len(cls)):
            raise ValueError(f"proba must have shape ({len(y_true)}, {len(cls)}), got {P.shape}")
        if len(cls) == 2:
            return float(roc_auc_score(y_true == cls[1], P[:, 1]))
        present = np.isin(cls, y_true)
        aucs = [roc_auc_score(y_true == c, P[:, j]) for j, c in enumerate(cls) if present[j]]
        return float(np.mean(aucs))
    if y_pred is None:
        raise ValueError(f"{metric} needs hard predictions y_pred")
    y_pred = np.asarray(y_pred)
    if metric == "accuracy":
        return float(accuracy_score(y_true, y_pred))
    if metric == "balanced_accuracy":
        return float(balanced_accuracy_score(y_true, y_pred))
    if metric == "f1_minority":
        if minority is None:
            minority = minority_class(y_true)
        return float(f1_score(y_true, y_pred, labels=[minority], average="macro", zero_division=0))
    return float(1.0 - mean_squared_error(y_true.astype(float), y_pred.astype(float)))
