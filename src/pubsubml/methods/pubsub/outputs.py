"""Outputs of black-box models: running them, aligning their labels, scoring them.

The customization algorithm sees a model only through its outputs M'_i(x') (pubsub-ml.txt §4,
Eq. 2; Theorem 4): this module holds the pieces that touch a model — its declared
``input_features``, its ``predict_proba``/``predict`` and, for a classifier, its declared label set
— plus the registries of own models, fusion models and selection metrics used by
:class:`~pubsubml.methods.pubsub.customizer.Customizer`.  Nothing here looks at a model's type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils._tags import ClassifierTags, RegressorTags, Tags

from pubsubml.errors import DataValidationError, LabelError, SchemaMismatchError
from pubsubml.schema import FeatureSchema

__all__ = [
    "FUSION_MODELS",
    "SELECTION_METRICS",
    "OwnModel",
    "Runner",
    "SelectionMetric",
    "TaskEstimatorMixin",
    "align_outputs",
    "candidate_ids",
    "encode_targets",
    "model_classes",
    "model_features",
    "public_encoder",
    "published_runner",
    "run_models",
]


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


Runner = Callable[[Sequence[Any], pd.DataFrame, str], Sequence[np.ndarray]]
"""``runner(models, frame, method)``: each model's ``method`` output on ``frame``, in order."""


def model_features(model: Any) -> list[str]:
    """The input features a model declares (``input_features``, else ``feature_names_in_``).

    Raises
    ------
    SchemaMismatchError
        The model declares no input features.
    """
    feats = getattr(model, "input_features", None)
    if feats is None:
        feats = getattr(model, "feature_names_in_", None)
    if feats is None:
        raise SchemaMismatchError(
            f"model {model!r} declares no input_features; a black box must name its inputs"
        )
    return [str(f) for f in feats]


def model_classes(model: Any) -> list[Any] | None:
    """The label set a classifier declares (``classes``, else ``classes_``), or ``None``."""
    cls = getattr(model, "classes", None)
    if cls is None:
        cls = getattr(model, "classes_", None)
    return None if cls is None else list(np.asarray(cls).tolist())


class OwnModel:
    """The subscriber's own model M^s seen as a black box, like any subscribed model."""

    def __init__(self, estimator: Any, features: list[str]) -> None:
        self.estimator = estimator
        self.input_features = features
        self.classes = getattr(estimator, "classes_", None)

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities of M^s on its own features."""
        return np.asarray(self.estimator.predict_proba(X[self.input_features]))

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predictions of M^s on its own features."""
        return np.asarray(self.estimator.predict(X[self.input_features]))


def candidate_ids(
    models: Sequence[Any], given: Sequence[str] | None, *, reserved: str
) -> list[str]:
    """Names of the subscribed models: ``given``, else their ``model_id``, else ``"m{i}"``.

    Raises
    ------
    ValueError
        Wrong count, duplicates, or a name equal to ``reserved`` (the own model's).
    """
    if given is not None:
        ids = [str(i) for i in given]
        if len(ids) != len(models):
            raise ValueError(f"{len(ids)} model_ids for {len(models)} models")
    else:
        ids = [str(getattr(m, "model_id", None) or f"m{i}") for i, m in enumerate(models)]
    if len(set(ids)) != len(ids) or reserved in ids:
        raise ValueError(f"model ids must be unique and differ from {reserved!r}")
    return ids


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


def run_models(
    models: Sequence[Any], frame: pd.DataFrame, method: str, runner: Runner | None = None
) -> list[np.ndarray]:
    """Each model's ``method`` (``"predict_proba"`` or ``"predict"``) on feature-extended rows.

    Without ``runner`` every model receives ``frame`` restricted to its declared input features
    that ``frame`` holds (extra columns dropped; absent ones left for the model to fill with its
    public defaults).  Frames are built once per distinct feature list.

    Returns
    -------
    list of ndarray, one per model
    """
    if runner is not None:
        outs = list(runner(models, frame, method))
        if len(outs) != len(models):
            raise DataValidationError(
                f"runner returned {len(outs)} outputs for {len(models)} models"
            )
        return [np.asarray(o) for o in outs]
    cols = set(frame.columns)
    views: dict[tuple[str, ...], pd.DataFrame] = {}
    out: list[np.ndarray] = []
    for i, m in enumerate(models):
        key = tuple(f for f in model_features(m) if f in cols)
        if key not in views:
            views[key] = frame.loc[:, list(key)]
        fn = getattr(m, method, None)
        if fn is None:
            raise LabelError(
                f"model {i} has no {method}: it cannot be fused into this task "
                "(a classification task needs predict_proba, a regression task predict)"
            )
        out.append(np.asarray(fn(views[key])))
    return out


