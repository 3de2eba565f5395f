"""Noise calibration: the smallest DP-SGD noise multiplier that meets an (ε, δ) target.

:func:`calibrate_noise` solves ε(σ) = ε* for the Poisson-subsampled Gaussian mechanism run ``steps``
times, where ε(σ) is exactly what :func:`~pubsubml.privacy.accountants.release.release_epsilon` will report
for the run, so training with the returned σ never overshoots the budget.

The search works in log-log space, where ε(σ) is nearly linear, and spends the expensive accountant
evaluations last:

1. an RDP bound over integer orders (closed form, milliseconds) gives an upper σ;
2. PLDs on grids 100× then 10× coarser than the reporting one (cheap, pessimistic) bring σ within
   about 1% of the answer;
3. a safeguarded secant on the reporting accountant itself finishes, usually in one or two
   evaluations.  It accepts only a σ whose reported ε is ≤ ε*, and stops as soon as that ε is
   within 0.3% of ε* *or* σ is pinned by a bracket 0.2% wide (a feasible σ and an infeasible
   σ·e^-0.002).  Where ε is steep in σ (|d ln ε / d ln σ| > 1.5), or steps with the PLD's
   discretisation, the bracket stops first and ε may sit further below ε* (0.6% has been seen);
   it is never above it.

References
----------
pubsub-ml.txt §3.1 (Definition 1) and Algorithm 1 (each publisher trains an (ε^p, δ^p)-DP model).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.accountants.composition import group_events
from pubsubml.privacy.accountants.parameters import check_delta, check_epsilon
from pubsubml.privacy.accountants.pld import PLD_RESOLUTION, nice_interval, pld_epsilon
from pubsubml.privacy.accountants.rdp import INTEGER_ORDERS, rdp_epsilon
from pubsubml.privacy.accountants.release import release_epsilon
from pubsubml.privacy.events import DPEvent

__all__ = ["calibrate_noise"]

# Model stages per backend: (grid step / reporting grid step, bracketing factor, gap tolerance).
_MODEL_LEVELS: dict[str, tuple[tuple[float, float, float], ...]] = {
    "pld": ((100.0, 1.25, 1e-2), (10.0, 1.05, 1e-3)),
    "rdp": (),
}
_SIGMA_RTOL = 2e-3  # stop when the feasible/infeasible bracket is this tight (relative σ)
_EPS_RTOL = 3e-3  # ... or when the feasible σ's ε is within this of the target
_AIM = 1e-3  # aim the secant this far below the target so that its step usually lands feasible
_MAX_FINE = 12
_SIGMA_MIN, _SIGMA_MAX = 1e-3, 1e6


@dataclass(frozen=True)
class _Run:
    """The DP-SGD run σ is calibrated for, and its target ε* at δ."""

    target: float
    delta: float
    sample_rate: float
    steps: int

    def event(self, sigma: float) -> DPEvent:
        """The run's subsampled-Gaussian event at noise multiplier σ."""
        return DPEvent(
            mechanism="subsampled_gaussian",
            noise_multiplier=sigma,
            sample_rate=self.sample_rate,
            count=self.steps,
        )


def _gap(eps: float, target: float) -> float:
    """ln(ε / ε*): the function whose root is sought (≤ 0 means within budget)."""
    if eps <= 0.0:
        return -math.inf
    return math.log(eps / target) if math.isfinite(eps) else math.inf


def _bracket(
    gap: Callable[[float], float], sigma: float, factor: float = 2.0
) -> tuple[float, float, float, float]:
    """(lo, g(lo), hi, g(hi)) with g(lo) > 0 >= g(hi), by geometric steps of ``factor`` from σ."""
    g = gap(sigma)
    lo, g_lo, hi, g_hi = sigma, g, sigma, g
    while g_hi > 0.0:
        lo, g_lo, hi = hi, g_hi, hi * factor
        if hi > _SIGMA_MAX:
            raise InvalidPrivacyParameterError("no noise multiplier below 1e6 meets the target")
        g_hi = gap(hi)
    while g_lo <= 0.0:
        hi, g_hi, lo = lo, g_lo, lo / factor
        if lo < _SIGMA_MIN:
            return lo, math.inf, hi, g_hi
        g_lo = gap(lo)
    return lo, g_lo, hi, g_hi


