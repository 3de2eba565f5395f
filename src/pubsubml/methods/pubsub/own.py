"""The subscriber's own model M^s: one definition for CUSTOMIZE and for the Own baseline.

pubsub-ml.txt §4 Step 1 trains M^s on the subscriber's private data; §7.3 compares PubSub-ML with
"Own", the subscriber's model alone.  Both are the same learner here, so that a gain of PubSub-ML
over Own measures what subscribing adds and nothing else.  M^s is never published (§3.2, Theorem
3), so choosing it by cross-validation on the subscriber's rows costs no privacy.

The candidates (:data:`OWN_KINDS`, built by :func:`own_estimator`) all encode inputs with the
public schema bounds:

- ``"mlp"``: a (100, 50) tanh network with Adam, trained to convergence (scikit-learn's loss
  tolerance) rather than for a fixed 30 epochs: with 200 rows and minibatches of 100, 30 epochs
  are 60 optimizer steps, which leaves the network at the majority rate;
- ``"forest"``: a random forest with scikit-learn's defaults (pfl-stacking.txt §4);
- ``"logistic"``: an L2 logistic regression (classification) or a ridge regression with its
  penalty chosen by leave-one-out (regression).

:class:`OwnLearner` with ``kind="auto"`` picks the candidate with the best out-of-fold log-loss
(classification) or squared error (regression) over ``cv`` stratified folds and refits it on all
rows (:func:`~pubsubml.methods.pubsub.own_crossfit.cross_fit_own`, which also returns the
out-of-fold outputs the cross-fitted CUSTOMIZE fuses).  :class:`OwnModel` is M^s seen as a black
box, like any subscribed model.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import DataValidationError, SchemaMismatchError
from pubsubml.learners.base import check_target_bounds
from pubsubml.methods.pubsub.own_crossfit import (
    CrossFitStore,
    OwnCrossFit,
    cross_fit_key,
    cross_fit_own,
    fit_quietly,
    make_folds,
    proba_columns,
)
from pubsubml.methods.pubsub.task import TaskEstimatorMixin, check_task, encode_targets
from pubsubml.schema import FeatureSchema

__all__ = [
    "OWN_KINDS",
    "OwnLearner",
    "OwnModel",
    "check_target_bounds",
    "own_candidates",
    "own_estimator",
    "public_encoder",
]


class _PublicEncoder:
    """Encode a DataFrame with public schema bounds (or as plain floats without a schema)."""

    def __init__(self, schema: FeatureSchema | None, features: list[str]) -> None:
        self.schema = None if schema is None else schema.subset(features)
        self.features = features

    def __call__(self, X: pd.DataFrame) -> np.ndarray:
        if self.schema is not None:
            return self.schema.encode(X, extra="ignore")
        try:
            return np.asarray(X[self.features], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DataValidationError(f"features must be numeric without a schema: {exc}") from exc


def public_encoder(schema: FeatureSchema | None, features: list[str]) -> _PublicEncoder:
    """A callable encoding a DataFrame's ``features`` with the public schema bounds."""
    return _PublicEncoder(schema, features)


OWN_KINDS: tuple[str, ...] = ("mlp", "forest", "logistic")
"""The own-model candidates, in the order ties are broken."""


def _scale_target(y: np.ndarray, lower: float, upper: float) -> np.ndarray:
    return (np.asarray(y, dtype=np.float64) - lower) / (upper - lower)


def _unscale_target(t: np.ndarray, lower: float, upper: float) -> np.ndarray:
    return np.asarray(t, dtype=np.float64) * (upper - lower) + lower


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
    cross_fits : CrossFitStore, optional
        Where a cross-fit of the same rows, targets, folds and candidates is looked up and kept
        (:class:`~pubsubml.methods.pubsub.own_crossfit.CrossFitStore`); shared, not copied, by
        :func:`~sklearn.base.clone`.  ``None`` keeps nothing.

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
        cross_fits: CrossFitStore | None = None,
    ) -> None:
        self.task = task
        self.kind = kind
        self.candidates = candidates
        self.cv = cv
        self.schema = schema
        self.classes = classes
        self.target_bounds = target_bounds
        self.random_state = random_state
        self.cross_fits = cross_fits

    def __sklearn_clone__(self) -> OwnLearner:
        """Clone the parameters but share the cross-fit store."""
        params = self.get_params(deep=False)
        store = params.pop("cross_fits")
        return type(self)(cross_fits=store, **{k: clone(v, safe=False) for k, v in params.items()})

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
        check_task(self.task)
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

        With ``cross_fits``, a cross-fit already computed for the same rows, targets, folds and
        candidates is reused.  Nothing is set on ``self`` (see :meth:`adopt`).

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
        store = self.cross_fits
        key = (
            None
            if store is None
            else cross_fit_key(
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
        )
        return cross_fit_own(
            frame,
            target,
            task=self.task,
            candidates=cands,
            folds=folds,
            n_classes=n_classes,
            store=store,
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


class OwnModel:
    """The subscriber's own model M^s seen as a black box, like any subscribed model.

    Parameters
    ----------
    estimator : fitted estimator
        Called on ``features`` only.
    features : list of str
        Its ``input_features``.
    """

    def __init__(self, estimator: Any, features: list[str]) -> None:
        self.estimator = estimator
        self.input_features = features
        self.classes = getattr(estimator, "classes_", None)

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities of M^s on its own features."""
        return np.asarray(self.estimator.predict_proba(X[self.input_features]))

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predictions of M^s on its own features."""
        return np.asarray(self.estimator.predict(X[self.input_features]))
