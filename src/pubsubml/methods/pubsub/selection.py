"""Step 2 of CUSTOMIZE: ``Sel``, the best candidates of M^s ∪ Λ_s (pubsub-ml.txt §4, §8.2.3).

Every candidate is scored on the customization rows ``Cus`` (M^s by its out-of-fold outputs when
cross-fitting) with a :class:`SelectionMetric`, computed for all candidates at once on their
aligned outputs, and :func:`select_top` keeps the ``top_m`` best.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["SELECTION_METRICS", "SelectionMetric", "select_top", "selection_metric"]


@dataclass(frozen=True)
class SelectionMetric:
    """A metric of Step 2, computed for every candidate at once on ``Cus``.

    ``fn(y, outputs)`` takes the targets ``y`` of shape (n,) — class indices into the subscriber's
    label set for classification — and the aligned outputs of shape (n_models, n, k), and returns
    one score per model.
    """

    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    greater_is_better: bool
    tasks: frozenset[str]

    def score(self, y: np.ndarray, outputs: np.ndarray) -> np.ndarray:
        """Scores of shape (n_models,) for outputs (n_models, n, k) against ``y`` (n,)."""
        return np.asarray(self.fn(np.asarray(y), np.asarray(outputs)), dtype=np.float64)


def _accuracy(y: np.ndarray, out: np.ndarray) -> np.ndarray:
    return np.mean(out.argmax(axis=2) == y, axis=1)


def _balanced_accuracy(y: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Mean recall over the classes present in ``y`` (as scikit-learn's balanced accuracy)."""
    pred = out.argmax(axis=2)
    recalls = [np.mean(pred[:, y == c] == c, axis=1) for c in np.unique(y)]
    return np.mean(recalls, axis=0)


def _f1_minority(y: np.ndarray, out: np.ndarray) -> np.ndarray:
    """F1 of the least frequent class of ``y`` (pubsub-ml.txt §8, imbalanced data sets)."""
    values, counts = np.unique(y, return_counts=True)
    minority = values[np.argmin(counts)]
    pred = out.argmax(axis=2) == minority
    truth = y == minority
    tp = np.sum(pred & truth, axis=1)
    denominator = np.sum(pred, axis=1) + np.sum(truth)
    return np.divide(2.0 * tp, denominator, out=np.zeros(len(pred)), where=denominator > 0)


def _log_loss(y: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Mean log-loss, probabilities floored at 1e-3 (a model certain of a wrong class is bounded)."""
    p = out[:, np.arange(out.shape[1]), np.asarray(y, dtype=np.int64)]
    return -np.mean(np.log(np.clip(p, 1e-3, 1.0)), axis=1)


def _mse(y: np.ndarray, out: np.ndarray) -> np.ndarray:
    return np.mean((out[:, :, 0] - y) ** 2, axis=1)


def _r2(y: np.ndarray, out: np.ndarray) -> np.ndarray:
    sse = np.sum((out[:, :, 0] - y) ** 2, axis=1)
    sst = float(np.sum((y - y.mean()) ** 2))
    if sst == 0.0:
        return np.where(sse == 0.0, 1.0, 0.0)
    return 1.0 - sse / sst


_CLF = frozenset({"classification"})
_REG = frozenset({"regression"})
SELECTION_METRICS: dict[str, SelectionMetric] = {
    "accuracy": SelectionMetric(_accuracy, True, _CLF),
    "balanced_accuracy": SelectionMetric(_balanced_accuracy, True, _CLF),
    "f1_minority": SelectionMetric(_f1_minority, True, _CLF),
    "log_loss": SelectionMetric(_log_loss, False, _CLF),
    "mse": SelectionMetric(_mse, False, _REG),
    "r2": SelectionMetric(_r2, True, _REG),
}


def selection_metric(name: str | None, task: str) -> tuple[str, SelectionMetric]:
    """The metric called ``name`` (default: ``"log_loss"`` or ``"mse"``) and its name.

    Raises
    ------
    ValueError
        An unknown metric, or one that does not apply to ``task``.
    """
    metric_name = name or ("log_loss" if task == "classification" else "mse")
    if metric_name not in SELECTION_METRICS:
        raise ValueError(
            f"unknown selection_metric {metric_name!r}; choose one of {sorted(SELECTION_METRICS)}"
        )
    metric = SELECTION_METRICS[metric_name]
    if task not in metric.tasks:
        raise ValueError(f"selection_metric {metric_name!r} does not apply to {task}")
    return metric_name, metric


def select_top(
    scores: np.ndarray, metric: SelectionMetric, top_m: int | None, *, keep_first: bool
) -> np.ndarray:
    """Sel of Step 2: the indices of the ``top_m`` best candidates, ascending.

    Parameters
    ----------
    scores : ndarray of shape (n_candidates,)
        A NaN score ranks last.
    metric : SelectionMetric
    top_m : int or None
        ``None`` keeps every candidate.
    keep_first : bool
        Always keep candidate 0 (M^s, for the stacked fusion), counted among the ``top_m``.

    Returns
    -------
    ndarray of int
    """
    key = -scores if metric.greater_is_better else scores
    order = np.argsort(np.where(np.isnan(key), np.inf, key), kind="stable")
    n = len(scores)
    m = n if top_m is None else min(int(top_m), n)
    if keep_first:
        order = np.concatenate([[0], order[order != 0]])
    return np.sort(order[:m])
