"""One-run audit of the general model of FL with private domain experts (Dirac gradient canaries).

What is audited is a user's side of :class:`~pubsubml.methods.domain_experts.federation.DomainExpertsFL`
(fl-domain-experts.txt §3.2, Algorithm 1 or 2): each round one Poisson minibatch of its rows,
the per-sample gradients of the general model M_G clipped to C and summed, N(0, σ²C²) added, the
message g_G / L sent (:func:`~pubsubml.methods.domain_experts.users.user_step`), the private
expert and the gate stepped without noise; the server's FedSGD step; and the user's accountant
(:class:`~pubsubml.methods.federated.dp.LocalDP`, one subsampled-Gaussian step per round, σ
calibrated to (ε, δ) for the rounds).  The estimator's defaults are kept: a linear M_G, 500
rounds, batches of L = 50.

Canary ``i``, included with probability ½, is a record whose per-sample gradient is ``10·C`` on
one weight of M_G on an input column that is zero in every real row (through the ``canaries`` of
:class:`~pubsubml.methods.domain_experts.users.Users`); the auditor reads the messages the user
sends (``record_messages``) and scores the canaries with
:func:`~pubsubml.audit.guesses.dirac_scores`.

Variants (a negative control keeps the correct mechanism's claim): ``"correct"`` (Algorithm 2,
a guarantee), ``"paper-accounting"`` (Algorithm 1, whose clipped gradients carry the gate and the
private expert, trained on all of the user's rows without noise: not a guarantee, but a flaw
gradient canaries bypass), ``"noise-off"``, ``"noise-x0.1"`` and ``"clip-off"``.

References
----------
fl-domain-experts.txt §3.1–3.2.1; Steinke, Nasr & Jagielski, NeurIPS 2023, §6.
"""

from __future__ import annotations

import copy
import functools
import time

import numpy as np
import torch
from torch import nn

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
from pubsubml.methods.domain_experts.users import Users, local_round
from pubsubml.methods.federated.dp import LocalDP, noise_multipliers
from pubsubml.methods.federated.loop import LocalTraining, run_federation
from pubsubml.methods.federated.strategies import FedSGD
from pubsubml.privacy.dpsgd import CanaryGradients, init_mlp

__all__ = ["EXPERTS_VARIANTS", "audit_domain_experts"]

EXPERTS_VARIANTS: tuple[str, ...] = (
    "correct",
    "noise-off",
    "noise-x0.1",
    "clip-off",
    "paper-accounting",
)
# DomainExpertsFL's defaults: a linear M_G, 500 rounds, L = 50, lr 0.1 (SGD), 0.01 and 0.05.
_ROUNDS, _BATCH, _LR_GENERAL, _LR_PRIVATE, _LR_GATE = 500, 50, 0.1, 0.01, 0.05


def audit_domain_experts(
    *,
    epsilon: float = 1.0,
    delta: float = 1e-5,
    variant: str = "correct",
    canaries: int = 5000,
    rows: int = 1000,
    rounds: int = _ROUNDS,
    confidence: float = 0.95,
    seed: int = 0,
) -> AuditResult:
    """One-run audit of a domain-experts user's messages (module docstring).

    Parameters
    ----------
    epsilon, delta : float
        The user's target after ``rounds`` rounds; σ is calibrated to it.
    variant : {"correct", "noise-off", "noise-x0.1", "clip-off", "paper-accounting"}
    canaries : int, default=5000
    rows : int, default=1000
        The user's expert rows (its gate gets another ``rows // 2``): q = 50 / 1000, so over 500
        rounds an included canary goes unsampled with probability 0.95⁵⁰⁰ < 10⁻¹¹.
    rounds : int, default=500
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
    >>> r = audit_domain_experts(epsilon=1.0, canaries=100, rows=200, rounds=50)
    >>> r.lower_bound <= r.claimed_epsilon
    True
    """
    check_audit(epsilon, variant, canaries, delta, confidence, rows, EXPERTS_VARIANTS)
    check_count("rounds", rounds, 1)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    n_classes = 2  # the canaries sit on W[o, c] of the linear M_G
    task = dirac_task((rows, max(2, rows // 2)), canaries, n_classes, rng)
    q = min(1.0, _BATCH / rows)
    sigma = noise_multipliers(epsilon, delta, [q], [rounds], "pld")[0]
    C = 1.0
    general = init_mlp((task.width, n_classes), "tanh", torch.Generator().manual_seed(seed))
    dirac = task.gradients(sum(p.numel() for p in general.parameters()), C)
    users = _audited_user(
        task.splits, general, q, broken_run(variant, sigma, C), dirac, variant, seed
    )
    _run_rounds(users, general, rounds, rows, seed)
    releases = torch.stack(
        [torch.cat([g.reshape(-1) for g in msg["gradient"]])[task.coords] for msg in users.messages]
    )
    return one_run_result(
        "domain-experts-general",
        variant,
        claimed_epsilon=gaussian_claim(sigma, q, rounds, delta),
        delta=delta,
        releases=releases.double().numpy() * q * rows / C,  # the message is g_G / L, L = q·n
        q=q,
        sigma=sigma,
        included=task.included,
        confidence=confidence,
        start=start,
        details=run_details(f"algorithm-{users.algorithm}", rounds, q, sigma, rows),
    )


def _audited_user(
    splits: list[tuple[torch.Tensor, torch.Tensor]],
    general: nn.Sequential,
    q: float,
    run: tuple[float, float],
    dirac: torch.Tensor,
    variant: str,
    seed: int,
) -> Users:
    """The one audited user: its expert rows and gate rows, a private expert copied from M_G, a
    zero gate, the run's (σ, C), its Dirac canaries, and every message it sends recorded;
    Algorithm 1 for ``"paper-accounting"``, else Algorithm 2."""
    sigma, clip = run
    private = copy.deepcopy(general)
    gate = nn.Linear(splits[0][0].shape[1], 1)
    with torch.no_grad():
        gate.weight.zero_()
        gate.bias.zero_()
    return Users(
        train=[splits[0]],
        held=[splits[1]],
        privates=[private],
        gates=[gate],
        private_opts=[torch.optim.Adam(private.parameters(), lr=_LR_PRIVATE)],
        gate_opts=[torch.optim.Adam(gate.parameters(), lr=_LR_GATE)],
        rates=[q],
        sigmas=np.array([sigma]),
        generators=[torch.Generator().manual_seed(seed * 1_000_003 + 1)],
        messages=[],
        algorithm=1 if variant == "paper-accounting" else 2,
        task="classification",
        dp=True,
        max_grad_norm=clip,
        record_messages=True,
        canaries=[CanaryGradients([dirac], torch.tensor([clip]))],
    )


def _run_rounds(users: Users, general: nn.Sequential, rounds: int, rows: int, seed: int) -> None:
    """The federation of the one user: its DP rounds and the server's FedSGD steps on M_G."""
    server = FedSGD(client_fraction=1.0, optimizer="sgd", lr=_LR_GENERAL)
    training: LocalTraining = LocalDP(functools.partial(local_round, users, general), 1, "pld")
    schedule = server.sample(1, rounds, seed)
    run_federation(list(general.parameters()), schedule, training, server, [rows])
