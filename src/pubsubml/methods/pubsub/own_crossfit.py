"""Cross-fitting the own model M^s: folds, out-of-fold outputs, the choice of a candidate.

pubsub-ml.txt §4 Step 1 trains M^s on the subscriber's rows; the cross-fitted CUSTOMIZE fuses
M^s by its out-of-fold outputs (each row's output from the model of the fold that held it out, as
scikit-learn's ``StackingClassifier`` does), and ``kind="auto"`` chooses the candidate with the
best out-of-fold log-loss (classification) or squared error (regression).  M^s is never
published (§3.2, Theorem 3), so this choice costs no privacy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.model_selection import KFold, StratifiedKFold

from pubsubml.errors import DataValidationError
from pubsubml.methods.pubsub.crossfit_reuse import active_store
from pubsubml.methods.pubsub.own_estimators import fit_quietly, proba_columns

__all__ = [
    "PROBA_FLOOR",
    "OwnCrossFit",
    "check_folds",
    "cross_fit_own",
    "make_folds",
    "out_of_fold_loss",
]

PROBA_FLOOR = 1e-3
"""Probabilities are clipped to [1e-3, 1] before taking logs: below one vote in a hundred-tree
forest, so a unanimous forest or a saturated network cannot give an unbounded log-loss."""


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


def cross_fit_own(
    X: pd.DataFrame,
    target: np.ndarray,
    *,
    task: str,
    candidates: dict[str, Any],
    folds: list[tuple[np.ndarray, np.ndarray]],
    n_classes: int = 0,
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
    key : str, optional
        :func:`~pubsubml.methods.pubsub.crossfit_reuse.cross_fit_key` of these arguments: inside
        :func:`~pubsubml.methods.pubsub.crossfit_reuse.reusing_cross_fits`, a cross-fit already
        computed under it is returned (a copy) instead of computed again.

    Returns
    -------
    OwnCrossFit
    """
    store = active_store() if key is not None else None
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
