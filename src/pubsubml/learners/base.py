"""Input and label handling shared by every pubsubml estimator.

Estimators accept a DataFrame (matched to the public :class:`~pubsubml.schema.FeatureSchema` by
column name and encoded with its public bounds) or, when no schema is given, a numeric array that
the caller has already scaled with public bounds.  Nothing here computes a statistic of the data:
scalers fitted on private data would leak (DESIGN.md).

A site need not hold every feature of the consortium's schema: a DataFrame whose columns are a
subset of it is extended with the schema's public defaults (feature extension, pubsub-ml.txt §4
Step 3; FL sites do the same, §8.1.3), so the model takes every feature of the schema and the
ones the site lacks are constants at their defaults.  A training column that is not in the schema
is refused: the consortium never agreed on it, and dropping it silently would hide a misspelt
name.  At prediction, extra columns are ignored, as a published model ignores them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import DataValidationError, LabelError, SchemaMismatchError
from pubsubml.schema import FeatureSchema

__all__ = ["SchemaInputMixin", "check_labels", "check_regression_targets", "check_target_bounds"]


class SchemaInputMixin:
    """Turns ``X`` into the float32 matrix a model trains on, with public bounds only.

    Subclasses declare a ``schema`` parameter (``FeatureSchema`` or ``None``).  After
    :meth:`_encode_fit` the fitted attributes ``schema_`` (possibly ``None``), ``n_features_in_``
    (the schema's width) and, for DataFrame input, ``feature_names_in_`` (the columns given) are
    set.  A DataFrame may hold a subset of the schema's features: the others take the schema's
    public defaults (module notes); a training column outside the schema raises
    :class:`~pubsubml.errors.SchemaMismatchError`.  A ``fit`` that must leave the
    estimator untouched when it fails calls :meth:`_encode_new` first and :meth:`_commit_input`
    once training has succeeded.
    """

    schema: FeatureSchema | None

    def _encode_fit(self, X: Any) -> np.ndarray:
        Z = self._encode_new(X)
        self._commit_input(X, Z)
        return Z

    def _encode_new(self, X: Any) -> np.ndarray:
        """Encode training input with the ``schema`` parameter without changing any attribute.

        Together with :meth:`_commit_input` this lets ``fit`` validate everything first and set
        its fitted attributes only once training has succeeded (bad input changes nothing).
        """
        schema = self.schema
        if schema is not None and not isinstance(schema, FeatureSchema):
            raise TypeError(f"schema must be a FeatureSchema or None, got {type(schema).__name__}")
        return self._encode_with(schema, X, training=True)

    def _commit_input(self, X: Any, Z: np.ndarray) -> None:
        """Set ``schema_``, ``n_features_in_``, ``feature_names_in_`` and ``defaulted_features_``
        (the schema's features absent from a training DataFrame, filled with public defaults)."""
        schema = self.schema
        self.schema_ = schema
        self.defaulted_features_: list[str] = []
        if isinstance(X, pd.DataFrame):
            self.feature_names_in_ = np.asarray([str(c) for c in X.columns], dtype=object)
            if schema is not None:
                given = set(self.feature_names_in_.tolist())
                self.defaulted_features_ = [n for n in schema.names if n not in given]
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.n_features_in_ = int(Z.shape[1]) if schema is None else len(schema)

    def _encode_predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "n_features_in_")
        Z = self._encode(X)
        if self.schema_ is None and Z.shape[1] != self.n_features_in_:
            raise SchemaMismatchError(
                f"X has {Z.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input"
            )
        return Z

    def _encode(self, X: Any) -> np.ndarray:
        return self._encode_with(getattr(self, "schema_", self.schema), X)

    @staticmethod
    def _encode_with(schema: FeatureSchema | None, X: Any, *, training: bool = False) -> np.ndarray:
        """Encode ``X``: a DataFrame by column name (absent features from the public defaults;
        extra columns refused when ``training``, else ignored), an array as given."""
        if schema is not None:
            if not isinstance(X, pd.DataFrame):
                return schema.encode(X)
            return schema.encode(X, missing="default", extra="error" if training else "ignore")
        if sp.issparse(X):
            raise DataValidationError("sparse input is not supported: pass a dense array")
        raw = np.asarray(X)
        if np.iscomplexobj(raw):
            raise DataValidationError("Complex data not supported")
        try:
            Z = raw.astype(np.float32)
        except (TypeError, ValueError) as exc:
            raise DataValidationError(f"X must be numeric without a schema: {exc}") from exc
        if Z.ndim != 2:
            raise DataValidationError(
                f"expected a 2-D X, got shape {Z.shape}. Reshape your data either using "
                "array.reshape(-1, 1) if it has a single feature or array.reshape(1, -1) if it "
                "contains a single sample"
            )
        if Z.shape[0] == 0:
            raise DataValidationError("X has no rows")
        if Z.shape[1] == 0:
            raise DataValidationError(
                f"0 feature(s) (shape={Z.shape}) while a minimum of 1 is required."
            )
        if not np.all(np.isfinite(Z)):
            raise DataValidationError("X contains NaN or infinite values")
        return Z


def check_labels(
    y: Any, classes: Sequence[Any] | None, n_samples: int
) -> tuple[np.ndarray, np.ndarray]:
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
        ``y`` missing or not 1-D (a column vector is accepted with a ``DataConversionWarning``),
        labels outside ``classes``, missing labels, fewer than two classes, wrong length.
    """
    y_arr = _column_or_1d(y, LabelError)
    if len(y_arr) != n_samples:
        raise LabelError(f"y has {len(y_arr)} labels for {n_samples} rows")
    if pd.isna(y_arr).any():
        raise LabelError("y contains missing labels")
    if y_arr.dtype.kind in "fc" and not np.all(np.isfinite(y_arr)):
        raise LabelError("y contains infinite labels")
    if classes is None:
        try:
            kind = type_of_target(y_arr)
            classes_ = np.unique(y_arr)
        except (TypeError, ValueError) as exc:
            raise LabelError(f"the labels of y cannot be sorted into classes: {exc}") from None
        if kind == "continuous":
            raise LabelError(
                "Unknown label type: continuous. A classifier needs discrete labels; declare "
                "them with classes= or use a regressor"
            )
    else:
        classes_ = np.asarray(list(classes))
    if len(classes_) < 2:
        raise LabelError(
            f"classification needs at least two classes, got {len(classes_)} class(es): "
            f"{classes_.tolist()}"
        )
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
    """Validate a real-valued target; returns float32 of shape (n_samples,).

    Raises
    ------
    DataValidationError
        ``y`` missing, not numeric, not 1-D (a column vector is accepted with a
        ``DataConversionWarning``), of the wrong length, or with NaN or infinite values.
    """
    y_obj = _column_or_1d(y, DataValidationError)
    try:
        y_arr = np.asarray(y_obj, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataValidationError(f"regression targets must be numeric: {exc}") from exc
    if len(y_arr) != n_samples:
        raise DataValidationError(f"y has {len(y_arr)} values for {n_samples} rows")
    if not np.all(np.isfinite(y_arr)):
        raise DataValidationError("y contains NaN or infinite values")
    return y_arr.astype(np.float32)


def _column_or_1d(y: Any, error: type[DataValidationError]) -> np.ndarray:
    """``y`` as a 1-D array; a column vector is raveled with a ``DataConversionWarning``."""
    if y is None:
        raise error("this estimator requires y to be passed, but the target y is None")
    y_arr = np.asarray(y)
    if y_arr.ndim == 2 and y_arr.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please change the shape "
            "of y to (n_samples,), for example using ravel().",
            DataConversionWarning,
            stacklevel=3,
        )
        y_arr = y_arr.ravel()
    if y_arr.ndim != 1:
        raise error(f"y should be a 1d array, got an array of shape {y_arr.shape} instead")
    return y_arr


def check_target_bounds(bounds: Sequence[float] | None) -> tuple[float, float] | None:
    """Validate public target bounds ``(lower, upper)``; ``None`` passes through.

    Raises
    ------
    ValueError
        Not two finite numbers with ``lower < upper``.

    Examples
    --------
    >>> check_target_bounds((0, 30))
    (0.0, 30.0)
    """
    if bounds is None:
        return None
    try:
        lo, hi = (float(v) for v in bounds)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"target_bounds must be (lower, upper), got {bounds!r}") from exc
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"target_bounds must be finite with lower < upper, got {bounds!r}")
    return lo, hi
