"""Many-run black-box audits of the diffprivlib learners: logistic regression, naive Bayes, forest.

Each is trained through the package's wrapper: :class:`~pubsubml.learners.logistic.DPLogisticRegression`
(objective perturbation, public ``data_norm``, the intercept as a regularised constant feature),
:class:`~pubsubml.learners.naive_bayes.DPGaussianNB` (Laplace noise on the per-class means and
variances within the public bounds [0, 1]) and
:class:`~pubsubml.learners.forest.DPRandomForestClassifier` (random trees, noisy leaf labels),
all ε-DP for replace-one neighbours.  Two neighbouring data sets differ by *replacing* one record: ``n − 1`` public-seeded rows near the
origin and a canary x = (1, …, 1) at the norm bound, labelled 1 in D and 0 in D'.  The auditor scores
the fitted model by its probability of class 1 at the canary (black box), or for naive Bayes by
the noisy per-class sums its published parameters carry.  The
learner is fitted ``runs`` times on each set with fresh randomness; a threshold test chosen on
the first half of the fits is scored on the second half, and
:func:`~pubsubml.audit.bounds.many_run_epsilon_lower_bound` turns its error rates into a bound.

The negative control ``"epsilon-x10"`` trains at 10·ε while claiming ε (an accounting bug).

References
----------
Jagielski, Ullman & Oprea, NeurIPS 2020 (auditing DP-SGD and objective perturbation by many runs,
Clopper–Pearson bounds); Chaudhuri, Monteleoni & Sarwate, JMLR 2011 (objective perturbation);
pubsub-ml.txt §8.2.2 (a DP logistic regression publisher).
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, Literal

import numpy as np

from pubsubml.audit.guesses import check_many_run, many_run_bound, many_run_result
from pubsubml.audit.result import AuditResult
from pubsubml.learners.diffprivlib_models import DiffprivlibClassifier
from pubsubml.learners.forest import DPRandomForestClassifier
from pubsubml.learners.logistic import DPLogisticRegression
from pubsubml.learners.naive_bayes import DPGaussianNB

__all__ = ["DIFFPRIVLIB_MODELS", "LOGISTIC_VARIANTS", "audit_diffprivlib", "audit_dp_logistic"]

LOGISTIC_VARIANTS: tuple[str, ...] = ("correct", "epsilon-x10")
Model = Literal["logistic", "naive_bayes", "forest"]
#: The audited diffprivlib learners and their ``target`` names in an :class:`AuditResult`.
DIFFPRIVLIB_MODELS: dict[str, str] = {
    "logistic": "dp-logistic",
    "naive_bayes": "dp-naive-bayes",
    "forest": "dp-random-forest",
}
_FEATURES = 2


def _model(model: Model, epsilon: float, seed: int) -> DiffprivlibClassifier:
    if model == "logistic":
        return DPLogisticRegression(
            classes=[0, 1],
            epsilon=epsilon,
            data_norm=math.sqrt(_FEATURES),
            random_state=seed,
            noise_seed=seed,
        )
    if model == "naive_bayes":
        return DPGaussianNB(
            classes=[0, 1], epsilon=epsilon, bounds=(0.0, 1.0), random_state=seed, noise_seed=seed
        )
    # one tree: every record reaches the audited leaf (parallel composition is not under test)
    return DPRandomForestClassifier(
        classes=[0, 1],
        epsilon=epsilon,
        bounds=(0.0, 1.0),
        n_estimators=1,
        random_state=seed,
        noise_seed=seed,
    )


def _scores(
    model: Model, X: np.ndarray, y: np.ndarray, epsilon: float, runs: int, seed: int
) -> np.ndarray:
    """The scores of ``runs`` independent fits (higher: the canary is labelled 1).

    Naive Bayes is scored white box on what its artifact publishes: the noisy per-class sums
    ``theta_[c]·class_count_[c]``, class 1's minus class 0's, summed over the features (the canary
    adds 1 per feature to the sum of its class).  The others by P(class 1) at the canary.
    """
    canary = X[-1:]
    out = np.empty(runs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # diffprivlib's convergence warnings on tiny data
        for r in range(runs):
            fitted = _model(model, epsilon, seed + r).fit(X, y)
            if model == "naive_bayes":
                nb = fitted.estimator_
                sums = nb.theta_ * nb.class_count_[:, None]
                out[r] = float((sums[1] - sums[0]).sum())
            else:
                out[r] = fitted.predict_proba(canary)[0, 1]
    return out


def audit_dp_logistic(**kwargs: Any) -> AuditResult:
    """:func:`audit_diffprivlib` of the logistic regression (same keyword arguments)."""
    return audit_diffprivlib("logistic", **kwargs)


def audit_diffprivlib(
    model: Model = "logistic",
    *,
    epsilon: float = 1.0,
    variant: str = "correct",
    runs: int = 2_000,
    n_records: int = 30,
    confidence: float = 0.95,
    seed: int = 0,
) -> AuditResult:
    """Many-run black-box audit of a diffprivlib learner (module docstring).

    Parameters
    ----------
    model : {"logistic", "naive_bayes", "forest"}, default="logistic"
    epsilon : float, default=1.0
        The claimed ε (pure DP, replace-one neighbours).
    variant : {"correct", "epsilon-x10"}, default="correct"
    runs : int, default=2000
        Fits per data set; the first half chooses the threshold, the second scores it.
    n_records : int, default=30
    confidence : float, default=0.95
    seed : int, default=0

    Returns
    -------
    AuditResult
        ``method="many-run"``, ``canary="record"``, ``delta = 0``.

    Raises
    ------
    ValueError
        An unknown variant or a parameter out of range.
    """
    if model not in DIFFPRIVLIB_MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {list(DIFFPRIVLIB_MODELS)}")
    check_many_run(variant, LOGISTIC_VARIANTS, epsilon, runs, n_records, confidence)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    X = 0.1 * rng.random((n_records, _FEATURES))
    y = rng.integers(0, 2, n_records)
    X[-1] = 1.0  # the canary, at the public norm bound √d
    trained = 10 * epsilon if variant == "epsilon-x10" else epsilon
    y1, y0 = y.copy(), y.copy()
    y1[-1], y0[-1] = 1, 0
    s1 = _scores(model, X, y1, trained, runs, seed * 10_000_019 + 1)
    s0 = _scores(model, X, y0, trained, runs, seed * 10_000_019 + runs + 1)
    return many_run_result(
        DIFFPRIVLIB_MODELS[model],
        variant,
        many_run_bound(s0, s1, confidence),
        claimed_epsilon=float(epsilon),
        delta=0.0,
        confidence=confidence,
        canary="record",
        runs=runs,
        start=start,
        details={"n_records": n_records},
    )
