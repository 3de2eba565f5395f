"""The consortium's public feature dictionary: features, their bounds, defaults and encoding.

The consortium agrees on feature names, kinds, bounds, categories and default values at the
metadata level before any data moves (pubsub-ml.txt §3.2).  Everything here is *public*: bounds and
defaults are domain knowledge, never statistics of a site's private data, so using them to scale
inputs or to fill missing features (pubsub-ml.txt §4 Step 3) leaks nothing (DESIGN.md, "Privacy is
accounted").

:class:`Feature` is one entry of the dictionary; :class:`FeatureSchema` validates, extends and
encodes DataFrames with public bounds only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from pubsubml.errors import DataValidationError, SchemaMismatchError
from pubsubml.schema.column_checks import (
    NumericBlock,
    checked_categorical,
    checked_numeric,
    float_columns,
)

__all__ = ["Feature", "FeatureSchema"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")

Category = str | int | float


def _check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise ValueError(
            f"invalid feature name {name!r}: use letters, digits, '_', '.', '-' "
            "(starting with a letter or '_', at most 128 characters)"
        )
    return name


class Feature(BaseModel):
    """One feature of the consortium's dictionary.

    Parameters
    ----------
    name : str
        Agreed name, e.g. ``"age"``.
    kind : {"numeric", "categorical"}
    lower, upper : float, optional
        Public bounds of a numeric feature (required for numeric features).
    categories : list, optional
        Public categories of a categorical feature (required for categorical features).
    default : float or str or int
        Public default value used when a site lacks the feature (pubsub-ml.txt §4, Step 3 discussion:
        the dominant value for categorical, the average for continuous, taken from public sources).
    description : str, default=""
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["numeric", "categorical"] = "numeric"
    lower: float | None = None
    upper: float | None = None
    categories: tuple[Category, ...] | None = None
    default: Category
    description: str = ""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        return _check_name(v)

    @model_validator(mode="after")
    def _consistent(self) -> Feature:
        if self.kind == "numeric":
            if self.lower is None or self.upper is None:
                raise ValueError(
                    f"numeric feature {self.name!r} needs public lower and upper bounds"
                )
            if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
                raise ValueError(f"bounds of {self.name!r} must be finite")
            if not self.lower < self.upper:
                raise ValueError(f"feature {self.name!r}: lower must be < upper")
            if self.categories is not None:
                raise ValueError(f"numeric feature {self.name!r} cannot have categories")
            if isinstance(self.default, str) or not self.lower <= float(self.default) <= self.upper:
                raise ValueError(
                    f"default of {self.name!r} must be a number within [{self.lower}, {self.upper}]"
                )
        else:
            if not self.categories:
                raise ValueError(f"categorical feature {self.name!r} needs its public categories")
            if len(set(self.categories)) != len(self.categories):
                raise ValueError(f"categories of {self.name!r} are not unique")
            if self.lower is not None or self.upper is not None:
                raise ValueError(f"categorical feature {self.name!r} cannot have bounds")
            if self.default not in self.categories:
                raise ValueError(f"default of {self.name!r} must be one of its categories")
        return self

    @property
    def width(self) -> int:
        """Number of encoded columns (1 for numeric, one per category for categorical)."""
        return 1 if self.kind == "numeric" else len(self.categories or ())


