"""Offline data sets with their public feature schemas.

Nothing is downloaded: every loader reads data shipped with an installed package or generates it.
Each loader returns a :class:`Dataset` whose :class:`~pubsubml.schema.FeatureSchema` carries public
bounds and defaults written here as domain knowledge, never computed from the data.  The tabular
stand-ins for the papers' data sets live in :mod:`pubsubml.sim.tabular_datasets` and are re-exported
here; :func:`load` finds any loader by name.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import pandas as pd
from river.datasets import synth

from pubsubml.errors import DataValidationError
from pubsubml.schema import FeatureSchema
from pubsubml.sim.tabular_datasets import (
    SKLEARN_NAMES,
    UnknownDatasetError,
    load_diamonds,
    load_flchain,
    load_hi,
    load_shuttle,
    load_sklearn,
)

__all__ = [
    "LOADERS",
    "SKLEARN_NAMES",
    "Dataset",
    "UnknownDatasetError",
    "hyperplane",
    "hyperplane_chunks",
    "hyperplane_schema",
    "load",
    "load_diamonds",
    "load_flchain",
    "load_hi",
    "load_mnist1d",
    "load_shuttle",
    "load_sklearn",
]


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
        """The same data set restricted to ``rows`` (positions)."""
        return Dataset(
            X=self.X.iloc[rows].reset_index(drop=True),
            y=self.y[rows],
            schema=self.schema,
            task=self.task,
            classes=self.classes,
            target_range=self.target_range,
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


MNIST1D_BOUND = 6.0


def load_mnist1d(n: int = 4000, seed: int = 0) -> Dataset:
    """``n`` generated MNIST-1D sequences (40 values each, 10 balanced classes).

    Wraps :func:`pubsubml.sim.proxyfl_experiments.load_mnist1d` (train and test parts joined).  The
    generator standardizes its output (mean 0, standard deviation 1 over the generated set), so the
    public bounds are ±6 standard deviations, default 0.  A small MNIST-like image task that runs on
    a CPU, for the image experiments of proxyfl.txt and pubsub-ml.txt §8.3.1.

    Raises
    ------
    DataValidationError
        If ``n`` is not a positive multiple of 10.

    Examples
    --------
    >>> d = load_mnist1d(20, seed=0)
    >>> d.X.shape, d.classes
    ((20, 40), (0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 10 or n % 10:
        raise DataValidationError(f"n must be a positive multiple of 10, got {n!r}")
    from pubsubml.sim.proxyfl_experiments import load_mnist1d as generate_mnist1d

    n_test = max(n // 5, 1)
    X_tr, y_tr, X_te, y_te = generate_mnist1d(n - n_test, n_test, seed)
    schema = FeatureSchema.numeric(
        [f"x{i}" for i in range(X_tr.shape[1])],
        lower=-MNIST1D_BOUND,
        upper=MNIST1D_BOUND,
        default=0.0,
    )
    X = pd.DataFrame(np.concatenate([X_tr, X_te]).astype(np.float64), columns=schema.names)
    y = np.concatenate([y_tr, y_te]).astype(np.int64)
    return Dataset(X=X, y=y, schema=schema, task="classification", classes=tuple(range(10)))


def _load_hyperplane(n_rows: int = 1000, seed: int = 0, **kwargs: Any) -> Dataset:
    return hyperplane(n_rows, seed=seed, **kwargs)


LOADERS: Mapping[str, Callable[..., Dataset]] = MappingProxyType(
    {
        "diamonds": load_diamonds,
        "flchain": load_flchain,
        "hi": load_hi,
        "hyperplane": _load_hyperplane,
        "mnist1d": load_mnist1d,
        "shuttle": load_shuttle,
        **{name: functools.partial(load_sklearn, name) for name in SKLEARN_NAMES},
    }
)


def load(name: str, **kwargs: Any) -> Dataset:
    """Load a data set by name (see :data:`LOADERS`), passing ``kwargs`` to its loader.

    ``"hyperplane"`` takes :func:`hyperplane`'s arguments (``n_rows`` default 1000, ``seed`` default
    0); ``"mnist1d"`` takes ``n`` and ``seed``; the others take none.

    Raises
    ------
    UnknownDatasetError
        If no loader has that name.

    Examples
    --------
    >>> load("hyperplane", n_rows=3, seed=1).X.shape
    (3, 10)
    """
    try:
        loader = LOADERS[name]
    except (KeyError, TypeError):
        raise UnknownDatasetError(
            f"unknown data set {name!r}; available: {sorted(LOADERS)}"
        ) from None
    return loader(**kwargs)
