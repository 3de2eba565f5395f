"""A customized model scored on labelled rows next to its parts alone (pubsub-ml.txt §7.3).

§7.3 compares PubSub-ML with "Own", the subscriber's model alone: :func:`score_parts` scores the
customized model C^s, its own model M^s and each selected received model on the same rows, with
accuracy, balanced accuracy and log-loss (classification) or R², RMSE and MAE (regression).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    log_loss,
    mean_absolute_error,
    r2_score,
)

from pubsubml.errors import LabelError
from pubsubml.methods.pubsub.outputs import align_outputs

__all__ = ["score_parts"]


def score_parts(customizer: Any, X: Any, y: Any) -> dict[str, dict[str, float | None]]:
    """Metrics of the customized model, the own model and each received model on ``(X, y)``.

    Parameters
    ----------
    customizer : Customizer
        Fitted (or loaded with :func:`~pubsubml.methods.pubsub.storage.load_customizer`).
    X : DataFrame
        Rows with the columns the customizer was fitted on.
    y : array-like
        Their labels or targets.

    Returns
    -------
    dict of str to dict of str to float or None
        ``"customized"``, ``"own model alone"`` (when there is one) and ``"{publisher} {id[:8]}"``
        per received model, each with its metrics (``None`` where undefined: R² of one row).

    Raises
    ------
    LabelError
        A label outside the model's classes.
    """
    clf = customizer.task == "classification"
    outputs: dict[str, Any] = {
        "customized": customizer.predict_proba(X) if clf else customizer.predict(X)
    }
    if customizer.own_model_ is not None:
        own = customizer.own_model_
        outputs["own model alone"] = own.predict_proba(X) if clf else own.predict(X)
    classes = getattr(customizer, "classes_", None)
    for i, model in enumerate(customizer.models):
        raw = model.predict_proba(X) if clf else model.predict(X)
        aligned = align_outputs(raw, model, classes, i)
        outputs[f"{model.publisher} {model.model_id[:8]}"] = aligned if clf else aligned[:, 0]
    if clf:
        labels = np.asarray(y)
        return {who: _classification(out, labels, classes) for who, out in outputs.items()}
    target = np.asarray(y, dtype=float)
    return {who: _regression(out, target) for who, out in outputs.items()}


def _classification(proba: Any, y: np.ndarray, classes: Any) -> dict[str, float | None]:
    where = {c: j for j, c in enumerate(np.asarray(classes).tolist())}
    codes = [where.get(v.item() if hasattr(v, "item") else v) for v in y]
    unknown = sorted({str(v) for v, c in zip(y, codes, strict=True) if c is None})
    if unknown:
        raise LabelError(f"labels {unknown[:5]} are not among the model's classes {list(where)}")
    truth = np.asarray(codes, dtype=np.int64)
    pred = np.argmax(proba, axis=1)
    clipped = np.clip(proba, 1e-15, 1.0)
    clipped = clipped / clipped.sum(axis=1, keepdims=True)
    return {
        "accuracy": float(accuracy_score(truth, pred)),
        "balanced accuracy": float(balanced_accuracy_score(truth, pred)),
        "log-loss": float(log_loss(truth, clipped, labels=list(range(len(where))))),
    }


def _regression(pred: Any, y: np.ndarray) -> dict[str, float | None]:
    return {
        "R²": float(r2_score(y, pred)) if len(y) > 1 else None,
        "RMSE": float(np.sqrt(np.mean((np.asarray(pred) - y) ** 2))),
        "MAE": float(mean_absolute_error(y, pred)),
    }