class FeatureSchema(BaseModel):
    """An ordered set of :class:`Feature` with validation and public-bound encoding.

    Examples
    --------
    >>> s = FeatureSchema(features=[Feature(name="age", lower=0, upper=100, default=50),
    ...                             Feature(name="sex", kind="categorical",
    ...                                     categories=("f", "m"), default="f")])
    >>> s.encode(pd.DataFrame({"sex": ["m"], "age": [25.0]})).tolist()
    [[0.25, 0.0, 1.0]]
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    features: tuple[Feature, ...]

    @model_validator(mode="after")
    def _unique(self) -> FeatureSchema:
        names = [f.name for f in self.features]
        if len(names) != len(set(names)):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"duplicate feature names: {dup}")
        if not names:
            raise ValueError("a FeatureSchema needs at least one feature")
        return self

    # ---- container protocol -------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """Feature names in schema order."""
        return [f.name for f in self.features]

    def __len__(self) -> int:
        return len(self.features)

    def __iter__(self) -> Iterator[Feature]:  # type: ignore[override]
        return iter(self.features)

    def __contains__(self, name: object) -> bool:
        return any(f.name == name for f in self.features)

    def __getitem__(self, name: str) -> Feature:
        for f in self.features:
            if f.name == name:
                return f
        raise SchemaMismatchError(f"feature {name!r} is not in the schema {self.names}")

    def subset(self, names: Iterable[str]) -> FeatureSchema:
        """The schema restricted to ``names``, in the order given."""
        return FeatureSchema(features=tuple(self[n] for n in names))

    @property
    def n_encoded(self) -> int:
        """Width of :meth:`encode`'s output."""
        return sum(f.width for f in self.features)

    @property
    def encoded_names(self) -> list[str]:
        """Column names of :meth:`encode`'s output (``name=category`` for one-hot columns)."""
        out: list[str] = []
        for f in self.features:
            if f.kind == "numeric":
                out.append(f.name)
            else:
                out.extend(f"{f.name}={c}" for c in f.categories or ())
        return out

    @property
    def defaults(self) -> dict[str, Category]:
        """Public default value of every feature."""
        return {f.name: f.default for f in self.features}

    # ---- validation ---------------------------------------------------------------------
    def validate_frame(
        self,
        X: Any,
        *,
        missing: Literal["error", "default"] = "error",
        extra: Literal["error", "ignore"] = "error",
        out_of_bounds: Literal["clip", "error"] = "clip",
    ) -> pd.DataFrame:
        """Check ``X`` against the schema and return it with the schema's columns, in order.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            A DataFrame is matched by column name (order never matters).  An array must have the
            schema's features as columns, in schema order.
        missing : {"error", "default"}
            Features of the schema absent from ``X``: raise, or fill with the public default
            (feature extension, pubsub-ml.txt §4 Step 3).
        extra : {"error", "ignore"}
            Columns of ``X`` not in the schema: raise, or drop them.
        out_of_bounds : {"clip", "error"}
            Numeric values outside the public bounds: clip to the bounds, or raise.

        Returns
        -------
        DataFrame of shape (n_samples, len(self))

        Raises
        ------
        SchemaMismatchError
            Missing or extra columns (per the options) or a wrong number of array columns.
        DataValidationError
            NaN or infinite values, unknown categories, out-of-bounds values with ``"error"``.
        """
        frame, cols = self._input_frame(X)
        names = self.names
        present = set(cols)
        absent = [n for n in names if n not in present]
        known = set(names)
        surplus = [c for c in cols if c not in known]
        if absent and missing == "error":
            raise SchemaMismatchError(f"input lacks features {absent} required by the schema")
        if surplus and extra == "error":
            raise SchemaMismatchError(f"input has columns {surplus} that are not in the schema")
        block = self._numeric_block(frame, present, out_of_bounds)
        if block is not None and len(block.index) == len(self.features):
            block.raise_first_error()
            same = cols == names  # then the input's column index serves as it is
            return pd.DataFrame(
                block.clipped, index=frame.index, columns=frame.columns if same else names
            )
        n = len(frame)
        out: dict[str, Any] = {}
        for f in self.features:
            if f.name not in present:
                out[f.name] = np.full(n, f.default, dtype=object if f.kind != "numeric" else float)
            elif block is not None and f.name in block.index:
                out[f.name] = block.checked(f.name)
            elif f.kind == "numeric":
                assert f.lower is not None and f.upper is not None
                out[f.name] = checked_numeric(
                    f.name, frame[f.name], f.lower, f.upper, out_of_bounds
                )
            else:
                out[f.name] = checked_categorical(f.name, frame[f.name], list(f.categories or ()))
        return pd.DataFrame(out, index=frame.index, columns=names)

    def _input_frame(self, X: Any) -> tuple[pd.DataFrame, list[str]]:
        """``X`` as a DataFrame with string column names, and those names."""
        if isinstance(X, pd.DataFrame):
            frame = X
            cols = [str(c) for c in frame.columns]
            if len(set(cols)) != len(cols):
                raise SchemaMismatchError("input has duplicate column names")
            if any(type(c) is not str for c in frame.columns):
                frame = frame.set_axis(cols, axis=1)
            return frame, cols
        arr = np.asarray(X, dtype=object)
        if arr.ndim != 2:
            raise DataValidationError(f"expected a 2-D input, got shape {arr.shape}")
        if arr.shape[1] != len(self):
            raise SchemaMismatchError(
                f"array input has {arr.shape[1]} columns, the schema has {len(self)}: {self.names}"
            )
        return pd.DataFrame(arr, columns=self.names), self.names

    def _numeric_block(
        self, frame: pd.DataFrame, present: set[str], out_of_bounds: str
    ) -> NumericBlock | None:
        """The present numeric features whose columns have a NumPy number dtype, checked."""
        dtypes = frame.dtypes
        chosen = [
            f
            for f in self.features
            if f.kind == "numeric"
            and f.name in present
            and isinstance(dtypes[f.name], np.dtype)
            and dtypes[f.name].kind in "iuf"
        ]
        if not chosen:
            return None
        names = [f.name for f in chosen]
        lowers = [f.lower for f in chosen]
        uppers = [f.upper for f in chosen]
        values = float_columns(frame, names)
        return NumericBlock(names, lowers, uppers, values, out_of_bounds)  # type: ignore[arg-type]

    def extend(self, X: Any) -> pd.DataFrame:
        """Feature extension (pubsub-ml.txt §4 Step 3): fill absent features with public
        defaults, drop extra columns, order as the schema, clip to public bounds."""
        return self.validate_frame(X, missing="default", extra="ignore", out_of_bounds="clip")

    def encode(
        self,
        X: Any,
        *,
        missing: Literal["error", "default"] = "error",
        extra: Literal["error", "ignore"] = "error",
        out_of_bounds: Literal["clip", "error"] = "clip",
    ) -> np.ndarray:
        """Validate ``X`` and encode it with public bounds only.

        Numeric features map to ``(x - lower) / (upper - lower)`` in [0, 1]; categorical features to
        one-hot columns over the declared categories.

        Returns
        -------
        ndarray of shape (n_samples, n_encoded), float32
        """
        frame = self.validate_frame(X, missing=missing, extra=extra, out_of_bounds=out_of_bounds)
        return self._encode_valid(frame)

    def _encode_valid(self, frame: pd.DataFrame) -> np.ndarray:
        n = len(frame)
        out = np.zeros((n, self.n_encoded), dtype=np.float32)
        numeric: list[Feature] = []
        positions: list[int] = []
        j = 0
        for f in self.features:
            if f.kind == "numeric":
                numeric.append(f)
                positions.append(j)
                j += 1
            else:
                cats = list(f.categories or ())
                index = {c: i for i, c in enumerate(cats)}
                codes = np.fromiter((index[v] for v in frame[f.name].tolist()), int, count=n)
                out[np.arange(n), j + codes] = 1.0
                j += len(cats)
        if numeric:  # every numeric column at once: (x - lower) / (upper - lower) in float64
            values = float_columns(frame, [f.name for f in numeric])
            lower = np.array([f.lower for f in numeric], dtype=float)
            upper = np.array([f.upper for f in numeric], dtype=float)
            out[:, positions] = (values - lower) / (upper - lower)
        return out

    # ---- serialization ------------------------------------------------------------------
    def to_json(self) -> str:
        """JSON text of the schema."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> FeatureSchema:
        """Parse :meth:`to_json` output (raises ``pydantic.ValidationError`` on bad input)."""
        return cls.model_validate_json(text)

    @classmethod
    def numeric(
        cls,
        names: Sequence[str],
        *,
        lower: float = 0.0,
        upper: float = 1.0,
        default: float | None = None,
    ) -> FeatureSchema:
        """A schema of numeric features sharing the same public bounds and default.

        Examples
        --------
        >>> FeatureSchema.numeric(["x0", "x1"]).names
        ['x0', 'x1']
        """
        d = (lower + upper) / 2 if default is None else default
        return cls(
            features=tuple(Feature(name=n, lower=lower, upper=upper, default=d) for n in names)
        )
