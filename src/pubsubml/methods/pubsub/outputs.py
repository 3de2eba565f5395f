"""Step 3 of CUSTOMIZE: the models' outputs on feature-extended rows, m(x) and O^s.

The customization algorithm sees a model only through its outputs M'_i(x') (pubsub-ml.txt §4,
Eq. 2; Theorem 4): this module holds the pieces that touch a model — its declared
``input_features``, its ``predict_proba``/``predict`` and, for a classifier, its declared label set.
Nothing here looks at a model's type.  :func:`extend_features` is x' (the rows extended with the
public defaults of the features a model needs and the subscriber lacks, §4 Step 3 Discussion),
:func:`model_outputs` the aligned outputs M'_i(x'), and :func:`meta_features` their concatenation
m(x) (Eq. 2) in the form the fusion model takes; with the targets, :func:`fusion_targets`, they
are O^s = {(m(x), y)} (Eq. 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.errors import DataValidationError, LabelError, SchemaMismatchError
from pubsubml.learners.base import check_target_bounds
from pubsubml.methods.pubsub.fusion import centred_log_odds
from pubsubml.methods.pubsub.own import OwnModel
from pubsubml.schema import FeatureSchema

__all__ = [
    "Runner",
    "align_outputs",
    "candidate_ids",
    "check_frame",
    "extend_features",
    "fusion_targets",
    "meta_features",
    "meta_layout",
    "model_classes",
    "model_features",
    "model_outputs",
    "published_runner",
    "run_models",
    "target_scale",
]


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


def check_frame(X: Any, schema: FeatureSchema | None) -> pd.DataFrame:
    """The subscriber's rows with string column names, each column in ``schema``.

    Raises
    ------
    SchemaMismatchError
        ``X`` is not a DataFrame, or has columns outside ``schema``.
    DataValidationError
        ``X`` has no rows.
    """
    if not isinstance(X, pd.DataFrame):
        raise SchemaMismatchError(
            f"Customizer needs a DataFrame (features are matched by name), got {type(X).__name__}"
        )
    if len(X) == 0:
        raise DataValidationError("X has no rows")
    frame = X.set_axis([str(c) for c in X.columns], axis=1)
    if schema is not None and not isinstance(schema, FeatureSchema):
        raise TypeError(f"schema must be a FeatureSchema or None, got {type(schema)}")
    if schema is not None:
        unknown = [c for c in frame.columns if c not in schema]
        if unknown:
            raise SchemaMismatchError(f"columns {unknown} are not in the public schema")
    return frame


# ---- x', M'_i(x'), m(x) and O^s --------------------------------------------------------------
def extend_features(
    frame: pd.DataFrame, models: Sequence[Any], schema: FeatureSchema | None
) -> pd.DataFrame:
    """x' of Step 3: add the public default of every feature a model needs and ``frame`` lacks.

    Without ``schema`` (or for a feature outside it) the feature is left for the model to fill,
    as a :class:`~pubsubml.artifacts.PublishedModel` does from its card.
    """
    if schema is None:
        return frame
    need = {f for m in models for f in model_features(m)} - set(frame.columns)
    fill = {f: schema[f].default for f in sorted(need) if f in schema}
    return frame.assign(**fill) if fill else frame


def model_outputs(
    models: Sequence[Any],
    frame: pd.DataFrame,
    *,
    task: str,
    classes: np.ndarray | None,
    schema: FeatureSchema | None = None,
    runner: Runner | None = None,
) -> list[np.ndarray]:
    """M'_i(x') for every model, aligned to the subscriber's label set (:func:`align_outputs`).

    M^s (an :class:`~pubsubml.methods.pubsub.own.OwnModel`) runs directly; the subscribed
    models go through ``runner`` (if any) together.

    Returns
    -------
    list of ndarray of shape (n, n_classes) or (n, 1), one per model
    """
    method = "predict_proba" if task == "classification" else "predict"
    extended = extend_features(frame, models, schema)
    own = [i for i, m in enumerate(models) if isinstance(m, OwnModel)]
    rest = [i for i, m in enumerate(models) if not isinstance(m, OwnModel)]
    raw: list[np.ndarray] = [np.empty(0)] * len(models)
    for i, o in zip(own, run_models([models[i] for i in own], extended, method), strict=True):
        raw[i] = o
    outs = run_models([models[i] for i in rest], extended, method, runner)
    for i, o in zip(rest, outs, strict=True):
        raw[i] = o
    return [
        align_outputs(o, m, classes, i) for i, (o, m) in enumerate(zip(raw, models, strict=True))
    ]


def meta_features(
    outputs: Sequence[np.ndarray],
    *,
    task: str,
    stacked: bool,
    scale: tuple[float, float] | None,
) -> np.ndarray:
    """m(x) of Eq. 2 from aligned outputs: centred log-odds or scaled outputs for the stacked
    fusion, the outputs themselves (probabilities) for the paper's fusion models."""
    meta = np.hstack(list(outputs)).astype(np.float64)
    if not stacked:
        return meta
    if task == "classification":
        k = outputs[0].shape[1]
        return centred_log_odds(meta.reshape(len(meta), -1, k)).reshape(len(meta), -1)
    assert scale is not None
    return (meta - scale[0]) / scale[1]


def target_scale(y: np.ndarray, target_bounds: Sequence[float] | None) -> tuple[float, float]:
    """``(offset, scale)`` of a regression target for the stacked fusion: by the public bounds,
    else standardised by the subscriber's rows."""
    bounds = check_target_bounds(target_bounds)
    if bounds is not None:
        return bounds[0], bounds[1] - bounds[0]
    std = float(np.std(y))
    return float(np.mean(y)), std if std > 0 else 1.0


def fusion_targets(y: np.ndarray, scale: tuple[float, float] | None) -> np.ndarray:
    """The y of O^s: as they are, or scaled by ``scale`` (:func:`target_scale`)."""
    return y if scale is None else (y - scale[0]) / scale[1]


def meta_layout(
    widths: list[int], ids: list[str], classes: np.ndarray | None
) -> tuple[list[slice], list[str]]:
    """Each selected model's block of meta-feature columns, and the columns' names."""
    blocks: list[slice] = []
    names: list[str] = []
    start = 0
    suffixes = [f":{c}" for c in classes] if classes is not None else [""]
    for width, model_id in zip(widths, ids, strict=True):
        blocks.append(slice(start, start + width))
        start += width
        names.extend(f"{model_id}{s}" for s in suffixes)
    return blocks, names
