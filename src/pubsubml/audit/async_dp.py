"""Many-run audit of the async-DP owners' Laplace answers (async-dp-cost-of-privacy.txt Thm. 1).

An owner answers a gradient query with its clipped mean gradient plus Laplace noise of scale
2ΞT/(n_i ε_i) per coordinate (:func:`~pubsubml.methods.async_dp.learner.answer_gradient_query`).
The audit builds two neighbouring data sets that differ by *replacing* one record (the relation
the guarantee is stated for): ``n − 1`` zero records and one canary record x = (1, …, 1) with a
large target +Y in D and −Y in D', so its clipped gradient at θ = 0 is as large as the clipping
allows and points the opposite way in the two sets.  The owner answers one query at θ = 0
(T = 1, so one answer carries the whole ε_i) ``runs`` times on each set; a likelihood-ratio test
whose threshold is chosen on the first half of the runs is scored on the second half, and
:func:`~pubsubml.audit.bounds.many_run_epsilon_lower_bound` turns its error rates into a bound.

Negative controls keep the claim ε_i: ``"noise-x0.1"`` (a tenth of the noise) and ``"l2-clip"``
(per-example gradients clipped in L2 norm to Ξ, as the paper's Assumption 2 states Ξ, with the
noise still calibrated to the L1 sensitivity 2Ξ/n_i: a gradient spread over p coordinates then
moves the answer by √p times more in L1 than the noise covers).

References
----------
async-dp-cost-of-privacy.txt §3 (Eq. 4, Theorem 1, Appendix A); Jagielski, Ullman & Oprea,
NeurIPS 2020; Nasr et al., IEEE S&P 2021 (many-run audits with Clopper–Pearson bounds).
"""

from __future__ import annotations

import time

import numpy as np

from pubsubml.audit.guesses import check_many_run, many_run_bound, many_run_result
from pubsubml.audit.result import AuditResult
from pubsubml.methods.async_dp.learner import answer_gradient_query
from pubsubml.methods.async_dp.oracle import SquaredLossOracle

__all__ = ["ASYNC_VARIANTS", "audit_async_dp"]

ASYNC_VARIANTS: tuple[str, ...] = ("correct", "noise-x0.1", "l2-clip")
_CLIP = 1.0  # Ξ
_TARGET = 1e3  # |y| of the canary: its gradient is clipped whatever the clipping norm


def _data(n: int, p: int, sign: float) -> tuple[np.ndarray, np.ndarray]:
    X = np.zeros((n, p))
    y = np.zeros(n)
    X[-1], y[-1] = 1.0, sign * _TARGET
    return X, y


def _answers(
    variant: str, sign: float, n: int, p: int, epsilon: float, runs: int, rng: np.random.Generator
) -> np.ndarray:
    """``runs`` answers at θ = 0 on D (sign +1) or D' (sign −1), shape (runs, p)."""
    X, y = _data(n, p, sign)
    oracle = SquaredLossOracle(X, y, clip_norm=_CLIP, theta_max=1.0)
    theta = np.zeros((runs, p))
    if variant == "correct":
        return answer_gradient_query(theta, oracle, epsilon=epsilon, horizon=1, rng=rng)[0]
    scale = oracle.sensitivity / epsilon  # what the shipped mechanism adds
    if variant == "noise-x0.1":
        exact = oracle.mean_gradient(theta)
        return exact + rng.laplace(0.0, scale / 10, exact.shape)
    # l2-clip: the canary's gradient −2y·x clipped to L2 norm Ξ, the noise unchanged
    grad = -2.0 * y[-1] * X[-1]
    exact = grad * min(1.0, _CLIP / float(np.linalg.norm(grad))) / n
    return exact + rng.laplace(0.0, scale, (runs, p))


def audit_async_dp(
    *,
    epsilon: float = 1.0,
    variant: str = "correct",
    runs: int = 20_000,
    n_records: int = 100,
    n_features: int = 4,
    confidence: float = 0.95,
    seed: int = 0,
) -> AuditResult:
    """Many-run audit of one data owner's Laplace answer (module docstring).

    Parameters
    ----------
    epsilon : float, default=1.0
        ε_i of the owner (T = 1: the answer carries all of it).
    variant : {"correct", "noise-x0.1", "l2-clip"}, default="correct"
    runs : int, default=20000
        Answers per data set; the first half chooses the test's threshold, the second scores it.
    n_records, n_features : int
        n_i and p.
    confidence : float, default=0.95
    seed : int, default=0

    Returns
    -------
    AuditResult
        ``claimed_epsilon`` is ε_i (pure DP, δ = 0), ``method="many-run"``, ``canary="record"``.

    Raises
    ------
    ValueError
        An unknown variant or a parameter out of range.

    Examples
    --------
    >>> r = audit_async_dp(epsilon=1.0, runs=4000)
    >>> 0 < r.lower_bound <= 1.0
    True
    """
    check_many_run(variant, ASYNC_VARIANTS, epsilon, runs, n_records, confidence)
    if n_features < 1:
        raise ValueError(f"n_features must be >= 1, got {n_features!r}")
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    a0 = _answers(variant, 1.0, n_records, n_features, epsilon, runs, rng)
    a1 = _answers(variant, -1.0, n_records, n_features, epsilon, runs, rng)
    # the likelihood ratio of the *claimed* mechanism: Laplace around the correct means
    mu = _CLIP / (n_features * n_records)  # the L1-clipped canary's mean, per coordinate
    scale = 2 * _CLIP / (n_records * epsilon)

    def stat(a: np.ndarray) -> np.ndarray:
        return np.asarray((np.abs(a + mu) - np.abs(a - mu)).sum(axis=1) / scale)

    return many_run_result(
        "async-dp-answer",
        variant,
        many_run_bound(stat(a0), stat(a1), confidence),
        claimed_epsilon=float(epsilon),
        delta=0.0,
        confidence=confidence,
        canary="record",
        runs=runs,
        start=start,
        details={"n_records": n_records, "n_features": n_features},
    )
