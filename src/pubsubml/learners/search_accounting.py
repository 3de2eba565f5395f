"""The accounted plan of a private hyperparameter search, fixed before any training.

:class:`~pubsubml.learners.hyperparameter_search.PrivateHyperparameterSearch` prices its whole
random-stopping selection (Papernot & Steinke 2022) from public inputs only: the grid, the law
of the number of runs K, the split sizes, one run's planned DP events (the same for every
candidate) and the score noise.  :func:`plan_search` validates all of them and returns that price
as a :class:`SearchPlan`, before the search trains anything; :class:`HeldOutSplit` is the
data-independent split of the rows into a training part and a held-out part for the DP score.

References
----------
N. Papernot and T. Steinke, "Hyperparameter Tuning with Renyi Differential Privacy", ICLR 2022
(arXiv:2110.03620), Theorem 2; pubsub-ml.txt §3.1 and §7.2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import ParameterGrid
from sklearn.utils import _safe_indexing

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.learners.base import check_labels, check_regression_targets
from pubsubml.learners.dpsgd_base import _DPSGDBase
from pubsubml.privacy.accountants.release import release_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.repetitions import repeat_and_select_event

__all__ = ["HeldOutSplit", "SearchPlan", "n_rows", "plan_search"]

ParamGrid = Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]]


def n_rows(X: Any) -> int:
    """The number of rows of a DataFrame, array or list of rows."""
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) > 0 else len(X)


def _n_columns(X: Any) -> int:
    shape = getattr(X, "shape", None)
    return int(shape[1]) if shape is not None and len(shape) > 1 else len(X[0])


@dataclass(frozen=True)
class SearchPlan:
    """The validated, accounted plan of a selection: everything fixed before any training.

    Attributes
    ----------
    candidates : list of dict
        The grid's candidates, in :class:`~sklearn.model_selection.ParameterGrid` order.
    mean, shape : float
        E[K] and η of the truncated negative binomial law of the number of runs K.
    n_val : int
        Held-out rows.
    bounds : (float, float) or None
        A regressor's public target bounds (the score's scale); ``None`` for a classifier.
    train_events : list of DPEvent
        One run's training events.
    score_noise_multiplier : float
        σ of the held-out score count.
    score_event : DPEvent
        One run's score event.
    event : DPEvent
        The ``repeat_and_select`` event of the whole selection.
    delta, epsilon : float
        δ and the accountant's ε of ``event``.
    accountant : str
    """

    candidates: list[dict[str, Any]]
    mean: float
    shape: float
    n_val: int
    bounds: tuple[float, float] | None
    train_events: list[DPEvent]
    score_noise_multiplier: float
    score_event: DPEvent
    event: DPEvent
    delta: float
    epsilon: float
    accountant: str


@dataclass(frozen=True)
class HeldOutSplit:
    """The training and held-out parts of the rows."""

    X_train: Any
    y_train: Any
    X_val: Any
    y_val: np.ndarray

    @classmethod
    def draw(cls, X: Any, y: Any, order: np.ndarray, n_val: int) -> HeldOutSplit:
        """The first ``n_val`` rows of the random ``order`` held out, the others for training."""
        val_idx, train_idx = order[:n_val], order[n_val:]
        return cls(
            X_train=_safe_indexing(X, train_idx),
            y_train=_safe_indexing(y, train_idx),
            X_val=_safe_indexing(X, val_idx),
            y_val=np.asarray(_safe_indexing(y, val_idx)),
        )


def _candidates(param_grid: ParamGrid) -> list[dict[str, Any]]:
    try:
        candidates = [dict(c) for c in ParameterGrid(param_grid)]  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"param_grid is malformed: {exc}") from exc
    if not candidates:
        raise ValueError("param_grid gives no candidate: give at least one value per key")
    if any("random_state" in c or "noise_seed" in c for c in candidates):
        raise ValueError(
            "param_grid may not set random_state or noise_seed: each run draws its own seeds"
        )
    return candidates


def _law(mean_repetitions: Any, shape: Any, n_candidates: int) -> tuple[float, float]:
    mean = n_candidates if mean_repetitions is None else mean_repetitions
    if isinstance(mean, bool) or not isinstance(mean, int | float) or not mean > 0:
        raise InvalidPrivacyParameterError(
            f"mean_repetitions must be a positive number (>= 1), got {mean_repetitions!r}"
        )
    if not 1.0 <= mean < math.inf:
        raise InvalidPrivacyParameterError(
            f"mean_repetitions must be finite and >= 1, got {mean_repetitions!r}"
        )
    if isinstance(shape, bool) or not isinstance(shape, int | float) or not 0 <= shape < math.inf:
        raise ValueError(f"shape must be finite and >= 0, got {shape!r}")
    return float(mean), float(shape)


def _score_noise_multiplier(sigma: Any) -> float:
    if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not 0 < sigma < math.inf:
        raise ValueError(f"score_noise_multiplier must be finite and > 0, got {sigma!r}")
    return float(sigma)


def _split_sizes(validation_fraction: Any, n: int) -> tuple[int, int]:
    f = validation_fraction
    if isinstance(f, bool) or not isinstance(f, int | float) or not 0.0 < f < 1.0:
        raise ValueError(f"validation_fraction must be in (0, 1), got {f!r}")
    n_val = max(1, round(f * n))
    if n - n_val < 1:
        raise ValueError(f"{n} rows are too few to hold out {n_val} for the DP score")
    return n - n_val, n_val


def _score_bounds(estimator: Any) -> tuple[float, float] | None:
    if is_classifier(estimator):
        return None
    bounds = estimator.get_params().get("target_bounds")
    if bounds is None:
        raise ValueError(
            "a regressor is scored on its public target_bounds: set target_bounds on the "
            "estimator (never derive them from the private targets)"
        )
    lo, hi = (float(v) for v in bounds)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"target_bounds must be finite with lower < upper, got {bounds!r}")
    return lo, hi


def _check_targets(estimator: Any, y: Any, n: int, bounds: tuple[float, float] | None) -> None:
    """Every label, held-out ones included, among the public classes (or real targets)."""
    if bounds is None:
        check_labels(y, estimator.get_params().get("classes"), n)
    else:
        check_regression_targets(y, n)


def _planned_run(
    estimator: Any, candidates: list[dict[str, Any]], n_train: int, width: int
) -> tuple[list[DPEvent], float]:
    """One run's training events (the same for every candidate) and δ, before any data."""
    plans = []
    for candidate in candidates:
        est = cast(_DPSGDBase, clone(estimator).set_params(**candidate))
        plans.append((tuple(est.planned_privacy_events(n_train, width)), est))
    events = plans[0][0]
    if not events:
        raise InvalidPrivacyParameterError(
            "the estimator trains without DP (dp=False): a private selection needs DP runs"
        )
    deltas = {float(est._privacy_target()[1]) for _, est in plans}
    if any(e != events for e, _ in plans) or len(deltas) != 1:
        raise InvalidPrivacyParameterError(
            "every candidate must have the same DP events and δ (the accounting prices one "
            "run for all of them); the grid changes σ, q or the steps: tune parameters such "
            "as learning_rate, max_grad_norm or hidden_layer_sizes, not epochs or batch_size"
        )
    return list(events), deltas.pop()


