"""Every offline data set by name: :data:`LOADERS` and :func:`load`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pubsubml.data.dataset import Dataset, UnknownDatasetError
from pubsubml.data.heart_disease import load_heart_disease
from pubsubml.data.synthetic import hyperplane, load_mnist1d
from pubsubml.data.tabular import (
    SKLEARN_NAMES,
    load_diamonds,
    load_flchain,
    load_hi,
    load_shuttle,
    load_sklearn,
)

__all__ = ["LOADERS", "load"]


def _load_hyperplane(n_rows: int = 1000, seed: int = 0, **kwargs: Any) -> Dataset:
    return hyperplane(n_rows, seed=seed, **kwargs)


LOADERS: Mapping[str, Callable[..., Dataset]] = MappingProxyType(
    {
        "diamonds": load_diamonds,
        "flchain": load_flchain,
        "heart-disease": load_heart_disease,
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
    0); ``"mnist1d"`` takes ``n`` and ``seed``; ``"heart-disease"`` takes ``hospital`` (default
    ``None``, the four hospitals pooled); the others take none.

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
