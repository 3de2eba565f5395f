"""Which rows train the own model M^s, its cross-fit, and the cache of cross-fits.

pubsub-ml.txt §4 Step 1 trains M^s on ``Tra(D^s)`` and fuses on ``Cus(D^s)``: :func:`holdout_split`
draws that split (the paper's protocol).  The cross-fitted CUSTOMIZE uses every row for both: it
fuses M^s by its out-of-fold outputs (each row's output from the model of the fold that held it
out, as scikit-learn's ``StackingClassifier`` does, over :func:`make_folds`), and ``kind="auto"``
chooses the candidate with the best out-of-fold log-loss (classification) or squared error
(regression).  M^s is never published (§3.2, Theorem 3), so this choice costs no privacy.

An evaluation fold scores Own, PubSub-ML and PubSub-ML* on the same subscriber rows with the same
seed (§7.3, §7.4), and the three share M^s by design: a :class:`CrossFitStore`, passed to each of
them (``cross_fits=``), keeps a cross-fit by a digest of everything its result depends on
(:func:`cross_fit_key`) and gives a copy to the next caller, counting the seconds the first
computation took so that a method's timing can still include them.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split
from threadpoolctl import threadpool_limits

from pubsubml.errors import DataValidationError
from pubsubml.schema import FeatureSchema

__all__ = [
    "PROBA_FLOOR",
    "CrossFitStore",
    "OwnCrossFit",
    "check_cv",
    "check_folds",
    "cross_fit_key",
    "cross_fit_own",
    "fit_quietly",
    "holdout_split",
    "make_folds",
    "out_of_fold_loss",
    "proba_columns",
]

PROBA_FLOOR = 1e-3
"""Probabilities are clipped to [1e-3, 1] before taking logs: below one vote in a hundred-tree
forest, so a unanimous forest or a saturated network cannot give an unbounded log-loss."""


# ---- the rows: Tra/Cus or folds -------------------------------------------------------------
def holdout_split(
    y: np.ndarray, task: str, train_split: float, fusion_split: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row positions of ``Tra`` and ``Cus`` (pubsub-ml.txt §4: Tra(D^s), Cus(D^s)), sorted.

    Stratified by label for classification.

    Raises
    ------
    ValueError
        Fractions outside (0, 1) or summing to more than 1.
    DataValidationError
        The rows cannot be split so (e.g. a class too small to stratify).
    """
    n = len(y)
    index = np.arange(n)
    tr, fu = float(train_split), float(fusion_split)
    if not (0 < tr < 1 and 0 < fu < 1 and tr + fu <= 1 + 1e-9):
        raise ValueError(
            f"train_split and fusion_split must be in (0, 1) with a sum <= 1, got {tr}, {fu}"
        )
    n_fu = max(1, round(fu * n))
    n_tr = min(n - n_fu, max(1, round(tr * n)))
    stratify = y if task == "classification" else None
    try:
        tra, cus = train_test_split(
            index, train_size=n_tr, test_size=n_fu, stratify=stratify, random_state=seed
        )
    except ValueError as exc:
        raise DataValidationError(f"cannot split the data into Tra and Cus: {exc}") from exc
    return np.sort(tra), np.sort(cus)


def check_cv(cv: Any) -> int | None:
    """The number of cross-fitting folds ``cv`` asks for, or None for ``"holdout"``.

    Raises
    ------
    ValueError
        Neither an integer >= 2 nor ``"holdout"``.
    """
    if cv == "holdout":
        return None
    if isinstance(cv, bool) or not isinstance(cv, int | np.integer) or cv < 2:
        raise ValueError(f"cv must be an integer >= 2 or 'holdout', got {cv!r}")
    return int(cv)


def check_folds(target: np.ndarray, folds: int, task: str) -> None:
    """Refuse a cross-fit that some fold could not train or score on.

    Raises
    ------
    DataValidationError
        Fewer rows than folds, or a class with fewer rows than folds (it would be absent from
        some fold).
    """
    if isinstance(folds, bool) or not isinstance(folds, int | np.integer) or folds < 2:
        raise ValueError(f"cv must be an integer >= 2 or 'holdout', got {folds!r}")
    n = len(target)
    if n < folds:
        raise DataValidationError(
            f"{n} rows cannot be cross-fitted with {folds} folds: use fewer folds (cv=) "
            "or cv='holdout'"
        )
    if task == "classification":
        counts = np.bincount(target.astype(np.int64))
        present = counts[counts > 0]
        if present.min() < folds:
            raise DataValidationError(
                f"a class has only {int(present.min())} rows, fewer than the {folds} folds, so "
                "some fold would not see it: use fewer folds (cv=) or collect more rows of it"
            )


