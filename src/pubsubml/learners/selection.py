"""Private hyperparameter selection whose privacy cost is accounted (Papernot & Steinke 2022).

Choosing hyperparameters by looking at the private data is itself a release: without accounting
it is a leak.  :class:`PrivateHyperparameterSearch` runs the random-stopping selection of
Papernot & Steinke: it draws the number of runs K from a truncated negative binomial law,
independently of the data; each run picks a random candidate of the grid, trains it with DP-SGD
on a training part and scores it on a held-out part with a noisy count (Gaussian mechanism); only
the best run (its model, candidate and noisy score) is released.  The accountant prices the
whole selection as one ``repeat_and_select`` event whose inner events are one run's training and
score, so ``epsilon_`` covers everything that touched the data and a
:meth:`~pubsubml.sites.Site.publish` charges all of it to the site's ledger.

References
----------
N. Papernot and T. Steinke, "Hyperparameter Tuning with Renyi Differential Privacy", ICLR 2022
(arXiv:2110.03620), Theorem 2; pubsub-ml.txt §3.1 (Definition 1; Theorem 2, post-processing) and
§7.2 (the paper selected its hyperparameters by a search whose cost it does not account).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Self, cast

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import ParameterGrid
from sklearn.utils import _safe_indexing, get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import InvalidPrivacyParameterError, PrivacyError
from pubsubml.learners.base import check_labels, check_regression_targets
from pubsubml.learners.dpsgd_base import _DPSGDBase
from pubsubml.privacy.accountants.release import release_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.mechanisms import gaussian_mechanism
from pubsubml.privacy.noise import SecureRandom, check_noise_seed
from pubsubml.privacy.repetitions import repeat_and_select_event, sample_repetitions

__all__ = ["PrivateHyperparameterSearch", "select_hyperparameters"]


def _best_has(method: str) -> Any:
    def check(self: PrivateHyperparameterSearch) -> bool:
        return hasattr(self.estimator, method)

    return check


def _n_rows(X: Any) -> int:
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) > 0 else len(X)


def _n_columns(X: Any) -> int:
    shape = getattr(X, "shape", None)
    return int(shape[1]) if shape is not None and len(shape) > 1 else len(X[0])


class PrivateHyperparameterSearch(MetaEstimatorMixin, BaseEstimator):
    """Select a DP-SGD learner's hyperparameters on private data, with the cost accounted.

    The random-stopping selection of Papernot & Steinke (2022): K ~ TNB(η, γ) runs (E[K] =
    ``mean_repetitions``), each on a uniformly random candidate of ``param_grid``; a run trains
    the candidate with DP-SGD on the training part and scores it on the held-out part with a
    Gaussian noisy count; the best noisy score wins and only that run is released.

    Parameters
    ----------
    estimator : DP-SGD learner
        A :class:`~pubsubml.learners.DPSGDLogisticRegression`, ``DPSGDLinearRegression``,
        ``DPMLPClassifier`` or ``DPMLPRegressor`` with ``dp=True`` (anything with
        ``planned_privacy_events``); cloned, never modified.
    param_grid : dict or list of dicts
        Candidates, as for :class:`sklearn.model_selection.ParameterGrid`.  Every candidate must
        have the same DP events (tune e.g. ``learning_rate``, ``max_grad_norm``,
        ``hidden_layer_sizes``; not ``epochs`` or ``batch_size``, which change σ, q or the steps).
    mean_repetitions : float, optional
        E[K] ≥ 1; defaults to the number of candidates.
    shape : float, default=1.0
        η ≥ 0 of the truncated negative binomial law of K: 1 is the geometric law (light tail,
        so a bounded expected training cost), 0 the logarithmic law (a smaller ε, a heavier
        tail of K).
    validation_fraction : float, default=0.2
        Share of the rows held out for the DP score, in (0, 1).
    score_noise_multiplier : float, default=10.0
        σ of the Gaussian noise added to the held-out score count (sensitivity 1: one row
        changes the count of correct predictions, or the sum of per-row scores in [0, 1], by at
        most 1).  With 300 held-out rows, σ = 10 blurs accuracy by about ±3%.
    random_state : int, numpy Generator or None
        Seeds the split and each run's ``random_state`` (its initial weights).
    noise_seed : int, optional
        Seeds what the privacy analysis keeps secret (K, the candidates, each run's
        ``noise_seed`` and the score noise), for simulations only: the released model is then
        marked ``noise_ = "seeded"``.  Equal to ``random_state``, one generator draws everything
        in the order of a single-seed run.  ``None`` (the default): a secure source
        (:mod:`pubsubml.privacy.noise`).

    Attributes
    ----------
    best_estimator_ : estimator
        The released run's fitted model (trained on the training part).
    best_params_ : dict
        Its candidate.
    best_score_ : float
        Its noisy held-out score (accuracy for a classifier; for a regressor, the mean of
        1 − min(1, ((ŷ − y) / (hi − lo))²) over the public ``target_bounds``).
    n_runs_ : int
        K, the number of runs (drawn independently of the data, so it may be released).
    privacy_events_ : list of DPEvent
        One ``repeat_and_select`` event holding one run's training and score events.
    epsilon_, delta_ : float
        ε at δ of the whole selection, from the accountant (RDP: repeat-and-select has no PLD).
    accountant_ : str
    classes_, schema_, n_features_in_, feature_names_in_
        Those of ``best_estimator_``.

    Raises
    ------
    ValueError
        From ``fit``: an empty grid, a grid that sets ``random_state``, bad ``shape``,
        ``validation_fraction`` or ``score_noise_multiplier``, too few rows to split, or a
        regressor without public ``target_bounds``.
    InvalidPrivacyParameterError
        From ``fit``: ``mean_repetitions`` below 1 (or not positive), a non-private estimator,
        or candidates whose DP events differ.
    TypeError
        From ``fit``: an estimator that cannot plan its DP events.

    Notes
    -----
    What one run does (train on the training part, count on the held-out part) is accounted as
    the sequential composition of both events, although the two parts are disjoint: parallel
    composition would allow their maximum, so the bound is conservative.  The split is a random
    subset of fixed size drawn independently of the data (n is public, as in all DP-SGD
    accounting).  The candidates, K and the seeds are data-independent; the other runs' models
    and scores are discarded, never exposed.  Nothing is charged to a ledger here: publish the
    fitted search with :meth:`~pubsubml.sites.Site.publish`, which charges ``privacy_events_``.

    References
    ----------
    Papernot & Steinke, ICLR 2022, Definition 1 and Theorem 2; pubsub-ml.txt §3.1, §7.2.

    Examples
    --------
    >>> import numpy as np
    >>> from pubsubml.learners import DPSGDLogisticRegression
    >>> X = np.random.default_rng(0).random((400, 3))
    >>> y = (X[:, 0] > X[:, 1]).astype(int)
    >>> base = DPSGDLogisticRegression(classes=[0, 1], accountant="rdp")
    >>> search = PrivateHyperparameterSearch(
    ...     estimator=base, param_grid={"learning_rate": [0.05, 0.2]}, random_state=0
    ... ).fit(X, y)
    >>> search.privacy_events_[0].mechanism, search.epsilon_ > 1.0
    ('repeat_and_select', True)
    """

    def __init__(
        self,
        *,
        estimator: Any = None,
        param_grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]] = (),
        mean_repetitions: float | None = None,
        shape: float = 1.0,
        validation_fraction: float = 0.2,
        score_noise_multiplier: float = 10.0,
        random_state: Any = None,
        noise_seed: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.param_grid = param_grid
        self.mean_repetitions = mean_repetitions
        self.shape = shape
        self.validation_fraction = validation_fraction
        self.score_noise_multiplier = score_noise_multiplier
        self.random_state = random_state
        self.noise_seed = noise_seed

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        if self.estimator is not None:
            inner = get_tags(self.estimator)
            tags.estimator_type = inner.estimator_type
            tags.classifier_tags = inner.classifier_tags
            tags.regressor_tags = inner.regressor_tags
            tags.target_tags = replace(inner.target_tags)
        return tags

    # ---- validation (no attribute changes) ------------------------------------------------
    def _candidates(self) -> list[dict[str, Any]]:
        try:
            candidates = [dict(c) for c in ParameterGrid(self.param_grid)]  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"param_grid is malformed: {exc}") from exc
        if not candidates:
            raise ValueError("param_grid gives no candidate: give at least one value per key")
        if any("random_state" in c or "noise_seed" in c for c in candidates):
            raise ValueError(
                "param_grid may not set random_state or noise_seed: each run draws its own seeds"
            )
        return candidates

    def _law(self, n_candidates: int) -> tuple[float, float]:
        mean = n_candidates if self.mean_repetitions is None else self.mean_repetitions
        if isinstance(mean, bool) or not isinstance(mean, int | float) or not mean > 0:
            raise InvalidPrivacyParameterError(
                f"mean_repetitions must be a positive number (>= 1), got {self.mean_repetitions!r}"
            )
        if not 1.0 <= mean < math.inf:
            raise InvalidPrivacyParameterError(
                f"mean_repetitions must be finite and >= 1, got {self.mean_repetitions!r}"
            )
        shape = self.shape
        if (
            isinstance(shape, bool)
            or not isinstance(shape, int | float)
            or not 0 <= shape < math.inf
        ):
            raise ValueError(f"shape must be finite and >= 0, got {shape!r}")
        return float(mean), float(shape)

    def _split_sizes(self, n: int) -> tuple[int, int]:
        f = self.validation_fraction
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0.0 < f < 1.0:
            raise ValueError(f"validation_fraction must be in (0, 1), got {f!r}")
        n_val = max(1, round(f * n))
        if n - n_val < 1:
            raise ValueError(f"{n} rows are too few to hold out {n_val} for the DP score")
        return n - n_val, n_val

    def _score_bounds(self) -> tuple[float, float] | None:
        if is_classifier(self.estimator):
            return None
        bounds = self.estimator.get_params().get("target_bounds")
        if bounds is None:
            raise ValueError(
                "a regressor is scored on its public target_bounds: set target_bounds on the "
                "estimator (never derive them from the private targets)"
            )
        lo, hi = (float(v) for v in bounds)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"target_bounds must be finite with lower < upper, got {bounds!r}")
        return lo, hi

    def _planned(
        self, candidates: list[dict[str, Any]], n_train: int, width: int
    ) -> tuple[list[DPEvent], float]:
        """One run's training events (the same for every candidate) and δ, before any data."""
        plans = []
        for candidate in candidates:
            est = cast(_DPSGDBase, clone(self.estimator).set_params(**candidate))
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

    # ---- fitting ------------------------------------------------------------------------
    def fit(self, X: Any, y: Any) -> Self:
        """Run the private selection; nothing changes if any check fails.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self

        Raises
        ------
        See the class docstring; errors of the estimator's ``fit`` also propagate.
        """
        if not isinstance(self.estimator, _DPSGDBase):
            raise TypeError(
                "PrivateHyperparameterSearch tunes the DP-SGD learners (DPSGDLogisticRegression, "
                "DPSGDLinearRegression, DPMLPClassifier, DPMLPRegressor), got "
                f"{type(self.estimator).__name__}"
            )
        candidates = self._candidates()
        mean, shape = self._law(len(candidates))
        sigma = self.score_noise_multiplier
        if (
            isinstance(sigma, bool)
            or not isinstance(sigma, int | float)
            or not 0 < sigma < math.inf
        ):
            raise ValueError(f"score_noise_multiplier must be finite and > 0, got {sigma!r}")
        n = _n_rows(X)
        n_train, n_val = self._split_sizes(n)
        bounds = self._score_bounds()
        if bounds is None:  # every label, held-out ones included, among the public classes
            check_labels(y, self.estimator.get_params().get("classes"), n)
        else:
            check_regression_targets(y, n)
        train_events, delta = self._planned(candidates, n_train, _n_columns(X))
        score_event = DPEvent(mechanism="gaussian", noise_multiplier=float(sigma))
        selection = repeat_and_select_event([*train_events, score_event], mean=mean, shape=shape)
        accountant = str(self.estimator.get_params().get("accountant", "pld"))
        epsilon = release_epsilon([selection], delta, "rdp" if accountant == "rdp" else "pld")

        seeded = check_noise_seed(self.noise_seed) == "seeded"
        rng = np.random.default_rng(self.random_state)
        secret: np.random.Generator | SecureRandom = SecureRandom()
        if seeded:
            same = isinstance(self.random_state, int) and self.random_state == self.noise_seed
            secret = rng if same else np.random.default_rng(self.noise_seed)
        order = rng.permutation(n)
        val_idx, train_idx = order[:n_val], order[n_val:]
        X_train, y_train = _safe_indexing(X, train_idx), _safe_indexing(y, train_idx)
        X_val, y_val = _safe_indexing(X, val_idx), np.asarray(_safe_indexing(y, val_idx))
        runs = sample_repetitions(mean, shape, secret)
        best: tuple[float, Any, dict[str, Any]] | None = None
        for _ in range(runs):
            candidate = candidates[int(secret.integers(len(candidates)))]
            seed = int((secret if seeded else rng).integers(2**31 - 1))
            model = clone(self.estimator).set_params(
                **candidate, random_state=seed, noise_seed=seed if seeded else None
            )
            model.fit(X_train, y_train)
            if tuple(model.privacy_events_) != tuple(train_events):
                raise PrivacyError(
                    f"a run recorded {model.privacy_events_}, not the planned {train_events}; "
                    "refusing to report a guarantee that did not run"
                )
            noisy, released = gaussian_mechanism(
                self._score_sum(model, X_val, y_val, bounds),
                sensitivity=1.0,
                noise_multiplier=float(sigma),
                rng=secret if isinstance(secret, np.random.Generator) else None,
            )
            assert released == score_event  # the score event accounted in ``selection``
            score = float(noisy) / n_val
            if best is None or score > best[0]:
                best = (float(score), model, candidate)
        assert best is not None  # K >= 1 under a truncated negative binomial law
        self.best_score_, self.best_estimator_, self.best_params_ = best
        self.n_runs_ = runs
        self.privacy_events_: list[DPEvent] = [selection]
        self.noise_ = "seeded" if seeded else "secure"
        self.epsilon_ = float(epsilon)
        self.delta_ = delta
        self.accountant_ = accountant
        for name in ("classes_", "schema_", "n_features_in_", "feature_names_in_"):
            if hasattr(self.best_estimator_, name):
                setattr(self, name, getattr(self.best_estimator_, name))
            elif hasattr(self, name):
                delattr(self, name)
        return self

    @staticmethod
    def _score_sum(
        model: Any, X_val: Any, y_val: np.ndarray, bounds: tuple[float, float] | None
    ) -> float:
        """Σ of per-row scores in [0, 1] on the held-out rows (sensitivity 1)."""
        pred = np.asarray(model.predict(X_val))
        if bounds is None:
            return float(np.sum(pred == y_val))
        lo, hi = bounds
        err = (pred.astype(np.float64) - np.clip(y_val.astype(np.float64), lo, hi)) / (hi - lo)
        return float(np.sum(1.0 - np.minimum(1.0, err**2)))

    # ---- predicting (the released model) --------------------------------------------------
    def predict(self, X: Any) -> np.ndarray:
        """Predictions of ``best_estimator_``, shape (n_samples,)."""
        check_is_fitted(self, "best_estimator_")
        return np.asarray(self.best_estimator_.predict(X))

    @available_if(_best_has("predict_proba"))
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of ``best_estimator_``, shape (n_samples, n_classes)."""
        check_is_fitted(self, "best_estimator_")
        return np.asarray(self.best_estimator_.predict_proba(X))

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy (classifier) or R² (regressor) of ``best_estimator_``."""
        if is_classifier(self.estimator):
            return float(accuracy_score(y, self.predict(X), sample_weight=sample_weight))
        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))


def select_hyperparameters(
    estimator: Any,
    param_grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]],
    X: Any,
    y: Any,
    **params: Any,
) -> PrivateHyperparameterSearch:
    """Fit a :class:`PrivateHyperparameterSearch` over ``param_grid`` and return it.

    ``params`` are the search's other parameters (``mean_repetitions``, ``shape``,
    ``validation_fraction``, ``score_noise_multiplier``, ``random_state``).  The result's
    ``best_estimator_`` is the released model and ``privacy_events_``/``epsilon_`` its full cost.

    References
    ----------
    Papernot & Steinke, ICLR 2022, Theorem 2.
    """
    search = PrivateHyperparameterSearch(estimator=estimator, param_grid=param_grid, **params)
    return search.fit(X, y)
