"""Offline data sets with their public feature schemas.

Nothing is downloaded: every loader reads data shipped with an installed package or generates it.
Each loader returns a :class:`Dataset` whose :class:`~pubsubml.schema.FeatureSchema` carries public
bounds and defaults written here as domain knowledge, never computed from the data.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from river.datasets import synth

from pubsubml.schema import FeatureSchema

__all__ = ["Dataset", "hyperplane", "hyperplane_chunks"]


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
    """

    X: pd.DataFrame
    y: np.ndarray
    schema: FeatureSchema
    task: Literal["classification", "regression"]
    classes: tuple[int, ...] | None = None

    def __len__(self) -> int:
        return len(self.X)

    def take(self, rows: np.ndarray | slice) -> Dataset:
        """The same data set restricted to ``rows`` (positions)."""
        return Dataset(
            X=self.X.iloc[rows].reset_index(drop=True),
            y=self.y[rows],
            schema=self.schema,
            task=self.task,
            classes=self.classes,
        )


def _hyperplane_schema(n_features: int) -> FeatureSchema:
    # river's Hyperplane draws every feature uniformly from [0, 1]: public bounds by construction.
    return FeatureSchema.numeric([f"x{i}" for i in range(n_features)], lower=0.0, upper=1.0)


def hyperplane_chunks(
    chunk_size: int,
    *,
    seed: int,
    n_features: int = 10,
    n_drift_features: int = 2,
    mag_change: float = 0.0,
    noise_percentage: float = 0.05,
    sigma: float = 0.1,
) -> Iterator[Dataset]:
    """An endless stream of consecutive chunks from river's rotating-hyperplane generator.

    With ``mag_change > 0`` the hyperplane drifts between rows (concept drift, pubsub-ml.txt §6,
    §7.1 Table 3: p1 = ``n_features``, p2 = ``n_drift_features``, p3 = ``noise_percentage``,
    p4 = ``mag_change``, p5 = ``sigma``).

    Examples
    --------
    >>> first = next(hyperplane_chunks(5, seed=1))
    >>> first.X.shape, first.classes
    ((5, 10), (0, 1))
    """
    gen = synth.Hyperplane(
        seed=seed,
        n_features=n_features,
        n_drift_features=n_drift_features,
        mag_change=mag_change,
        noise_percentage=noise_percentage,
        sigma=sigma,
    )
    schema = _hyperplane_schema(n_features)
    it = iter(gen)
    while True:
        rows = np.empty((chunk_size, n_features))
        labels = np.empty(chunk_size, dtype=np.int64)
        for i in range(chunk_size):
            x, label = next(it)
            rows[i] = [x[j] for j in range(n_features)]
            labels[i] = int(label)
        yield Dataset(
            X=pd.DataFrame(rows, columns=schema.names),
            y=labels,
            schema=schema,
            task="classification",
            classes=(0, 1),
        )


def hyperplane(
    n_rows: int,
    *,
    seed: int,
    n_features: int = 10,
    n_drift_features: int = 2,
    mag_change: float = 0.0,
    noise_percentage: float = 0.05,
    sigma: float = 0.1,
) -> Dataset:
    """``n_rows`` rows of river's ``synth.Hyperplane`` (pubsub-ml.txt §7.1, "Hyperplane").

    Different seeds give different hyperplanes, i.e. sites with different concepts.
    """
    return next(
        hyperplane_chunks(
            n_rows,
            seed=seed,
            n_features=n_features,
            n_drift_features=n_drift_features,
            mag_change=mag_change,
            noise_percentage=noise_percentage,
            sigma=sigma,
        )
    )