def make_folds(
    target: np.ndarray, folds: int, task: str, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``folds`` (train, held-out) index pairs, stratified by class for classification."""
    check_folds(target, folds, task)
    if task == "classification":
        split = StratifiedKFold(folds, shuffle=True, random_state=seed)
        return list(split.split(np.zeros(len(target)), target))
    return list(KFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(target))))


# ---- fitting a candidate and reading its outputs --------------------------------------------
def fit_quietly(est: Any, X: pd.DataFrame, y: np.ndarray) -> Any:
    """Fit ``est``; a network stopped at ``max_iter`` is a result, not a warning to print.

    One BLAS thread: the own model's matrices are small (minibatches of 100 rows), and more
    threads only spin-wait, most of all on a busy machine.
    """
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("ignore", message="Got `batch_size`", category=UserWarning)
        return est.fit(X, y)


def proba_columns(est: Any, X: pd.DataFrame, n_classes: int) -> np.ndarray:
    """``predict_proba`` of a model fitted on class indices, with a column for every class."""
    proba = np.asarray(est.predict_proba(X), dtype=np.float64)
    out = np.zeros((proba.shape[0], n_classes))
    out[:, np.asarray(est.classes_, dtype=np.int64)] = proba
    return out


def _outputs(est: Any, X: pd.DataFrame, task: str, n_classes: int) -> np.ndarray:
    if task == "classification":
        return proba_columns(est, X, n_classes)
    return np.asarray(est.predict(X), dtype=np.float64).reshape(-1, 1)


def out_of_fold_loss(task: str, target: np.ndarray, outputs: np.ndarray) -> float:
    """Mean log-loss (classification, probabilities clipped at :data:`PROBA_FLOOR`) or MSE."""
    if task == "classification":
        p = np.clip(outputs[np.arange(len(target)), target.astype(np.int64)], PROBA_FLOOR, 1.0)
        return float(-np.mean(np.log(p)))
    return float(np.mean((outputs[:, 0] - target) ** 2))


# ---- the cross-fit ----------------------------------------------------------------------------
@dataclass
class OwnCrossFit:
    """What :func:`cross_fit_own` found.

    Attributes
    ----------
    choice : str
        The chosen kind (or ``"estimator"`` for a given estimator).
    scores : dict of str to float
        Out-of-fold log-loss or MSE per candidate (lower is better).
    oof : ndarray of shape (n, n_classes) or (n, 1)
        The chosen candidate's out-of-fold outputs: each row's output comes from the model of the
        fold that held it out.
    estimator : estimator
        The chosen candidate refitted on all rows.
    """

    choice: str
    scores: dict[str, float]
    oof: np.ndarray
    estimator: Any


@dataclass
class CrossFitStore:
    """Cross-fits kept by :func:`cross_fit_key`, for every caller given this store.

    Attributes
    ----------
    results : dict of str to (OwnCrossFit, float)
        Each result and the seconds its computation took.
    hits : int
        Lookups answered from the store.
    reused_seconds : float
        The computation seconds of every answered lookup, summed.

    Examples
    --------
    >>> store = CrossFitStore()
    >>> store.get("0" * 64) is None, store.hits
    (True, 0)
    """

    results: dict[str, tuple[OwnCrossFit, float]] = field(default_factory=dict, repr=False)
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


def cross_fit_own(
    X: pd.DataFrame,
    target: np.ndarray,
    *,
    task: str,
    candidates: dict[str, Any],
    folds: list[tuple[np.ndarray, np.ndarray]],
    n_classes: int = 0,
    store: CrossFitStore | None = None,
    key: str | None = None,
) -> OwnCrossFit:
    """Out-of-fold outputs of each candidate, the best one by out-of-fold loss, refit on all rows.

    Parameters
    ----------
    X : DataFrame
    target : ndarray
        Class indices (classification) or float targets.
    task : {"classification", "regression"}
    candidates : dict of str to estimator
        Unfitted estimators (cloned per fold).
    folds : list of (ndarray, ndarray)
        Train and held-out positions; every row is held out exactly once.
    n_classes : int
        The subscriber's number of classes (classification).
    store : CrossFitStore, optional
        With ``key``: a cross-fit already kept under ``key`` is returned (a copy) instead of
        computed again, and a new one is kept there.
    key : str, optional
        :func:`cross_fit_key` of these arguments (``None``: nothing is looked up or kept).

    Returns
    -------
    OwnCrossFit
    """
    if store is not None and key is not None:
        found = store.get(key)
        if found is not None:
            return found
    t0 = time.perf_counter()
    result = _cross_fit(
        X, target, task=task, candidates=candidates, folds=folds, n_classes=n_classes
    )
    if store is not None and key is not None:
        store.put(key, result, time.perf_counter() - t0)
    return result


def _cross_fit(
    X: pd.DataFrame,
    target: np.ndarray,
    *,
    task: str,
    candidates: dict[str, Any],
    folds: list[tuple[np.ndarray, np.ndarray]],
    n_classes: int,
) -> OwnCrossFit:
    n = len(target)
    width = n_classes if task == "classification" else 1
    best: tuple[float, str, np.ndarray] | None = None
    scores: dict[str, float] = {}
    for name, est in candidates.items():
        oof = np.full((n, width), np.nan)
        for train, held in folds:
            model = fit_quietly(clone(est), X.iloc[train], target[train])
            oof[held] = _outputs(model, X.iloc[held], task, n_classes)
        if np.isnan(oof).any():
            raise ValueError("the folds do not hold out every row exactly once")
        scores[name] = out_of_fold_loss(task, target, oof)
        if best is None or scores[name] < best[0]:
            best = (scores[name], name, oof)
    assert best is not None
    _, choice, oof = best
    refit = fit_quietly(clone(candidates[choice]), X, target)
    return OwnCrossFit(choice=choice, scores=scores, oof=oof, estimator=refit)


# ---- the cache's key ----------------------------------------------------------------------
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

    The candidates are those :func:`~pubsubml.methods.pubsub.own.own_candidates` builds from
    ``spec`` (a kind or ``"auto"``), ``task``, ``schema`` (restricted to the columns of ``X``, all
    the candidates read of it), the columns of ``X``, ``seed``, ``target_bounds`` and ``kinds``;
    the digest also covers the number of classes, every row's values
    (``pandas.util.hash_pandas_object``, row order kept), the targets with their dtype and each
    fold's train and held-out positions.

    Returns
    -------
    str or None
        None for a ``spec`` that is an estimator object (its parameters have no digest) and for
        columns outside ``schema``.
    """
    if not isinstance(spec, str):
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
