"""Many-run black-box audit of :class:`~pubsubml.learners.logistic.DPLogisticRegression`.

diffprivlib's logistic regression (objective perturbation, replace-one neighbours) trained through
the package's wrapper (public ``data_norm``, the intercept as a regularised constant feature).  Two
neighbouring data sets differ by *replacing* one record: ``n − 1`` public-seeded rows near the
origin and a canary x = (1, …, 1) at the norm bound, labelled 1 in D and 0 in D'.  The auditor sees
only the fitted model (black box) and scores it by its probability of class 1 at the canary.  The
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

import numpy as np

from pubsubml.audit.guesses import check_many_run, many_run_bound
from pubsubml.audit.result import AuditResult
from pubsubml.learners.logistic import DPLogisticRegression

__all__ = ["LOGISTIC_VARIANTS", "audit_dp_logistic"]

LOGISTIC_VARIANTS: tuple[str, ...] = ("correct", "epsilon-x10")
_FEATURES = 2


def _scores(X: np.ndarray, y: np.ndarray, epsilon: float, runs: int, seed: int) -> np.ndarray:
    """P(class 1) at the canary of ``runs`` independent fits."""
    canary = X[-1:]
    out = np.empty(runs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # diffprivlib's convergence warnings on tiny data
        for r in range(runs):
            model = DPLogisticRegression(
                classes=[0, 1],
                epsilon=epsilon,
                data_norm=math.sqrt(_FEATURES),
                random_state=seed + r,
            ).fit(X, y)
            out[r] = model.predict_proba(canary)[0, 1]
    return out


def audit_dp_logistic(
    *,
    epsilon: float = 1.0,
    variant: str = "correct",
    runs: int = 2_000,
    n_records: int = 30,
    confidence: float = 0.95,
    seed: int = 0,
) -> AuditResult:
    """Many-run black-box audit of the DP logistic regression (module docstring).

    Parameters
    ----------
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
    check_many_run(variant, LOGISTIC_VARIANTS, epsilon, runs, n_records, confidence)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    X = 0.1 * rng.random((n_records, _FEATURES))
    y = rng.integers(0, 2, n_records)
    X[-1] = 1.0  # the canary, at the public norm bound √d
    trained = 10 * epsilon if variant == "epsilon-x10" else epsilon
    y1, y0 = y.copy(), y.copy()
    y1[-1], y0[-1] = 1, 0
    s1 = _scores(X, y1, trained, runs, seed * 10_000_019 + 1)
    s0 = _scores(X, y0, trained, runs, seed * 10_000_019 + runs + 1)
    test = many_run_bound(s0, s1, confidence)
    return AuditResult(
        target="dp-logistic",
        variant=variant,
        claimed_epsilon=float(epsilon),
        delta=0.0,
        lower_bound=test.lower_bound,
        confidence=confidence,
        method="many-run",
        canary="record",
        canaries=runs,
        guesses=test.scored,
        correct=test.correct,
        runtime_s=time.perf_counter() - start,
        details={"n_records": n_records, "threshold": test.threshold},
    )
