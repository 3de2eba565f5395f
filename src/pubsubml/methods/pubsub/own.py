"""The subscriber's own model M^s: one definition for CUSTOMIZE and for the Own baseline.

pubsub-ml.txt §4 Step 1 trains M^s on the subscriber's private data; §7.3 compares PubSub-ML with
"Own", the subscriber's model alone.  Both are the same learner here, so that a gain of PubSub-ML
over Own measures what subscribing adds and nothing else.  M^s is never published (§3.2, Theorem
3), so choosing it by cross-validation on the subscriber's rows costs no privacy.

The candidates (:data:`OWN_KINDS`, built by :mod:`~pubsubml.methods.pubsub.own_estimators`) all
encode inputs with the public schema bounds.

:class:`OwnLearner` with ``kind="auto"`` picks the candidate with the best out-of-fold log-loss
(classification) or squared error (regression) over ``cv`` stratified folds and refits it on all
rows.  :func:`cross_fit_own` (:mod:`~pubsubml.methods.pubsub.own_crossfit`) returns the
out-of-fold outputs as well, which is what the cross-fitted CUSTOMIZE fuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import DataValidationError, SchemaMismatchError
from pubsubml.methods.pubsub.crossfit_reuse import cross_fit_key
from pubsubml.methods.pubsub.outputs import TaskEstimatorMixin, encode_targets
from pubsubml.methods.pubsub.own_crossfit import PROBA_FLOOR as PROBA_FLOOR
from pubsubml.methods.pubsub.own_crossfit import (
    OwnCrossFit,
    check_folds,
    cross_fit_own,
    make_folds,
)
from pubsubml.methods.pubsub.own_crossfit import out_of_fold_loss as out_of_fold_loss
from pubsubml.methods.pubsub.own_estimators import (
    OWN_KINDS,
    fit_quietly,
    own_candidates,
    own_estimator,
    proba_columns,
)
from pubsubml.methods.pubsub.own_estimators import check_target_bounds as check_target_bounds
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
        cands = self._candidates(frame, seed)
        if len(cands) == 1:
            (choice, est), scores = next(iter(cands.items())), {}
            fitted = fit_quietly(est, frame, target)
        else:
            folds = make_folds(target, int(self.cv), self.task, seed)
            k = 0 if classes is None else len(classes)
            found = self.cross_fit(frame, target, folds=folds, seed=seed, n_classes=k)
            choice, scores, fitted = found.choice, found.scores, found.estimator
        return self.adopt(OwnCrossFit(choice, scores, np.empty((0, 0)), fitted), classes, frame)

    def cross_fit(
        self,
        frame: pd.DataFrame,
        target: np.ndarray,
        *,
        folds: list[tuple[np.ndarray, np.ndarray]],
        seed: int,
        n_classes: int,
    ) -> OwnCrossFit:
        """:func:`cross_fit_own` of this learner's candidates (built with ``seed``) over ``folds``.

        Inside :func:`~pubsubml.methods.pubsub.crossfit_reuse.reusing_cross_fits`, a cross-fit
        already computed for the same rows, targets, folds and candidates is reused.  Nothing is
        set on ``self`` (see :meth:`adopt`).

        Parameters
        ----------
        frame : DataFrame
        target : ndarray
            Class indices (classification) or float targets.
        folds : list of (ndarray, ndarray)
        seed : int
            Seeds the candidates (the seed ``fit`` draws from ``random_state``).
        n_classes : int
            The number of classes (0 for regression).

        Returns
        -------
        OwnCrossFit
        """
        cands = self._candidates(frame, seed)
        key = cross_fit_key(
            frame,
            target,
            folds,
            task=self.task,
            n_classes=n_classes,
            spec=self.kind,
            schema=self.schema,
            seed=seed,
            target_bounds=self.target_bounds,
            kinds=tuple(self.candidates),
        )
        return cross_fit_own(
            frame,
            target,
            task=self.task,
            candidates=cands,
            folds=folds,
            n_classes=n_classes,
            key=key,
        )

    def _candidates(self, frame: pd.DataFrame, seed: int) -> dict[str, Any]:
        return own_candidates(
            self.kind,
            task=self.task,
            schema=self.schema,
            features=list(frame.columns),
            seed=seed,
            target_bounds=self.target_bounds,
            kinds=tuple(self.candidates),
        )

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