def plan_search(
    estimator: Any,
    param_grid: ParamGrid,
    X: Any,
    y: Any,
    *,
    mean_repetitions: float | None,
    shape: float,
    validation_fraction: float,
    score_noise_multiplier: float,
) -> SearchPlan:
    """Validate a search's parameters and data shape and price the whole selection.

    Parameters
    ----------
    estimator, param_grid, mean_repetitions, shape, validation_fraction, score_noise_multiplier
        Those of :class:`~pubsubml.learners.hyperparameter_search.PrivateHyperparameterSearch`.
    X : DataFrame or array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
        Only their sizes and, for the check that they are public classes or real values, the
        labels are read; nothing is trained.

    Returns
    -------
    SearchPlan

    Raises
    ------
    TypeError, ValueError, InvalidPrivacyParameterError
        As :meth:`PrivateHyperparameterSearch.fit
        <pubsubml.learners.hyperparameter_search.PrivateHyperparameterSearch.fit>`.
    """
    if not isinstance(estimator, _DPSGDBase):
        raise TypeError(
            "PrivateHyperparameterSearch tunes the DP-SGD learners (DPSGDLogisticRegression, "
            "DPSGDLinearRegression, DPMLPClassifier, DPMLPRegressor), got "
            f"{type(estimator).__name__}"
        )
    candidates = _candidates(param_grid)
    mean, law_shape = _law(mean_repetitions, shape, len(candidates))
    sigma = _score_noise_multiplier(score_noise_multiplier)
    n = n_rows(X)
    n_train, n_val = _split_sizes(validation_fraction, n)
    bounds = _score_bounds(estimator)
    _check_targets(estimator, y, n, bounds)
    train_events, delta = _planned_run(estimator, candidates, n_train, _n_columns(X))
    score_event = DPEvent(mechanism="gaussian", noise_multiplier=sigma)
    selection = repeat_and_select_event([*train_events, score_event], mean=mean, shape=law_shape)
    accountant = str(estimator.get_params().get("accountant", "pld"))
    epsilon = release_epsilon([selection], delta, "rdp" if accountant == "rdp" else "pld")
    return SearchPlan(
        candidates=candidates,
        mean=mean,
        shape=law_shape,
        n_val=n_val,
        bounds=bounds,
        train_events=train_events,
        score_noise_multiplier=sigma,
        score_event=score_event,
        event=selection,
        delta=delta,
        epsilon=float(epsilon),
        accountant=accountant,
    )
