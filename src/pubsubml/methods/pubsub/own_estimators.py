"""The own model's candidates as unfitted estimators (pubsub-ml.txt §4 Step 1; §7.3's Own).

The candidates (:data:`OWN_KINDS`) all encode inputs with the public schema bounds:

- ``"mlp"``: a (100, 50) tanh network with Adam, trained to convergence (scikit-learn's loss
  tolerance) rather than for a fixed 30 epochs: with 200 rows and minibatches of 100, 30 epochs
  are 60 optimizer steps, which leaves the network at the majority rate;
- ``"forest"``: a random forest with scikit-learn's defaults (pfl-stacking.txt §4);
- ``"logistic"``: an L2 logistic regression (classification) or a ridge regression with its
  penalty chosen by leave-one-out (regression).

:func:`own_candidates` gives the candidates of an own-model specification, :func:`fit_quietly`
fits one, and :func:`proba_columns` reads its probabilities with a column for every class.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from threadpoolctl import threadpool_limits

from pubsubml.learners.base import check_target_bounds
from pubsubml.methods.pubsub.outputs import public_encoder
from pubsubml.schema import FeatureSchema

__all__ = [
    "OWN_KINDS",
    "check_target_bounds",
    "fit_quietly",
    "own_candidates",
    "own_estimator",
    "proba_columns",
]

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
