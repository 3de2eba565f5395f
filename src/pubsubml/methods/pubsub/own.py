"""The subscriber's own model M^s: one definition for CUSTOMIZE and for the Own baseline.

pubsub-ml.txt §4 Step 1 trains M^s on the subscriber's private data; §7.3 compares PubSub-ML with
"Own", the subscriber's model alone.  Both are the same learner here, so that a gain of PubSub-ML
over Own measures what subscribing adds and nothing else.  M^s is never published (§3.2, Theorem
3), so choosing it by cross-validation on the subscriber's rows costs no privacy.

The candidates (:data:`OWN_KINDS`) all encode inputs with the public schema bounds:

- ``"mlp"``: a (100, 50) tanh network with Adam, trained to convergence (scikit-learn's loss
  tolerance) rather than for a fixed 30 epochs: with 200 rows and minibatches of 100, 30 epochs
  are 60 optimizer steps, which leaves the network at the majority rate;
- ``"forest"``: a random forest with scikit-learn's defaults (pfl-stacking.txt §4);
- ``"logistic"``: an L2 logistic regression (classification) or a ridge regression with its
  penalty chosen by leave-one-out (regression).

:class:`OwnLearner` with ``kind="auto"`` picks the candidate with the best out-of-fold log-loss
(classification) or squared error (regression) over ``cv`` stratified folds and refits it on all
rows.  :func:`cross_fit_own` returns the out-of-fold outputs as well, which is what the
cross-fitted CUSTOMIZE fuses.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from pubsubml.errors import DataValidationError, SchemaMismatchError
from pubsubml.methods.pubsub.outputs import TaskEstimatorMixin, encode_targets, public_encoder
from pubsubml.schema import FeatureSchema

__all__ = [
    "OWN_KINDS",
    "OwnCrossFit",
    "OwnLearner",
    "check_folds",
    "cross_fit_own",
    "make_folds",
    "own_estimator",
    "proba_columns",
]

OWN_KINDS: tuple[str, ...] = ("mlp", "forest", "logistic")
"""The own-model candidates, in the order ties are broken."""

PROBA_FLOOR = 1e-3
"""Probabilities are clipped to [1e-3, 1] before taking logs: below one vote in a hundred-tree
forest, so a unanimous forest or a saturated network cannot give an unbounded log-loss."""


def _scale_target(y: np.ndarray, lower: float, upper: float) -> np.ndarray:
    return (np.asarray(y, dtype=np.float64) - lower) / (upper - lower)


def _unscale_target(t: np.ndarray, lower: float, upper: float) -> np.ndarray:
    return np.asarray(t, dtype=np.float64) * (upper - lower) + lower


def check_target_bounds(bounds: Sequence[float] | None) -> tuple[float, float] | None:
    """Validate public target bounds ``(lower, upper)`` (``None`` passes through).

    Raises
    ------
    ValueError
        Not two finite numbers with ``lower < upper``.
    """
    if bounds is None:
        return None
    try:
        lo, hi = (float(v) for v in bounds)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"target_bounds must be (lower, upper), got {bounds!r}") from exc
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"target_bounds must be finite with lower < upper, got {bounds!r}")
    return lo, hi


def _target_scaled(est: Any, bounds: tuple[float, float] | None) -> Any:
    """Fit ``est`` on targets scaled by the public bounds (standardised when there are none)."""
    if bounds is None:
        return TransformedTargetRegressor(regressor=est, transformer=StandardScaler())
    lo, hi = bounds
    scaler = FunctionTransformer(
        func=functools.partial(_scale_target, lower=lo, upper=hi),
        inverse_func=functools.partial(_unscale_target, lower=lo, upper=hi),
        check_inverse=False,
    )
    return TransformedTargetRegressor(regressor=est, transformer=scaler)


def own_estimator(
    kind: str,
    task: str,
    schema: FeatureSchema | None,
    features: list[str],
    seed: int,
    *,
    target_bounds: Sequence[float] | None = None,
) -> Any:
    """An unfitted own-model candidate that takes the subscriber's DataFrame.

    Parameters
    ----------
    kind : {"mlp", "forest", "logistic"}
    task : {"classification", "regression"}
    schema : FeatureSchema or None
        Public bounds to scale the inputs (plain floats without one).
    features : list of str
        The subscriber's columns.
    seed : int
    target_bounds : (float, float), optional
        Public bounds of a regression target: the network and the linear model fit the target
        scaled to [0, 1] by them.

    Returns
    -------
    Pipeline
        ``encode`` (public scaling) then the model.
    """
    if kind not in OWN_KINDS:
        raise ValueError(f"unknown own model kind {kind!r}; choose one of {list(OWN_KINDS)}")
    clf = task == "classification"
    bounds = check_target_bounds(target_bounds)
    est: Any
    if kind == "mlp":
        kw: dict[str, Any] = dict(
            hidden_layer_sizes=(100, 50),
            activation="tanh",
            solver="adam",
            batch_size=100,
            max_iter=200,
            random_state=seed,
        )
        est = MLPClassifier(**kw) if clf else _target_scaled(MLPRegressor(**kw), bounds)
    elif kind == "forest":
        cls = RandomForestClassifier if clf else RandomForestRegressor
        est = cls(random_state=seed)
    else:
        est = (
            LogisticRegression(C=1.0, max_iter=1000)
            if clf
            else _target_scaled(RidgeCV(alphas=np.logspace(-4, 2, 13)), bounds)
        )
    encode = FunctionTransformer(public_encoder(schema, features), validate=False)
    return Pipeline([("encode", encode), ("model", est)])


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

    Returns
    -------
    OwnCrossFit
    """
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