def _solve(
    gap: Callable[[float], float],
    bracket: tuple[float, float, float, float],
    rtol: float,
    gtol: float,
) -> tuple[float, float]:
    """Illinois regula falsi in (ln σ, g) until the bracket is ``rtol`` wide or the feasible end
    ``hi`` has -gtol <= g(hi) <= 0; returns ``hi`` and the slope d g / d ln σ (< 0) there."""
    lo, g_lo, hi, g_hi = bracket
    x_lo, x_hi = math.log(lo), math.log(hi)
    w_lo, w_hi = g_lo, g_hi  # Illinois-weighted copies of the true end values g_lo, g_hi
    side = 0
    for _ in range(60):
        if x_hi - x_lo <= rtol or -gtol <= g_hi <= 0.0:
            break
        if math.isfinite(w_lo) and math.isfinite(w_hi) and w_lo != w_hi:
            x = x_hi - w_hi * (x_hi - x_lo) / (w_hi - w_lo)
            x = min(max(x, x_lo + 0.01 * (x_hi - x_lo)), x_hi - 0.01 * (x_hi - x_lo))
        else:
            x = 0.5 * (x_lo + x_hi)
        g = gap(math.exp(x))
        if g > 0.0:
            x_lo, g_lo, w_lo = x, g, g
            w_hi = w_hi * 0.5 if side == -1 else w_hi
            side = -1
        else:
            x_hi, g_hi, w_hi = x, g, g
            w_lo = w_lo * 0.5 if side == 1 else w_lo
            side = 1
    finite = math.isfinite(g_lo) and math.isfinite(g_hi) and x_hi > x_lo
    slope = (g_hi - g_lo) / (x_hi - x_lo) if finite else -1.0
    return math.exp(x_hi), min(slope, -1e-3)


def _finish(gap: Callable[[float], float], sigma: float, slope: float, upper: float) -> float:
    """Safeguarded secant on the reporting accountant; returns a σ whose gap is ≤ 0.

    ``slope`` (d ln ε / d ln σ, < 0) comes from the coarse model; ``upper`` is a σ believed feasible.
    """
    aim = math.log1p(-_AIM)
    accept = math.log1p(-_EPS_RTOL)
    feas: tuple[float, float] | None = None  # (x, g) with g <= 0, smallest x seen
    infeas: tuple[float, float] | None = None  # (x, g) with g > 0, largest x seen
    last: tuple[float, float] | None = None
    x = math.log(sigma)
    for _ in range(_MAX_FINE):
        g = gap(math.exp(x))
        if g <= 0.0:
            feas = (x, g) if feas is None or x < feas[0] else feas
        elif infeas is None or x > infeas[0]:
            infeas = (x, g)
        if feas is not None and (
            feas[1] >= accept or (infeas is not None and feas[0] - infeas[0] <= _SIGMA_RTOL)
        ):
            return math.exp(feas[0])
        if last is not None and math.isfinite(g) and math.isfinite(last[1]) and x != last[0]:
            slope = min((g - last[1]) / (x - last[0]), -1e-3)
        last = (x, g)
        step = (aim - g) / slope if math.isfinite(g) else math.copysign(0.1, g)
        x_new = x + step
        if feas is not None and infeas is not None:  # keep strictly inside the bracket
            lo, hi = infeas[0], feas[0]
            if not lo < x_new < hi:
                x_new = 0.5 * (lo + hi)
        x = x_new
    if feas is not None:
        return math.exp(feas[0])
    sigma_up = max(upper, math.exp(x))
    while gap(sigma_up) > 0.0:  # last resort: walk up until feasible (ε → 0 as σ → ∞)
        sigma_up *= 1.25
        if sigma_up > _SIGMA_MAX:
            raise InvalidPrivacyParameterError("no noise multiplier below 1e6 meets the target")
    return sigma_up


