"""Many-run audits of the DP-SGD engine: one Dirac canary, thousands of independent runs at once.

A one-run audit cannot refute a claim much above ε ≈ 6.4 at δ = 10⁻⁵: its δ term grows with the
number of canaries (Steinke, Nasr & Jagielski, NeurIPS 2023, Appendix D; see
:mod:`~pubsubml.audit.bounds`).  The classic many-run audit has no such cap, only a price: a perfect
test on ``N`` runs per side reaches about ``log(N / 3.7)``, so ε = 8 takes some 48,000 runs per
side (:func:`~pubsubml.audit.guesses.runs_to_refute`).  They are affordable here because the
engine's stacked path (:func:`~pubsubml.privacy.dpsgd.stacked.train_dp_stacked`, what the learners'
``fit`` runs) trains thousands of independent sites in one batched computation, each with its own
generator for sampling and noise: every site is one run.

Each run trains the learner's network, its DP-SGD defaults and σ calibrated as ``fit`` calibrates
them, on the same ``rows`` real records plus one slot: a Dirac canary (gradient ``10·C`` on a
first-layer weight of an input column that is zero in every real row) in the runs *with* the
canary, a record with zero gradient in the runs without.  Both data sets have ``rows + 1``
records (the same sample rate and steps); their released gradient sums differ exactly by the
canary's clipped gradient, as adding or removing it would make them differ.  The white-box score
of a run is :func:`~pubsubml.audit.guesses.dirac_scores` of its releases on the canary's
coordinate, and :func:`~pubsubml.audit.guesses.many_run_bound` turns the scores of both sides into
a bound.

References
----------
Jagielski, Ullman & Oprea, NeurIPS 2020; Nasr et al., IEEE S&P 2021 (white-box many-run audits of
DP-SGD with gradient canaries); Abadi et al., CCS 2016.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import Tensor

from pubsubml.audit.dirac import (
    DIRAC_NORM,
    REAL_FEATURES,
    check_count,
    gaussian_claim,
    mlp_parameter_count,
    padded_rows,
    run_details,
)
from pubsubml.audit.dpsgd import Learner, broken_config, check_audit, learner_estimator
from pubsubml.audit.guesses import dirac_scores, many_run_bound, many_run_result, runs_to_refute
from pubsubml.audit.result import AuditResult
from pubsubml.learners.dpsgd_base import _DPSGDBase
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, init_mlp, train_dp_stacked

__all__ = ["MIN_RUNS", "audit_dpsgd_many_run"]

#: Runs per side below which no many-run audit is worth its Clopper–Pearson bounds.
MIN_RUNS = 2000
_CHUNK = 4096  # sites per batched computation (memory stays in tens of MB for the linear model)


def _releases(
    est: _DPSGDBase,
    sizes: tuple[int, ...],
    X: Tensor,
    y: Tensor,
    canaries: list[Tensor | None],
    config: DPSGDConfig,
    seeds: list[int],
) -> tuple[np.ndarray, float]:
    """Train one site per canary slot; the releases (T, S) on coordinate W0[0, 10], and q."""
    rows: list[Tensor] = []

    def hook(_params: Tensor, grad: Tensor) -> None:
        rows.append(grad[:, REAL_FEATURES].clone())

    init = init_mlp(sizes, est._activation_name(), torch.Generator().manual_seed(seeds[0]))
    S = len(canaries)
    results = train_dp_stacked(
        MLPStack.from_modules([init] * S),
        [X] * S,
        [y] * S,
        configs=[config] * S,
        generators=[torch.Generator().manual_seed(s) for s in seeds],
        loss=est._loss,
        grad_hook=hook,
        canary_gradients=canaries,
    )
    return torch.stack(rows).double().numpy(), results[0].sample_rate


def audit_dpsgd_many_run(
    learner: Learner = "linear",
    *,
    epsilon: float = 8.0,
    delta: float = 1e-5,
    variant: str = "correct",
    runs: int | None = None,
    rows: int = 100,
    confidence: float = 0.95,
    seed: int = 0,
) -> AuditResult:
    """Many-run white-box audit of a DP-SGD learner with one Dirac canary (module docstring).

    Parameters
    ----------
    learner : {"mlp", "linear"}, default="linear"
    epsilon, delta : float
        The privacy target; the claim is the accountant's ε for what ran.
    variant : {"correct", "noise-off", "noise-x0.1", "clip-off"}, default="correct"
        As in :func:`~pubsubml.audit.dpsgd.audit_dpsgd`; a negative control keeps the claim.
    runs : int, optional
        Runs per data set, default :func:`~pubsubml.audit.guesses.runs_to_refute` of ``epsilon``
        (at least :data:`MIN_RUNS`).
    rows : int, default=100
        Real records of every run.
    confidence : float, default=0.95
    seed : int, default=0

    Returns
    -------
    AuditResult
        ``method="many-run"``, ``canary="gradient"``, ``canaries`` the runs per data set.

    Raises
    ------
    ValueError
        A parameter out of range or an unknown variant.

    Examples
    --------
    >>> r = audit_dpsgd_many_run(epsilon=1.0, runs=200, rows=50)
    >>> r.lower_bound <= r.claimed_epsilon
    True
    """
    n_runs = runs_to_refute(epsilon, MIN_RUNS) if runs is None else runs
    check_audit(epsilon, variant, 2, delta, confidence, rows)
    check_count("runs", n_runs, 100)
    if learner not in ("mlp", "linear"):
        raise ValueError("learner must be 'mlp' or 'linear'")
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    est = learner_estimator(learner, epsilon, delta, seed)
    width = REAL_FEATURES + 1
    X, y = padded_rows(rows, width, rng)
    config, _ = est._config(rows + 1, width)  # σ for rows + 1 records: the claim
    scores, with_canary, q = _run_scores(est, X, y, config, variant, n_runs, seed)
    steps = config.steps_for(rows + 1)
    return many_run_result(
        f"dpsgd-{learner}",
        variant,
        many_run_bound(scores[~with_canary], scores[with_canary], confidence),
        claimed_epsilon=gaussian_claim(config.noise_multiplier, q, steps, delta),
        delta=delta,
        confidence=confidence,
        canary="gradient",
        runs=n_runs,
        start=start,
        details=run_details("stacked", steps, q, config.noise_multiplier, rows),
    )


def _run_scores(
    est: _DPSGDBase,
    X: Tensor,
    y: Tensor,
    config: DPSGDConfig,
    variant: str,
    n_runs: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Train ``n_runs`` runs with the canary and as many without, alternating, in chunks.

    Returns every run's white-box score, which runs had the canary, and the sample rate q.
    """
    width = X.shape[1]
    run_config = broken_config(config, variant)
    sizes = (width, *(int(h) for h in est._hidden()), 2)
    n_params = mlp_parameter_count(sizes)
    dirac, blank = torch.zeros(1, n_params), torch.zeros(1, n_params)
    dirac[0, REAL_FEATURES] = DIRAC_NORM * config.max_grad_norm  # W0[0, 10]
    with_canary = np.arange(2 * n_runs) % 2 == 0
    scores = np.empty(2 * n_runs)
    q = 1.0
    for lo in range(0, 2 * n_runs, _CHUNK):
        part = range(lo, min(lo + _CHUNK, 2 * n_runs))
        releases, q = _releases(
            est,
            sizes,
            X,
            y,
            [dirac if with_canary[s] else blank for s in part],
            run_config,
            [seed * 100_000_007 + s for s in part],
        )
        y_units = releases * q * (len(X) + 1) / config.max_grad_norm
        scores[lo : part.stop] = dirac_scores(y_units, q, config.noise_multiplier)
    return scores, with_canary, q
