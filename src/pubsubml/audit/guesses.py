"""From canary scores to guesses to an ε lower bound (the one-run audit's last step).

The auditor ranks the ``m`` canaries by a membership score (higher means "more likely included"),
guesses "in" for the ``r/2`` highest and "out" for the ``r/2`` lowest, and abstains on the rest
(Steinke, Nasr & Jagielski, NeurIPS 2023, §3, "abstentions").  Trying several ``r`` after seeing the
scores would overstate the confidence, so every ``r`` of a fixed, public list is tried and the
confidence is split between them (Bonferroni): the reported bound holds at the stated confidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pubsubml.audit.bounds import one_run_epsilon_lower_bound

__all__ = ["GUESS_FRACTIONS", "OneRunBound", "draw_inclusion", "one_run_bound"]

#: Fractions of the canaries guessed on; fixed before any score is seen.
GUESS_FRACTIONS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


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
