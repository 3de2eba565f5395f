"""Input and label handling shared by every pubsubml estimator.

Estimators accept a DataFrame (matched to the public :class:`~pubsubml.schema.FeatureSchema` by
column name and encoded with its public bounds) or, when no schema is given, a numeric array that
the caller has already scaled with public bounds.  Nothing here computes a statistic of the data:
scalers fitted on private data would leak (DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import DataValidationError, LabelError, SchemaMismatchError
from pubsubml.schema import FeatureSchema

__all__ = ["SchemaInputMixin", "check_labels", "check_regression_targets"]


class SchemaInputMixin:
    """Turns ``X`` into the float32 matrix a model trains on, with public bounds only.

    Subclasses declare a ``schema`` parameter (``FeatureSchema`` or ``None``).  After
    :meth:`_encode_fit` the fitted attributes ``schema_`` (possibly ``None``), ``n_features_in_``
    and, for DataFrame input, ``feature_names_in_`` are set.
    """

    schema: FeatureSchema | None

    def _encode_fit(self, X: Any) -> np.ndarray:
        schema = self.schema
        if schema is not None and not isinstance(schema, FeatureSchema):
            raise TypeError(f"schema must be a FeatureSchema or None, got {type(schema).__name__}")
        self.schema_ = schema
        if isinstance(X, pd.DataFrame):
            self.feature_names_in_ = np.asarray([str(c) for c in X.columns], dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        Z = self._encode(X)
        self.n_features_in_ = int(Z.shape[1]) if schema is None else len(schema)
        return Z

    def _encode_predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "n_features_in_")
        Z = self._encode(X)
        if self.schema_ is None and Z.shape[1] != self.n_features_in_:
            raise SchemaMismatchError(
                f"X has {Z.shape[1]} features, the estimator was fitted with {self.n_features_in_}"
            )
        return Z

    def _encode(self, X: Any) -> np.ndarray:
        schema = getattr(self, "schema_", self.schema)
        if schema is not None:
            return schema.encode(X, extra="ignore") if isinstance(X, pd.DataFrame) else schema.encode(X)
        try:
            Z = np.asarray(X, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise DataValidationError(f"X must be numeric without a schema: {exc}") from exc
        if Z.ndim != 2:
            raise DataValidationError(f"expected a 2-D X, got shape {Z.shape}")
        if Z.shape[0] == 0:
            raise DataValidationError("X has no rows")
        if not np.all(np.isfinite(Z)):
            raise DataValidationError("X contains NaN or infinite values")
        return Z


def check_labels(y: Any, classes: Sequence[Any] | None, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate classification labels against the declared public ``classes``.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
    classes : sequence or None
        Public label set.  ``None`` takes the labels present in ``y`` (fine for non-private
        models; a DP model should declare its classes, since the label set itself can leak).
    n_samples : int

    Returns
    -------
    classes_ : ndarray of shape (n_classes,)
    codes : ndarray of shape (n_samples,), int64 index of each label in ``classes_``

    Raises
    ------
    LabelError
        Labels outside ``classes``, missing labels, fewer than two classes, wrong length.
    """
    y_arr = np.asarray(y)
    if y_arr.ndim != 1:
        y_arr = y_arr.reshape(-1) if y_arr.ndim == 2 and y_arr.shape[1] == 1 else y_arr
    if y_arr.ndim != 1:
        raise LabelError(f"y must be 1-D, got shape {np.asarray(y).shape}")
    if len(y_arr) != n_samples:
        raise LabelError(f"y has {len(y_arr)} labels for {n_samples} rows")
    if pd.isna(y_arr).any():
        raise LabelError("y contains missing labels")
    classes_ = np.unique(y_arr) if classes is None else np.asarray(list(classes))
    if len(classes_) < 2:
        raise LabelError(f"classification needs at least two classes, got {classes_.tolist()}")
    if len(set(classes_.tolist())) != len(classes_):
        raise LabelError(f"declared classes are not unique: {classes_.tolist()}")
    index = {c: i for i, c in enumerate(classes_.tolist())}
    try:
        codes = np.fromiter((index[v] for v in y_arr.tolist()), dtype=np.int64, count=len(y_arr))
    except KeyError as exc:
        raise LabelError(
            f"label {exc.args[0]!r} is not among the declared classes {classes_.tolist()}"
        ) from None
    return classes_, codes


def check_regression_targets(y: Any, n_samples: int) -> np.ndarray:
    """Validate a real-valued target; returns float32 of shape (n_samples,)."""
    try:
        y_arr = np.asarray(y, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise DataValidationError(f"regression targets must be numeric: {exc}") from exc
    if len(y_arr) != n_samples:
        raise DataValidationError(f"y has {len(y_arr)} values for {n_samples} rows")
    if not np.all(np.isfinite(y_arr)):
        raise DataValidationError("y contains NaN or infinite values")
    return y_arr.astype(np.float32)
