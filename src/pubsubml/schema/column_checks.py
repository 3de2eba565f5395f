"""Checks of a frame's columns against public feature metadata: numbers, bounds, categories.

What :meth:`FeatureSchema.validate_frame <pubsubml.schema.features.FeatureSchema.validate_frame>`
runs on each column, by a feature's name, public bounds and categories only (nothing here reads
a site's statistics): a numeric column must be finite and is clipped to its bounds (or refused
outside them), a categorical one must hold declared categories only.  :class:`NumericBlock`
checks every numeric column of a NumPy number dtype in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.errors import DataValidationError

__all__ = [
    "NumericBlock",
    "checked_categorical",
    "checked_numeric",
    "float_columns",
    "outside_bounds",
]


def float_columns(frame: pd.DataFrame, names: list[str]) -> np.ndarray:
    """The float64 values of the columns ``names`` of ``frame``, in that order."""
    if list(frame.columns) == names:  # no selection: it would build a new column index
        return np.asarray(frame.to_numpy(dtype=float))
    where = {c: i for i, c in enumerate(frame.columns)}
    return np.asarray(frame.take([where[n] for n in names], axis=1).to_numpy(dtype=float))


def outside_bounds(name: str, count: int, lower: float, upper: float) -> str:
    """The error message of ``count`` values of ``name`` outside [lower, upper]."""
    return f"feature {name!r}: {count} values outside the public bounds [{lower}, {upper}]"


def checked_numeric(
    name: str, col: pd.Series, lower: float, upper: float, out_of_bounds: str
) -> np.ndarray:
    """A numeric column as finite float64 values clipped to [lower, upper].

    Raises
    ------
    DataValidationError
        Values that are not numbers, NaN or infinite, or (``out_of_bounds="error"``) outside
        the bounds.
    """
    try:
        values = pd.to_numeric(col, errors="raise").to_numpy(dtype=float)
    except (ValueError, TypeError) as exc:
        raise DataValidationError(f"feature {name!r} is not numeric: {exc}") from exc
    if not np.all(np.isfinite(values)):
        raise DataValidationError(f"feature {name!r} contains NaN or infinite values")
    if out_of_bounds == "error":
        bad = (values < lower) | (values > upper)
        if bad.any():
            raise DataValidationError(outside_bounds(name, int(bad.sum()), lower, upper))
    return np.asarray(np.clip(values, lower, upper))


def checked_categorical(name: str, col: pd.Series, categories: Sequence[Any]) -> np.ndarray:
    """A categorical column as an object array of declared categories.

    Raises
    ------
    DataValidationError
        Missing values, or values outside ``categories``.
    """
    values_obj = col.to_numpy(dtype=object)
    if pd.isna(col).any():
        raise DataValidationError(f"feature {name!r} contains missing values")
    allowed = set(categories)
    unknown = {v for v in values_obj.tolist() if v not in allowed}
    if unknown:
        shown = sorted(map(str, unknown))[:5]
        raise DataValidationError(
            f"feature {name!r} has values {shown} outside its categories {list(categories)}"
        )
    return values_obj


class NumericBlock:
    """Numeric columns of a NumPy number dtype, checked in one pass.

    ``pd.to_numeric`` leaves such a column as it is, so converting them together gives the
    values :func:`checked_numeric` gives; the checks are computed for every column at once and
    raised in the given order, as the per-column checks raise them.

    Parameters
    ----------
    names, lowers, uppers : sequences of the same length
        The features' names and public bounds.
    values : ndarray of shape (n_samples, len(names))
    out_of_bounds : {"clip", "error"}
    """

    def __init__(
        self,
        names: Sequence[str],
        lowers: Sequence[float],
        uppers: Sequence[float],
        values: np.ndarray,
        out_of_bounds: str,
    ) -> None:
        self.names, self.lowers, self.uppers = list(names), list(lowers), list(uppers)
        self.index = {n: j for j, n in enumerate(self.names)}
        lower = np.array(self.lowers, dtype=float)
        upper = np.array(self.uppers, dtype=float)
        self.finite = np.isfinite(values).all(axis=0)
        self.outside = (
            ((values < lower) | (values > upper)).sum(axis=0)
            if out_of_bounds == "error"
            else np.zeros(len(self.names), dtype=np.int64)
        )
        self.clipped = np.clip(values, lower, upper)

    def checked(self, name: str) -> np.ndarray:
        """The clipped column of ``name``, after raising its error if it has one."""
        j = self.index[name]
        if not self.finite[j]:
            raise DataValidationError(f"feature {name!r} contains NaN or infinite values")
        if self.outside[j]:
            count = int(self.outside[j])
            raise DataValidationError(outside_bounds(name, count, self.lowers[j], self.uppers[j]))
        return np.asarray(self.clipped[:, j])

    def raise_first_error(self) -> None:
        """Raise the error of the first column (in the given order) that has one."""
        for name in self.names:
            self.checked(name)