def _check_arguments(
    target_epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str
) -> None:
    """Raise :class:`InvalidPrivacyParameterError` on arguments :func:`calibrate_noise` refuses."""
    check_epsilon(target_epsilon)
    check_delta(delta)
    if isinstance(sample_rate, bool) or not 0.0 < sample_rate <= 1.0:
        raise InvalidPrivacyParameterError(f"sample_rate must be in (0, 1], got {sample_rate}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise InvalidPrivacyParameterError(f"steps must be an int >= 1, got {steps!r}")
    if accountant not in _MODEL_LEVELS:
        raise InvalidPrivacyParameterError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")


def _rdp_upper_sigma(run: _Run) -> tuple[float, float]:
    """Stage 1: σ and the slope d ln ε / d ln σ by RDP over integer orders (closed form, an
    upper bound of both reporting accountants, so σ is feasible for either)."""

    def rdp_int_gap(sigma: float) -> float:
        return _gap(rdp_epsilon((run.event(sigma),), run.delta, INTEGER_ORDERS), run.target)

    return _solve(rdp_int_gap, _bracket(rdp_int_gap, 1.0), rtol=1e-3, gtol=1e-2)


def _refine_on_coarse_plds(
    run: _Run, sigma: float, slope: float, accountant: str
) -> tuple[float, float]:
    """Stage 2: σ and slope on model PLDs, on grids 100× then 10× coarser than the reporting one
    (cheap, pessimistic); unchanged for the RDP accountant, which has no model stage."""
    for factor, step_factor, gtol in _MODEL_LEVELS[accountant]:
        grid = nice_interval(run.target, PLD_RESOLUTION * factor)

        def model_gap(sigma: float, grid: float = grid) -> float:
            events = group_events([run.event(sigma)])
            return _gap(pld_epsilon(events, run.delta, grid), run.target)

        bracket = _bracket(model_gap, sigma, step_factor)
        sigma, slope = _solve(model_gap, bracket, rtol=1e-3, gtol=gtol)
    return sigma, slope


def calibrate_noise(
    target_epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    accountant: Literal["pld", "rdp"] = "pld",
) -> float:
    """The smallest noise multiplier σ whose ε after ``steps`` DP-SGD steps is ≤ ``target_epsilon``.

    Parameters
    ----------
    target_epsilon : float
        ε* > 0.
    delta : float
        δ in (0, 1).
    sample_rate : float
        Poisson sampling rate q in (0, 1] (expected batch size / number of records).
    steps : int
        Number of DP-SGD steps (epochs / q for Poisson sampling).
    accountant : {"pld", "rdp"}, default="pld"
        The backend that will report ε for the run.

    Returns
    -------
    float
        σ with ``release_epsilon([event], delta, accountant) <= target_epsilon`` for the
        subsampled-Gaussian event of the run (checked before returning).  Either the reported ε
        at σ is within 0.3% below the target, or σ·e^-0.002 (0.2% less noise) exceeds the
        target; in both cases σ is within about 0.3% of the smallest feasible σ (ε falls at
        least as fast as 1/σ), and 1% less noise exceeds the target.  With the second stop ε
        itself can be more than 0.3% below the target (steep ε(σ), PLD steps).

    Raises
    ------
    InvalidPrivacyParameterError
        On ε* ≤ 0, δ ∉ (0, 1), q ∉ (0, 1], steps < 1, or a target no σ ≤ 1e6 can meet.

    Notes
    -----
    The returned σ gives ε ≤ ε* only for the run described: Poisson sampling at rate q, exactly
    ``steps`` steps, per-sample clipping to C and noise N(0, σ²C²) on the sum.  Shuffled fixed-size
    batches are not covered by this accounting.

    Examples
    --------
    >>> sigma = calibrate_noise(1.0, 1e-5, sample_rate=0.2, steps=150)
    >>> e = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=0.2, count=150)
    >>> release_epsilon([e], 1e-5) <= 1.0
    True
    """
    _check_arguments(target_epsilon, delta, sample_rate, steps, accountant)
    run = _Run(float(target_epsilon), delta, float(sample_rate), steps)
    sigma_up, slope = _rdp_upper_sigma(run)
    sigma, slope = _refine_on_coarse_plds(run, sigma_up, slope, accountant)

    def reported_gap(sigma: float) -> float:
        return _gap(release_epsilon([run.event(sigma)], run.delta, accountant), run.target)

    return _finish(reported_gap, sigma, slope, upper=sigma_up)
