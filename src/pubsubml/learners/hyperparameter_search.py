"""Private hyperparameter selection whose privacy cost is accounted (Papernot & Steinke 2022).

Choosing hyperparameters by looking at the private data is itself a release: without accounting
it is a leak.  :class:`PrivateHyperparameterSearch` runs the random-stopping selection of
Papernot & Steinke: it draws the number of runs K from a truncated negative binomial law,
independently of the data; each run picks a random candidate of the grid, trains it with DP-SGD
on a training part and scores it on a held-out part with a noisy count (Gaussian mechanism); only
the best run (its model, candidate and noisy score) is released.  The accountant prices the
whole selection as one ``repeat_and_select`` event whose inner events are one run's training and
score, so ``epsilon_`` covers everything that touched the data and a
:meth:`~pubsubml.sites.Site.publish` charges all of it to the site's ledger.  The price is fixed,
and every parameter checked, before any training (:mod:`~pubsubml.learners.search_accounting`).

References
----------
N. Papernot and T. Steinke, "Hyperparameter Tuning with Renyi Differential Privacy", ICLR 2022
(arXiv:2110.03620), Theorem 2; pubsub-ml.txt §3.1 (Definition 1; Theorem 2, post-processing) and
§7.2 (the paper selected its hyperparameters by a search whose cost it does not account).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Self

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from pubsubml.errors import PrivacyError
from pubsubml.learners.search_accounting import HeldOutSplit, SearchPlan, n_rows, plan_search
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.mechanisms import gaussian_mechanism
from pubsubml.privacy.noise import SecureRandom, check_noise_seed
from pubsubml.privacy.repetitions import sample_repetitions

__all__ = ["PrivateHyperparameterSearch", "select_hyperparameters"]


def _best_has(method: str) -> Any:
    def check(self: PrivateHyperparameterSearch) -> bool:
        return hasattr(self.estimator, method)

    return check


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

    def _sources(self) -> tuple[np.random.Generator, np.random.Generator | SecureRandom, bool]:
        """The public generator (split, weights), the secret source and whether it is seeded.

        With ``noise_seed`` equal to ``random_state`` one generator draws everything.
        """
        seeded = check_noise_seed(self.noise_seed) == "seeded"
        rng = np.random.default_rng(self.random_state)
        secret: np.random.Generator | SecureRandom = SecureRandom()
        if seeded:
            same = isinstance(self.random_state, int) and self.random_state == self.noise_seed
            secret = rng if same else np.random.default_rng(self.noise_seed)
        return rng, secret, seeded

    def _run(
        self,
        plan: SearchPlan,
        candidate: dict[str, Any],
        seed: int,
        seeded: bool,
        split: HeldOutSplit,
        secret: np.random.Generator | SecureRandom,
    ) -> tuple[float, Any]:
        """One run: train ``candidate`` on the training part, return its noisy held-out score."""
        model = clone(self.estimator).set_params(
            **candidate, random_state=seed, noise_seed=seed if seeded else None
        )
        model.fit(split.X_train, split.y_train)
        if tuple(model.privacy_events_) != tuple(plan.train_events):
            raise PrivacyError(
                f"a run recorded {model.privacy_events_}, not the planned {plan.train_events}; "
                "refusing to report a guarantee that did not run"
            )
        noisy, released = gaussian_mechanism(
            self._score_sum(model, split.X_val, split.y_val, plan.bounds),
            sensitivity=1.0,
            noise_multiplier=plan.score_noise_multiplier,
            rng=secret if isinstance(secret, np.random.Generator) else None,
        )
        assert released == plan.score_event  # the score event accounted in ``plan.event``
        return float(noisy) / plan.n_val, model

    def _commit(
        self, plan: SearchPlan, best: tuple[float, Any, dict[str, Any]], runs: int, seeded: bool
    ) -> None:
        """Set the fitted attributes from the released run and the accounted selection."""
        self.best_score_, self.best_estimator_, self.best_params_ = best
        self.n_runs_ = runs
        self.privacy_events_: list[DPEvent] = [plan.event]
        self.noise_ = "seeded" if seeded else "secure"
        self.epsilon_ = plan.epsilon
        self.delta_ = plan.delta
        self.accountant_ = plan.accountant
        for name in ("classes_", "schema_", "n_features_in_", "feature_names_in_"):
            if hasattr(self.best_estimator_, name):
                setattr(self, name, getattr(self.best_estimator_, name))
            elif hasattr(self, name):
                delattr(self, name)

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
        plan = plan_search(
            self.estimator,
            self.param_grid,
            X,
            y,
            mean_repetitions=self.mean_repetitions,
            shape=self.shape,
            validation_fraction=self.validation_fraction,
            score_noise_multiplier=self.score_noise_multiplier,
        )
        rng, secret, seeded = self._sources()
        split = HeldOutSplit.draw(X, y, rng.permutation(n_rows(X)), plan.n_val)
        runs = sample_repetitions(plan.mean, plan.shape, secret)
        best: tuple[float, Any, dict[str, Any]] | None = None
        for _ in range(runs):
            candidate = plan.candidates[int(secret.integers(len(plan.candidates)))]
            seed = int((secret if seeded else rng).integers(2**31 - 1))
            score, model = self._run(plan, candidate, seed, seeded, split, secret)
            if best is None or score > best[0]:
                best = (score, model, candidate)
        assert best is not None  # K >= 1 under a truncated negative binomial law
        self._commit(plan, best, runs, seeded)
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
