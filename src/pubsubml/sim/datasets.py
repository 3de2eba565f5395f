"""Offline data sets with their public feature schemas.

Nothing is downloaded: every loader reads data shipped with an installed package or generates it.
Each loader returns a :class:`Dataset` whose :class:`~pubsubml.schema.FeatureSchema` carries public
bounds and defaults written here as domain knowledge, never computed from the data.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from river.datasets import synth

from pubsubml.schema import FeatureSchema

__all__ = ["Dataset", "hyperplane", "hyperplane_chunks", "hyperplane_schema"]


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


def hyperplane_schema(n_features: int = 10) -> FeatureSchema:
    """Public schema of Hyperplane data: features ``x0 … x{d-1}`` in [0, 1], default 0.5.

    river's Hyperplane draws every feature uniformly from [0, 1]: public bounds by construction.
    """
    return FeatureSchema.numeric([f"x{i}" for i in range(n_features)], lower=0.0, upper=1.0)


def hyperplane_chunks(
    n_chunks: int,
    chunk_size: int,
    *,
    seed: int,
    n_features: int = 10,
    n_drift_features: int = 2,
    mag_change: float = 0.001,
    noise_percentage: float = 0.05,
    sigma: float = 0.1,
) -> Iterator[tuple[pd.DataFrame, np.ndarray]]:
    """Consecutive disjoint chunks of one river ``synth.Hyperplane`` stream.

    With ``mag_change > 0`` the hyperplane rotates a little after every example (concept drift,
    pubsub-ml.txt §7.1 Table 3: p1 = ``n_features``, p2 = ``n_drift_features``, p3 =
    ``noise_percentage``, p4 = ``mag_change``, p5 = ``sigma``; §8.3.3).  The generator's weights
    come from ``seed``: streams with the same seed share the initial concept.

    Yields
    ------
    X : DataFrame of shape (chunk_size, n_features)
        Columns ``x0 …``, values in [0, 1] (see :func:`hyperplane_schema`).
    y : ndarray of shape (chunk_size,), int64 labels in {0, 1}

    Examples
    --------
    >>> X, y = next(hyperplane_chunks(1, 5, seed=42, n_features=3))
    >>> list(X.columns), y.shape
    (['x0', 'x1', 'x2'], (5,))
    """
    if n_chunks < 0 or chunk_size < 1:
        raise ValueError("need n_chunks >= 0 and chunk_size >= 1")
    stream = iter(
        synth.Hyperplane(
            seed=seed,
            n_features=n_features,
            n_drift_features=n_drift_features,
            mag_change=mag_change,
            noise_percentage=noise_percentage,
            sigma=sigma,
        )
    )
    columns = [f"x{i}" for i in range(n_features)]
    for _ in range(n_chunks):
        rows = list(itertools.islice(stream, chunk_size))
        X = np.array([[x[i] for i in range(n_features)] for x, _ in rows], dtype=np.float64)
        y = np.array([label for _, label in rows], dtype=np.int64)
        yield pd.DataFrame(X, columns=columns), y


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

    Examples
    --------
    >>> d = hyperplane(5, seed=1)
    >>> d.X.shape, d.classes
    ((5, 10), (0, 1))
    """
    X, y = next(
        hyperplane_chunks(
            1,
            n_rows,
            seed=seed,
            n_features=n_features,
            n_drift_features=n_drift_features,
            mag_change=mag_change,
            noise_percentage=noise_percentage,
            sigma=sigma,
        )
    )
    return Dataset(
        X=X, y=y, schema=hyperplane_schema(n_features), task="classification", classes=(0, 1)
    )