def own_candidates(
    spec: Any,
    *,
    task: str,
    schema: FeatureSchema | None,
    features: list[str],
    seed: int,
    target_bounds: Sequence[float] | None = None,
    kinds: Sequence[str] = OWN_KINDS,
) -> dict[str, Any]:
    """The own-model candidates for ``spec``: ``"auto"`` (all of ``kinds``), one kind, or an
    estimator (cloned; its ``random_state`` set to ``seed`` when unset)."""
    if isinstance(spec, str):
        names = list(kinds) if spec == "auto" else [spec]
        if not names or any(k not in OWN_KINDS for k in names):
            raise ValueError(
                f"unknown own model {spec!r} / candidates {list(kinds)}; choose 'auto' or "
                f"kinds from {list(OWN_KINDS)}"
            )
        return {
            k: own_estimator(k, task, schema, features, seed, target_bounds=target_bounds)
            for k in names
        }
    est = clone(spec)
    if "random_state" in est.get_params() and est.get_params()["random_state"] is None:
        est.set_params(random_state=seed)
    return {"estimator": est}


class OwnLearner(TaskEstimatorMixin, BaseEstimator):
    """The subscriber's own model (pubsub-ml.txt §4 Step 1; the Own baseline of §7.3).

    Parameters
    ----------
    task : {"classification", "regression"}, default="classification"
    kind : {"auto", "mlp", "forest", "logistic"} or estimator, default="auto"
        ``"auto"`` chooses among ``candidates`` by out-of-fold loss over ``cv`` folds; an
        estimator (taking the DataFrame) is cloned and fitted as it is.
    candidates : sequence of str, default=("mlp", "forest", "logistic")
    cv : int, default=5
        Folds of the choice (stratified for classification); unused for a fixed ``kind``.
    schema : FeatureSchema, optional
        Public bounds that scale the inputs.
    classes : sequence, optional
        The public label set (default: the labels in ``y``).
    target_bounds : (float, float), optional
        Public bounds of a regression target.
    random_state : int, RandomState or None

    Attributes
    ----------
    choice_ : str
    cv_scores_ : dict of str to float
        Out-of-fold log-loss or MSE per candidate (empty for a fixed ``kind``).
    estimator_ : Pipeline
        The chosen model refitted on all rows.
    classes_ : ndarray (classification)

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    >>> X = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    >>> own = OwnLearner(kind="auto", random_state=0).fit(X, y)
    >>> own.choice_ in OWN_KINDS, sorted(own.cv_scores_) == sorted(OWN_KINDS)
    (True, True)
    """

    def __init__(
        self,
        *,
        task: str = "classification",
        kind: Any = "auto",
        candidates: Sequence[str] = OWN_KINDS,
        cv: int = 5,
        schema: FeatureSchema | None = None,
        classes: Sequence[Any] | None = None,
        target_bounds: Sequence[float] | None = None,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.task = task
        self.kind = kind
        self.candidates = candidates
        self.cv = cv
        self.schema = schema
        self.classes = classes
        self.target_bounds = target_bounds
        self.random_state = random_state

    def _frame(self, X: Any) -> pd.DataFrame:
        if not isinstance(X, pd.DataFrame):
            raise SchemaMismatchError(
                f"OwnLearner needs a DataFrame (features are matched by name), got "
                f"{type(X).__name__}"
            )
        return X.set_axis([str(c) for c in X.columns], axis=1)

    def fit(self, X: pd.DataFrame, y: Any) -> OwnLearner:
        """Choose (``kind="auto"``) and fit the own model; nothing changes if a check fails.

        Raises
        ------
        DataValidationError
            ``kind="auto"`` with fewer rows, or fewer rows of a class, than ``cv``.
        """
        if self.task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {self.task!r}")
        frame = self._frame(X)
        y_arr = np.asarray(y).reshape(-1)
        if len(y_arr) != len(frame) or len(frame) == 0:
            raise DataValidationError(f"y has {len(y_arr)} values for {len(frame)} rows")
        classes, target = encode_targets(y_arr, self.task, self.classes)
        seed = int(check_random_state(self.random_state).randint(0, 2**31 - 1))
        cands = own_candidates(
            self.kind,
            task=self.task,
            schema=self.schema,
            features=list(frame.columns),
            seed=seed,
            target_bounds=self.target_bounds,
            kinds=tuple(self.candidates),
        )
        if len(cands) == 1:
            (choice, est), scores = next(iter(cands.items())), {}
            fitted = fit_quietly(est, frame, target)
        else:
            folds = make_folds(target, int(self.cv), self.task, seed)
            k = 0 if classes is None else len(classes)
            found = cross_fit_own(
                frame, target, task=self.task, candidates=cands, folds=folds, n_classes=k
            )
            choice, scores, fitted = found.choice, found.scores, found.estimator
        return self.adopt(OwnCrossFit(choice, scores, np.empty((0, 0)), fitted), classes, frame)

    def adopt(
        self, found: OwnCrossFit, classes: np.ndarray | None, frame: pd.DataFrame
    ) -> OwnLearner:
        """Set the fitted state from a :func:`cross_fit_own` result on ``frame`` (as ``fit``
        would have), so that a caller that cross-fitted already does not fit twice."""
        if classes is not None:
            self.classes_ = classes
        self.choice_ = found.choice
        self.cv_scores_ = found.scores
        self.estimator_ = found.estimator
        self.n_features_in_ = frame.shape[1]
        self.feature_names_in_ = np.asarray(frame.columns, dtype=object)
        return self

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order."""
        check_is_fitted(self, "estimator_")
        if self.task != "classification":
            raise AttributeError("predict_proba is only available for classification")
        return proba_columns(self.estimator_, self._frame(X), len(self.classes_))

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Labels (classification) or values (regression)."""
        check_is_fitted(self, "estimator_")
        if self.task == "classification":
            return np.asarray(self.classes_[np.argmax(self.predict_proba(X), axis=1)])
        return np.asarray(self.estimator_.predict(self._frame(X)), dtype=np.float64)
