"""Generated data sets: Hyperplane (river) and MNIST-1D (the ``mnist1d`` package).

Nothing is downloaded: both are generated in memory from a seed.  Their public bounds follow from
how they are generated (Hyperplane draws features uniformly from [0, 1]; MNIST-1D is standardized).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator

import numpy as np
import pandas as pd
from river.datasets import synth

from pubsubml.data.dataset import Dataset
from pubsubml.errors import DataValidationError
from pubsubml.schema import FeatureSchema

__all__ = [
    "MNIST1D_BOUND",
    "hyperplane",
    "hyperplane_chunks",
    "hyperplane_schema",
    "load_mnist1d",
    "make_mnist1d",
]

Array = np.ndarray


@functools.lru_cache(maxsize=4)
def make_mnist1d(n_train: int = 12_000, n_test: int = 2_000, seed: int = 42) -> tuple[Array, ...]:
    """Generate MNIST-1D in memory: ``(X_train, y_train, X_test, y_test)``, float32 (n, 40).

    Uses ``mnist1d.data.make_dataset`` with the package's default transform parameters, so nothing
    is downloaded or pickled.  The package reseeds NumPy's global generator; its state is restored.

    Raises
    ------
    DataValidationError
        If ``n_train + n_test`` is not a multiple of 10 (the generator makes equal classes).
    """
    from mnist1d.data import get_dataset_args, make_dataset

    total = n_train + n_test
    if total % 10 or n_train < 1 or n_test < 1:
        raise DataValidationError(
            f"n_train + n_test must be a positive multiple of 10, got {total}"
        )
    args = get_dataset_args()
    args.num_samples, args.train_split, args.seed = total, n_train / total, seed
    state = np.random.get_state()  # noqa: NPY002 - mnist1d reseeds the legacy global generator
    try:
        data = make_dataset(args)
    finally:
        np.random.set_state(state)  # noqa: NPY002
    return (
        data["x"].astype(np.float32),
        data["y"].astype(np.int64),
        data["x_test"].astype(np.float32),
        data["y_test"].astype(np.int64),
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
    if n_chunks < 0 or chunk_size < 1:  # checked at the call, not at the first chunk
        raise ValueError("need n_chunks >= 0 and chunk_size >= 1")
    return _hyperplane_chunks(
        n_chunks,
        chunk_size,
        seed,
        n_features,
        n_drift_features,
        mag_change,
        noise_percentage,
        sigma,
    )


def _hyperplane_chunks(
    n_chunks: int,
    chunk_size: int,
    seed: int,
    n_features: int,
    n_drift_features: int,
    mag_change: float,
    noise_percentage: float,
    sigma: float,
) -> Iterator[tuple[pd.DataFrame, np.ndarray]]:
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

    Wraps :func:`make_mnist1d` (train and test parts joined).  The
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
    n_test = max(n // 5, 1)
    X_tr, y_tr, X_te, y_te = make_mnist1d(n - n_test, n_test, seed)
    schema = FeatureSchema.numeric(
        [f"x{i}" for i in range(X_tr.shape[1])],
        lower=-MNIST1D_BOUND,
        upper=MNIST1D_BOUND,
        default=0.0,
    )
    X = pd.DataFrame(np.concatenate([X_tr, X_te]).astype(np.float64), columns=schema.names)
    y = np.concatenate([y_tr, y_te]).astype(np.int64)
    return Dataset(X=X, y=y, schema=schema, task="classification", classes=tuple(range(10)))
