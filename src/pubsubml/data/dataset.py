"""A data set with its public feature schema: what every loader returns.

Each loader (:mod:`pubsubml.data.tabular`, :mod:`pubsubml.data.synthetic`) returns a
:class:`Dataset` whose :class:`~pubsubml.schema.FeatureSchema` carries public bounds and defaults
written as domain knowledge, never computed from the data; :func:`pubsubml.data.load` finds any
loader by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from pubsubml.errors import DataValidationError
from pubsubml.schema import FeatureSchema

__all__ = ["Dataset", "UnknownDatasetError"]


class UnknownDatasetError(DataValidationError):
    """No loader is registered under the requested data set name."""


@dataclass(frozen=True)
class Dataset:
    """A table with its target and public schema.

    Attributes
    ----------
    X : DataFrame of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    schema : FeatureSchema
        Public metadata of the columns of ``X``.
    task : {"classification", "regression"}
    classes : tuple or None
        The public label set for classification.
    target_range : tuple of float or None
        Public bounds of a regression target (e.g. to report 1 - MSE on ``(y - lo) / (hi - lo)``).
    """

    X: pd.DataFrame
    y: np.ndarray
    schema: FeatureSchema
    task: Literal["classification", "regression"]
    classes: tuple[int, ...] | None = None
    target_range: tuple[float, float] | None = None

    def __len__(self) -> int:
        return len(self.X)

    def take(self, rows: np.ndarray | slice) -> Dataset:
        """The same data set restricted to ``rows`` (positions); a copy, never a view."""
        return Dataset(
            X=self.X.iloc[rows].reset_index(drop=True),
            y=np.array(self.y[rows], copy=True),
            schema=self.schema,
            task=self.task,
            classes=self.classes,
            target_range=self.target_range,
        )
