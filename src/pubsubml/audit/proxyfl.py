"""One-run audit of ProxyFL's DP proxies with white-box Dirac gradient canaries.

What is audited is a ProxyFL client's local training as
:class:`~pubsubml.methods.proxyfl.local.ClientCohort` runs it (proxyfl.txt §3.2–3.3): Poisson
sampling at ``q = B/n``, per-sample clipping to C, N(0, σ²C²) added to the sum, division by
``q·n``, its stacked Adam, and the client's accountant (one subsampled-Gaussian event per round,
σ calibrated to (ε, δ) for the rounds run).  Canaries enter through
:meth:`~pubsubml.methods.proxyfl.local.ClientCohort.attach_audit`: canary ``i`` is included with
probability ½ and is a record whose per-sample gradient is ``10·C`` on a first-layer weight of the
proxy on an input column that is zero in every real row; the auditor sees every released noisy
gradient (DP-SGD's guarantee covers every iterate) and scores the canaries with
:func:`~pubsubml.audit.guesses.dirac_scores`.

Variants (a negative control keeps the correct mechanism's claim):

* ``"correct"``: β = 0 (the proxy trains on its own loss; DP-SGD, a guarantee);
* ``"noise-x0.1"``: σ/10; ``"clip-off"``: C → 10⁶·C with the noise kept at σ·C;
* ``"paper-accounting"``: the paper's β = 0.5 with a private model, whose KL target is trained on
  the same rows without noise.  Its accounted ε is not a guarantee (module notes of
  :mod:`~pubsubml.methods.proxyfl.local`), but the flaw is a dependence of *other* records'
  gradients on the data, which gradient canaries bypass; this row measures what such an audit sees
  of it (see docs/audit.md).

The audited proxy is an MLP with hidden sizes (100, 50) rather than the paper's (200, 200): the
code path is the same and the canaries' gradients stay within memory.

References
----------
proxyfl.txt §3.2 (Eq. 5–7), §3.3, §4.1; Steinke, Nasr & Jagielski, NeurIPS 2023, §6.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import Tensor

from pubsubml.audit.dirac import (
    broken_run,
    check_count,
    dirac_task,
    gaussian_claim,
    one_run_result,
    run_details,
)
from pubsubml.audit.dpsgd import check_audit
from pubsubml.audit.result import AuditResult
from pubsubml.methods.proxyfl.dml import DMLConfig, mlp_factory
from pubsubml.methods.proxyfl.local import ClientCohort
from pubsubml.privacy.calibration import calibrate_noise

__all__ = ["PROXYFL_VARIANTS", "audit_proxyfl"]

PROXYFL_VARIANTS: tuple[str, ...] = ("correct", "noise-x0.1", "clip-off", "paper-accounting")
_HIDDEN = (100, 50)


def audit_proxyfl(
    *,
    epsilon: float = 1.0,
    delta: float = 1e-5,
    variant: str = "correct",
    canaries: int = 5000,
    rows: int = 5000,
    rounds: int = 10,
    confidence: float = 0.95,
    seed: int = 0,
) -> AuditResult:
    """One-run audit of a ProxyFL client's DP proxy (module docstring).

    Parameters
    ----------
    epsilon, delta : float
        The client's target after ``rounds`` rounds; σ is calibrated to it.
    variant : {"correct", "noise-x0.1", "clip-off", "paper-accounting"}, default="correct"
    canaries : int, default=5000
        ``m`` Dirac canaries.
    rows : int, default=5000
        The client's real records (a public synthetic task, 10 features, 2 classes).
    rounds : int, default=10
        Local rounds (one epoch of ``round(1/q)`` steps each, the paper's batch of 250): 200
        steps at q = 0.05, so an included canary goes unsampled with probability 0.95²⁰⁰ < 10⁻⁴
        (an unseen canary caps what any attack can show).
    confidence : float, default=0.95
    seed : int, default=0

    Returns
    -------
    AuditResult

    Raises
    ------
    ValueError
        A parameter out of range or an unknown variant.

    Examples
    --------
    >>> r = audit_proxyfl(epsilon=1.0, canaries=200, rows=500, rounds=2)
    >>> r.lower_bound <= r.claimed_epsilon
    True
    """
    check_audit(epsilon, variant, canaries, delta, confidence, rows, PROXYFL_VARIANTS)
    check_count("rounds", rounds, 1)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    task = dirac_task([rows], canaries, _HIDDEN[0], rng)
    X, y = task.splits[0]
    shipped = DMLConfig(beta=0.5 if variant == "paper-accounting" else 0.0, delta=delta)
    q = shipped.dpsgd().sample_rate_for(rows)
    steps = shipped.dpsgd().steps_for(rows) * rounds
    sigma = calibrate_noise(epsilon, delta, q, steps)
    C = shipped.max_grad_norm
    cohort = _audited_cohort(X, y, shipped, variant, sigma, seed)
    dirac = task.gradients(cohort.flat_proxies().shape[1], C)
    releases: list[Tensor] = []
    cohort.attach_audit([dirac], lambda grad: releases.append(grad[0, task.coords].clone()))
    for _ in range(rounds):
        cohort.train_round()
    return one_run_result(
        "proxyfl-proxy",
        variant,
        claimed_epsilon=gaussian_claim(sigma, q, steps, delta),
        delta=delta,
        releases=torch.stack(releases).double().numpy() * q * rows / C,  # ÷ q·n by the cohort
        q=q,
        sigma=sigma,
        included=task.included,
        confidence=confidence,
        start=start,
        details=run_details("cohort", steps, q, sigma, rows, guarantee=cohort.privacy_guarantee),
    )


def _audited_cohort(
    X: Tensor, y: Tensor, shipped: DMLConfig, variant: str, sigma: float, seed: int
) -> ClientCohort:
    """One client training its proxy with the variant's (σ, C); the paper's β = 0.5 with a
    private model for ``"paper-accounting"``."""
    run_sigma, run_clip = broken_run(variant, sigma, shipped.max_grad_norm)
    config = DMLConfig(
        beta=shipped.beta, delta=shipped.delta, noise_multiplier=run_sigma, max_grad_norm=run_clip
    )
    return ClientCohort(
        client_ids=[0],
        data=[(X, y)],
        n_classes=2,
        proxy_hidden=_HIDDEN,
        private_factories=[mlp_factory(_HIDDEN)] if variant == "paper-accounting" else None,
        config=config,
        seed=seed,
    )
