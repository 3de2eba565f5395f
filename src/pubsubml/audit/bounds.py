"""Lower bounds on ε from membership guesses: one training run, or many.

Two ways to turn an auditor's guesses into a statement "this mechanism is *not* (ε, δ)-DP, at
confidence 1 − β":

* **One run** (Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run",
  NeurIPS 2023, Theorem 3.1 and the numerical procedure of their Appendix D): ``m`` canaries, each
  included independently with probability ½, one training run; the auditor guesses "in" or "out"
  for ``r`` of them (abstaining on the rest) and ``v`` guesses are right.  Under (ε, δ)-DP the
  number of right guesses is dominated by Binomial(r, e^ε/(1+e^ε)) up to a δ term, which gives the
  p-value of :func:`one_run_p_value`; :func:`one_run_epsilon_lower_bound` is the largest ε whose
  p-value is still below β.
* **Many runs** (Jagielski, Ullman & Oprea, NeurIPS 2020; Nasr et al., IEEE S&P 2021): the
  mechanism runs on two neighbouring inputs many times, a threshold test tells them apart, and the
  Clopper–Pearson upper bounds on its false-positive and false-negative rates bound ε through
  ``FPR + e^ε·FNR ≥ 1 − δ`` (and the symmetric inequality); :func:`many_run_epsilon_lower_bound`.

Both are *lower* bounds at the stated confidence: a correct mechanism yields a bound below its
claimed ε with probability at least that confidence; a bound above the claimed ε is evidence of a
bug (or of a δ-event, with probability at most 1 − confidence).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = [
    "clopper_pearson_upper",
    "many_run_epsilon_lower_bound",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
]

_BISECTION_STEPS = 60


def _check_counts(m: int, r: int, v: int) -> None:
    if not all(isinstance(x, int | np.integer) and not isinstance(x, bool) for x in (m, r, v)):
        raise TypeError(f"m, r and v must be integers, got {m!r}, {r!r}, {v!r}")
    if not 0 <= v <= r <= m:
        raise ValueError(
            f"need 0 <= v <= r <= m (right guesses, guesses, canaries), got {v}, {r}, {m}"
        )


def _check_level(name: str, value: float, *, low_open: bool = True) -> None:
    ok = (0 < value < 1) if low_open else (0 <= value < 1)
    if not (isinstance(value, int | float) and ok):
        bounds = "(0, 1)" if low_open else "[0, 1)"
        raise ValueError(f"{name} must be in {bounds}, got {value!r}")


def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """P[at least ``v`` of ``r`` guesses right] for an (ε, δ)-DP mechanism, one run.

    Parameters
    ----------
    m : int
        Canaries, each included independently with probability ½.
    r : int
        Guesses made (the auditor abstains on ``m − r`` canaries).
    v : int
        Right guesses.
    epsilon : float
        ε ≥ 0 of the null hypothesis.
    delta : float
        δ ∈ [0, 1) of the null hypothesis.

    Returns
    -------
    float
        The p-value: at most ``P[Binomial(r, p) ≥ v] + 2mδ·α`` with ``p = e^ε/(1+e^ε)`` and
        ``α = max_{1≤i≤v} P[v−i ≤ Binomial(r, p) < v] / i``, capped at 1.

    References
    ----------
    Steinke, Nasr & Jagielski (NeurIPS 2023), Theorem 3.1 (δ = 0) and Appendix D (δ > 0).

    Examples
    --------
    >>> round(one_run_p_value(100, 10, 10, 0.0, 0.0), 6)  # 10 right coin flips
    0.000977
    """
    _check_counts(m, r, v)
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    _check_level("delta", delta, low_open=False)
    p = 1.0 / (1.0 + math.exp(-epsilon))  # accuracy of ε-DP randomized response
    beta = float(stats.binom.sf(v - 1, r, p))  # P[Binomial(r, p) >= v]
    if delta == 0 or v == 0:
        return min(beta, 1.0)
    # P[v - i <= Binomial(r, p) < v] for i = 1..v, then the largest average over i.
    below = np.cumsum(stats.binom.pmf(np.arange(v - 1, -1, -1), r, p))
    alpha = float(np.max(below / np.arange(1, v + 1)))
    return min(beta + alpha * delta * 2 * m, 1.0)


def one_run_epsilon_lower_bound(
    m: int, r: int, v: int, delta: float, confidence: float = 0.95
) -> float:
    """The largest ε that ``v`` right guesses out of ``r`` reject at ``confidence`` (one run).

    Parameters
    ----------
    m, r, v : int
        Canaries, guesses and right guesses (see :func:`one_run_p_value`).
    delta : float
        δ of the guarantee being audited.
    confidence : float, default=0.95
        The bound holds with this probability over the run and the canaries' coins.

    Returns
    -------
    float
        ε_lb ≥ 0: the mechanism is not (ε, δ)-DP for any ε < ε_lb, at ``confidence``.
        0 when the guesses are no better than chance.

    References
    ----------
    Steinke, Nasr & Jagielski (NeurIPS 2023), Appendix D.

    Examples
    --------
    >>> round(one_run_epsilon_lower_bound(1000, 100, 100, 0.0), 3)  # 100 of 100 right
    3.493
    >>> one_run_epsilon_lower_bound(1000, 100, 50, 1e-5)  # chance level
    0.0
    """
    _check_counts(m, r, v)
    _check_level("delta", delta, low_open=False)
    _check_level("confidence", confidence)
    threshold = 1.0 - confidence
    if one_run_p_value(m, r, v, 0.0, delta) >= threshold:
        return 0.0
    low, high = 0.0, 1.0  # keep p(low) < threshold <= p(high)
    while one_run_p_value(m, r, v, high, delta) < threshold:
        low, high = high, 2 * high
        if high > 1e4:  # only reached with p-values below float precision
            return low
    for _ in range(_BISECTION_STEPS):
        mid = (low + high) / 2
        if one_run_p_value(m, r, v, mid, delta) < threshold:
            low = mid
        else:
            high = mid
    return low


def clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """One-sided Clopper–Pearson upper bound on a rate from ``k`` events in ``n`` trials.

    The true rate is below the returned value with probability at least ``1 − alpha``.

    Examples
    --------
    >>> round(clopper_pearson_upper(0, 100, 0.05), 4)
    0.0295
    """
    _check_counts(n, n, k)
    _check_level("alpha", alpha)
    if k >= n:
        return 1.0
    return float(stats.beta.ppf(1 - alpha, k + 1, n - k))


def many_run_epsilon_lower_bound(
    false_positives: int,
    negatives: int,
    false_negatives: int,
    positives: int,
    delta: float,
    confidence: float = 0.95,
) -> float:
    """ε lower bound from a threshold test run on many independent outputs.

    Parameters
    ----------
    false_positives, negatives : int
        Runs *without* the canary that the test called "with", out of ``negatives`` such runs.
    false_negatives, positives : int
        Runs *with* the canary that the test called "without", out of ``positives``.
    delta : float
        δ of the guarantee being audited.
    confidence : float, default=0.95
        Joint confidence of the two Clopper–Pearson bounds (each at ``1 − (1 − confidence)/2``).

    Returns
    -------
    float
        ``max(log((1 − δ − FPR⁺)/FNR⁺), log((1 − δ − FNR⁺)/FPR⁺), 0)`` with ``⁺`` the upper
        confidence bounds: an (ε, δ)-DP mechanism has ``FPR + e^ε·FNR ≥ 1 − δ`` for every test.

    References
    ----------
    Kairouz, Oh & Viswanath (2015), Theorem 2.1 (the hypothesis-testing view of DP); Jagielski,
    Ullman & Oprea (NeurIPS 2020), §3; Nasr et al. (IEEE S&P 2021), §3.

    Examples
    --------
    >>> round(many_run_epsilon_lower_bound(0, 1000, 0, 1000, 1e-5), 3)  # a perfect test
    5.601
    """
    _check_counts(negatives, negatives, false_positives)
    _check_counts(positives, positives, false_negatives)
    _check_level("delta", delta, low_open=False)
    _check_level("confidence", confidence)
    if negatives == 0 or positives == 0:
        raise ValueError("need at least one run with and one run without the canary")
    alpha = (1.0 - confidence) / 2
    fpr = clopper_pearson_upper(false_positives, negatives, alpha)
    fnr = clopper_pearson_upper(false_negatives, positives, alpha)
    bounds = [0.0]
    for a, b in ((fpr, fnr), (fnr, fpr)):
        if b > 0 and 1 - delta - a > 0:
            bounds.append(math.log((1 - delta - a) / b))
    return max(bounds)
