"""From canary scores to guesses to an ε lower bound (the last step of an audit).

The auditor ranks the ``m`` canaries by a membership score (higher means "more likely included"),
guesses "in" for the ``r/2`` highest and "out" for the ``r/2`` lowest, and abstains on the rest
(Steinke, Nasr & Jagielski, NeurIPS 2023, §3, "abstentions").  Trying several ``r`` after seeing the
scores would overstate the confidence, so every ``r`` of a fixed, public list is tried and the
confidence is split between them (Bonferroni): the reported bound holds at the stated confidence.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pubsubml.audit.bounds import many_run_epsilon_lower_bound, one_run_epsilon_lower_bound
from pubsubml.audit.result import AuditResult

__all__ = [
    "GUESS_FRACTIONS",
    "ManyRunBound",
    "OneRunBound",
    "check_many_run",
    "dirac_scores",
    "draw_inclusion",
    "many_run_bound",
    "many_run_result",
    "one_run_bound",
    "runs_to_refute",
]

#: Fractions of the canaries guessed on; fixed before any score is seen.
GUESS_FRACTIONS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
#: Quantiles of the with-canary scores tried as a many-run test's threshold; fixed in advance.
_QUANTILES = np.linspace(0.02, 0.98, 49)


@dataclass(frozen=True)
class OneRunBound:
    """The best bound over the guess counts: ε_lb with the ``r`` and ``v`` it came from."""

    lower_bound: float
    guesses: int
    correct: int


def draw_inclusion(m: int, rng: np.random.Generator) -> np.ndarray:
    """Include each of ``m`` canaries independently with probability ½ (a bool array)."""
    if m < 2:
        raise ValueError(f"an audit needs at least 2 canaries, got {m}")
    return rng.random(m) < 0.5


def dirac_scores(y: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """Membership scores of Dirac canaries from every release of their coordinates.

    ``y[t, i]`` is release ``t`` on canary ``i``'s coordinate in units of the clip norm C: N(0, σ²)
    without the canary and, with it, N(1, σ²) when it was sampled (probability ``q``) and N(0, σ²)
    otherwise.  The score is the log-likelihood ratio of "included" against "never there",
    ``Σ_t log(1 − q + q·exp((2y_t − 1)/(2σ²)))``.

    Parameters
    ----------
    y : array of shape (T, m)
        The releases, one row per step (or round).
    q : float
        Sampling rate of a record (or client) per step, in (0, 1].
    sigma : float
        The claimed noise multiplier σ > 0 (the auditor scores with the claimed mechanism).

    Returns
    -------
    ndarray of shape (m,)

    References
    ----------
    Steinke, Nasr & Jagielski (NeurIPS 2023), §6 (Dirac canaries, white box); Nasr et al.
    (IEEE S&P 2021), §3 (the likelihood-ratio test on released gradients).

    Examples
    --------
    >>> s = dirac_scores(np.array([[1.0, 0.0]]), q=1.0, sigma=1.0)
    >>> bool(s[0] > s[1])
    True
    """
    if not 0 < q <= 1 or not sigma > 0:
        raise ValueError(f"need 0 < q <= 1 and sigma > 0, got {q!r}, {sigma!r}")
    y = np.asarray(y, dtype=float)
    log_in = np.logaddexp(
        np.log1p(-q) if q < 1 else -np.inf,
        np.log(q) + (2 * y - 1) / (2 * sigma**2),
    )
    return np.asarray(log_in.sum(axis=0))


def one_run_bound(
    scores: np.ndarray,
    included: np.ndarray,
    delta: float,
    confidence: float = 0.95,
    fractions: Sequence[float] = GUESS_FRACTIONS,
) -> OneRunBound:
    """ε lower bound from membership scores of the ``m`` canaries of one run.

    Parameters
    ----------
    scores : array of shape (m,)
        Higher means the auditor believes the canary was included.  Must not depend on
        ``included`` other than through the mechanism's output.
    included : bool array of shape (m,)
        The coins: which canaries were in the training input.
    delta : float
        δ of the audited guarantee.
    confidence : float, default=0.95
        Overall confidence, split evenly over ``fractions``.
    fractions : sequence of float, default=GUESS_FRACTIONS
        Guess on ``max(2, round(f·m))`` canaries (half "in", half "out") for each ``f``.

    Returns
    -------
    OneRunBound

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> inc = draw_inclusion(1000, rng)
    >>> one_run_bound(inc + rng.normal(0, 0.1, 1000), inc, 1e-5).lower_bound > 3
    True
    >>> one_run_bound(rng.normal(size=1000), inc, 1e-5).lower_bound
    0.0
    """
    scores = np.asarray(scores, dtype=float)
    included = np.asarray(included, dtype=bool)
    m = len(scores)
    if included.shape != (m,) or m < 2:
        raise ValueError(
            f"need one score per canary and at least 2; got {scores.shape}, {included.shape}"
        )
    if not np.all(np.isfinite(scores)):
        raise ValueError("canary scores must be finite")
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        raise ValueError(f"guess fractions must be in (0, 1], got {list(fractions)!r}")
    order = np.argsort(-scores, kind="stable")
    ranked = included[order]
    level = 1 - (1 - confidence) / len(fractions)
    best = OneRunBound(0.0, 0, 0)
    for f in fractions:
        half = max(1, round(f * m) // 2)
        right = int(ranked[:half].sum()) + int((~ranked[m - half :]).sum())
        r = 2 * half
        bound = one_run_epsilon_lower_bound(m, r, right, delta, level)
        if bound > best.lower_bound or best.guesses == 0:
            best = OneRunBound(bound, r, right)
    return best


@dataclass(frozen=True)
class ManyRunBound:
    """A many-run threshold test scored on held-out runs, and the bound it gives."""

    lower_bound: float
    threshold: float
    scored: int
    correct: int


def many_run_bound(
    without: np.ndarray, with_canary: np.ndarray, confidence: float = 0.95
) -> ManyRunBound:
    """ε lower bound (δ = 0) from scores of runs without and with the canary.

    The test "score > t" calls a run "with the canary".  Its threshold ``t`` is chosen on the
    first half of each sample (the quantile of the pooled scores, over a fixed grid, whose
    bound is largest there) and the error rates are counted on the second half, so the choice does
    not inflate the confidence of the reported bound.

    Parameters
    ----------
    without, with_canary : array of shape (runs,)
        Scores of independent runs on the two neighbouring inputs (equal lengths, at least 4).
    confidence : float, default=0.95

    Returns
    -------
    ManyRunBound

    References
    ----------
    Jagielski, Ullman & Oprea (NeurIPS 2020), §4; Nasr et al. (IEEE S&P 2021), §3.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> many_run_bound(rng.normal(0, 1, 4000), rng.normal(5, 1, 4000)).lower_bound > 4
    True
    """
    s0, s1 = np.asarray(without, dtype=float), np.asarray(with_canary, dtype=float)
    if s0.shape != s1.shape or s0.ndim != 1 or len(s0) < 4:
        raise ValueError(f"need two equal samples of at least 4 runs, got {s0.shape}, {s1.shape}")
    half = len(s0) // 2
    best, threshold = -1.0, float(np.median(s1[:half]))
    # thresholds from both samples, so a test on discrete scores (a vote, a saturated
    # probability) can split them between two values
    for t in np.unique(np.quantile(np.concatenate([s0[:half], s1[:half]]), _QUANTILES)):
        fp, fn = int((s0[:half] > t).sum()), int((s1[:half] <= t).sum())
        bound = many_run_epsilon_lower_bound(fp, half, fn, half, 0.0, confidence)
        if bound > best:
            best, threshold = bound, float(t)
    scored = len(s0) - half
    fp, fn = int((s0[half:] > threshold).sum()), int((s1[half:] <= threshold).sum())
    return ManyRunBound(
        many_run_epsilon_lower_bound(fp, scored, fn, scored, 0.0, confidence),
        threshold,
        2 * scored,
        2 * scored - fp - fn,
    )


def many_run_result(
    target: str,
    variant: str,
    test: ManyRunBound,
    *,
    claimed_epsilon: float,
    delta: float,
    confidence: float,
    canary: str,
    runs: int,
    start: float,
    details: dict[str, Any],
) -> AuditResult:
    """Report a many-run audit: ``test`` on ``runs`` runs per data set, its threshold appended to
    ``details``; ``start`` is ``time.perf_counter()`` when the audit started."""
    return AuditResult(
        target=target,
        variant=variant,
        claimed_epsilon=claimed_epsilon,
        delta=delta,
        lower_bound=test.lower_bound,
        confidence=confidence,
        method="many-run",
        canary=canary,
        canaries=runs,
        guesses=test.scored,
        correct=test.correct,
        runtime_s=time.perf_counter() - start,
        details={**details, "threshold": test.threshold},
    )


def runs_to_refute(epsilon: float, minimum: int) -> int:
    """Runs per data set a many-run audit needs before it *can* refute a claimed ε.

    A perfect test scored on ``N`` runs per side reaches at most about ``log(N / 3.7)`` at 95 %
    confidence (the Clopper–Pearson bound on zero false positives), so refuting ε takes
    ``N > 3.7·e^ε`` scored runs whatever the mechanism.  This returns ``2·⌈8·e^ε⌉`` (half choose
    the threshold, half are scored; a perfect test then reaches about ε + 0.77), or ``minimum``
    when that is larger.  Derived from the claim alone, before any run.

    Examples
    --------
    >>> runs_to_refute(1.0, 2000), runs_to_refute(8.0, 2000)
    (2000, 47696)
    """
    if not (epsilon > 0 and np.isfinite(epsilon)) or minimum < 4:
        raise ValueError(
            f"need a finite epsilon > 0 and minimum >= 4, got {epsilon!r}, {minimum!r}"
        )
    return max(int(minimum), 2 * int(np.ceil(8 * np.exp(epsilon))))


def check_many_run(
    variant: str,
    variants: Sequence[str],
    epsilon: float,
    runs: int,
    n_records: int,
    confidence: float,
) -> None:
    """Validate a many-run audit's parameters (raises ValueError naming the bad one)."""
    if variant not in variants:
        raise ValueError(f"unknown variant {variant!r}; choose one of {list(variants)}")
    if not (isinstance(epsilon, int | float) and epsilon > 0 and np.isfinite(epsilon)):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    if runs < 100 or n_records < 2:
        raise ValueError(f"need runs >= 100 and n_records >= 2, got {runs!r} and {n_records!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