def published_runner(models: Sequence[Any], frame: pd.DataFrame, method: str) -> list[np.ndarray]:
    """A :data:`Runner` for :class:`~pubsubml.artifacts.PublishedModel` s: one batched pass.

    Uses :func:`~pubsubml.artifacts.predict_many`, which encodes ``frame`` once per input schema
    (feature extension with each card's public defaults) and runs networks of one architecture
    stacked.  Its outputs are probabilities for classifiers and one column for regressors, so
    ``method`` needs no dispatch.
    """
    from pubsubml.artifacts import predict_many

    return predict_many(models, frame) if models else []


def align_outputs(
    out: np.ndarray, model: Any, classes: np.ndarray | None, index: int
) -> np.ndarray:
    """A model's output as columns of m(x) in the subscriber's label order.

    Classification: probability columns are reordered by class label and zero columns are
    inserted for the subscriber's classes the model does not know.  Regression: one column.

    Parameters
    ----------
    out : ndarray of shape (n, k) or (n,)
    model : black-box model
    classes : ndarray of shape (K,) or None
        The subscriber's label set (``None`` for regression).
    index : int
        Position of the model, for error messages.

    Returns
    -------
    ndarray of shape (n, K) (classification) or (n, 1) (regression), float64

    Raises
    ------
    LabelError
        The model declares no classes or a label outside ``classes``.
    DataValidationError
        Wrong shape or non-finite outputs.
    """
    arr = np.asarray(out, dtype=np.float64)
    if classes is None:
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1:
            raise DataValidationError(
                f"model {index}: expected one output per row, got {arr.shape}"
            )
        col = arr.reshape(-1, 1)
    else:
        mc = model_classes(model)
        if mc is None:
            raise LabelError(f"model {index} declares no classes; cannot align its outputs")
        if arr.ndim != 2 or arr.shape[1] != len(mc):
            raise DataValidationError(
                f"model {index}: predict_proba gave shape {arr.shape} for {len(mc)} classes"
            )
        order = np.asarray(classes).tolist()
        if mc == order:  # already in the subscriber's order (most models): no reordering
            col = arr.copy() if arr is out else arr
        else:
            where = {c: j for j, c in enumerate(order)}
            unknown = [c for c in mc if c not in where]
            if unknown:
                raise LabelError(
                    f"model {index} predicts labels {unknown} outside the subscriber's classes "
                    f"{list(where)}; its outputs cannot be aligned"
                )
            col = np.zeros((arr.shape[0], len(where)))
            col[:, [where[c] for c in mc]] = arr
    if not np.all(np.isfinite(col)):
        raise DataValidationError(f"model {index} returned NaN or infinite outputs")
    return col


# ---- selection metrics (Step 2) ------------------------------------------------------------
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


# ---- input encoding and fusion models (Step 4) ----------------------------------------
class _PublicEncoder:
    """Encode a DataFrame with public schema bounds (or as plain floats without a schema)."""

    def __init__(self, schema: FeatureSchema | None, features: list[str]) -> None:
        self.schema = None if schema is None else schema.subset(features)
        self.features = features

    def __call__(self, X: pd.DataFrame) -> np.ndarray:
        if self.schema is not None:
            return self.schema.encode(X, extra="ignore")
        try:
            return np.asarray(X[self.features], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DataValidationError(f"features must be numeric without a schema: {exc}") from exc


def public_encoder(schema: FeatureSchema | None, features: list[str]) -> _PublicEncoder:
    """A callable encoding a DataFrame's ``features`` with the public schema bounds."""
    return _PublicEncoder(schema, features)


def _fusion_linear(task: str, seed: int) -> Any:
    """m(x) fully connected to the output layer (pubsub-ml.txt §7.2): softmax or linear."""
    if task == "classification":
        return LogisticRegression(C=1.0, max_iter=1000)
    return Ridge(alpha=1.0)


def _fusion_forest(task: str, seed: int) -> Any:
    """A random-forest meta-model (pfl-stacking.txt §4)."""
    cls = RandomForestClassifier if task == "classification" else RandomForestRegressor
    return cls(random_state=seed)


FUSION_MODELS: dict[str, Callable[[str, int], Any]] = {
    "forest": _fusion_forest,
    "linear": _fusion_linear,
}
