"""Reusing the own model's cross-fit within one evaluation (pubsub-ml.txt §7.3, §7.4).

An evaluation fold scores Own, PubSub-ML and PubSub-ML* on the same subscriber rows with the same
seed, and the three share M^s by design (:mod:`~pubsubml.methods.pubsub.own`): each of them
cross-fitting it again repeats the same computation, which is most of a fold's time when the
publishers are small networks.  Inside :func:`reusing_cross_fits`,
:func:`~pubsubml.methods.pubsub.own_crossfit.cross_fit_own` looks its result up by a digest of
everything the result depends on (the rows, the targets, the folds and the candidates'
specification, seed included) and returns a copy; the :class:`CrossFitStore` counts the seconds
the first computation took, so that a method's timing can still include them.  Outside such a
block nothing is kept, and a candidate given as an estimator object is never looked up (its
parameters have no digest).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pubsubml.schema import FeatureSchema

if TYPE_CHECKING:
    from pubsubml.methods.pubsub.own_crossfit import OwnCrossFit

__all__ = [
    "CrossFitStore",
    "active_store",
    "cross_fit_key",
    "reusing_cross_fits",
]


@dataclass
class CrossFitStore:
    """Cross-fits kept by digest for the duration of :func:`reusing_cross_fits`.

    Attributes
    ----------
    results : dict of str to (OwnCrossFit, float)
        Each result and the seconds its computation took.
    hits : int
        Lookups answered from the store.
    reused_seconds : float
        The computation seconds of every answered lookup, summed.
    """

    results: dict[str, tuple[OwnCrossFit, float]] = field(default_factory=dict)
    hits: int = 0
    reused_seconds: float = 0.0

    def get(self, key: str) -> OwnCrossFit | None:
        """A copy of the result stored under ``key`` (counted), or None."""
        found = self.results.get(key)
        if found is None:
            return None
        result, seconds = found
        self.hits += 1
        self.reused_seconds += seconds
        return copy.deepcopy(result)

    def put(self, key: str, result: OwnCrossFit, seconds: float) -> None:
        """Keep a copy of ``result`` and the seconds it took."""
        self.results[key] = (copy.deepcopy(result), seconds)


_STORE: ContextVar[CrossFitStore | None] = ContextVar("pubsubml_own_cross_fits", default=None)


def active_store() -> CrossFitStore | None:
    """The store of the innermost :func:`reusing_cross_fits` block, or None outside one."""
    return _STORE.get()


@contextlib.contextmanager
def reusing_cross_fits(store: CrossFitStore | None = None) -> Iterator[CrossFitStore]:
    """Within the block, a cross-fit asked for again returns a copy of the first one.

    Parameters
    ----------
    store : CrossFitStore, optional
        Shared between blocks (several evaluations of the same subscriber); a new one by default.

    Yields
    ------
    CrossFitStore

    Examples
    --------
    >>> with reusing_cross_fits() as store:
    ...     active_store() is store
    True
    >>> active_store() is None
    True
    """
    store = CrossFitStore() if store is None else store
    token = _STORE.set(store)
    try:
        yield store
    finally:
        _STORE.reset(token)


def _candidates_text(
    spec: str,
    *,
    task: str,
    schema: FeatureSchema | None,
    features: Sequence[str],
    seed: int,
    target_bounds: Sequence[float] | None,
    kinds: Sequence[str],
) -> str:
    return json.dumps(
        {
            "spec": spec,
            "kinds": list(kinds),
            "task": task,
            # The candidates encode with the schema of their own features only.
            "schema": None if schema is None else json.loads(schema.subset(features).to_json()),
            "features": [str(f) for f in features],
            "seed": int(seed),
            "target_bounds": None if target_bounds is None else [float(b) for b in target_bounds],
        },
        sort_keys=True,
    )


def cross_fit_key(
    X: pd.DataFrame,
    target: np.ndarray,
    folds: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    task: str,
    n_classes: int,
    spec: Any,
    schema: FeatureSchema | None,
    seed: int,
    target_bounds: Sequence[float] | None,
    kinds: Sequence[str],
) -> str | None:
    """SHA-256 over everything a cross-fit's result depends on; None where nothing is reused.

    The candidates are those :func:`~pubsubml.methods.pubsub.own_estimators.own_candidates`
    builds from ``spec`` (a kind or ``"auto"``), ``task``, ``schema`` (restricted to the columns
    of ``X``, all the candidates read of it), the columns of ``X``, ``seed``, ``target_bounds``
    and ``kinds``; the digest also covers the number of classes, every
    row's values (``pandas.util.hash_pandas_object``, row order kept), the targets with their
    dtype and each fold's train and held-out positions.

    Returns
    -------
    str or None
        None outside :func:`reusing_cross_fits` (nothing is hashed then) and for a ``spec`` that
        is an estimator object.
    """
    if _STORE.get() is None or not isinstance(spec, str):
        return None
    if schema is not None and any(str(c) not in schema for c in X.columns):
        return None  # the candidates cannot be built: the fit raises its own error
    h = hashlib.sha256()
    candidates = _candidates_text(
        spec,
        task=task,
        schema=schema,
        features=list(X.columns),
        seed=seed,
        target_bounds=target_bounds,
        kinds=kinds,
    )
    for text in (candidates, str(int(n_classes)), json.dumps([str(c) for c in X.columns])):
        h.update(text.encode())
        h.update(b"\0")
    h.update(pd.util.hash_pandas_object(X, index=False).to_numpy().tobytes())
    t = np.ascontiguousarray(target)
    h.update(str(t.dtype).encode() + b"\0" + t.tobytes())
    for train, held in folds:
        h.update(b"\0" + np.asarray(train, dtype=np.int64).tobytes())
        h.update(b"|" + np.asarray(held, dtype=np.int64).tobytes())
    return h.hexdigest()
