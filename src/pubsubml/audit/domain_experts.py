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
import math
import time

import numpy as np
import torch
from torch import nn

from pubsubml.audit.dirac import (
    REAL_FEATURES,
    broken_run,
    check_count,
    dirac_coordinates,
    dirac_rows,
    one_run_result,
    padded_rows,
)
from pubsubml.audit.dpsgd import check_audit
from pubsubml.audit.guesses import draw_inclusion
from pubsubml.audit.result import AuditResult
from pubsubml.methods.domain_experts.users import Users, local_round
from pubsubml.methods.federated.dp import LocalDP, noise_multipliers
from pubsubml.methods.federated.loop import LocalTraining, run_federation
from pubsubml.methods.federated.strategies import FedSGD
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.dpsgd import CanaryGradients, init_mlp
from pubsubml.privacy.events import DPEvent

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
    n_classes = 2
    width = REAL_FEATURES + math.ceil(canaries / n_classes)
    splits = [padded_rows(n, width, rng) for n in (rows, max(2, rows // 2))]
    included = draw_inclusion(canaries, rng)
    q = min(1.0, _BATCH / rows)
    sigma = noise_multipliers(epsilon, delta, [q], [rounds], "pld")[0]
    C = 1.0
    run_sigma, run_clip = broken_run(variant, sigma, C)
    general = init_mlp((width, n_classes), "tanh", torch.Generator().manual_seed(seed))
    private = copy.deepcopy(general)
    gate = nn.Linear(width, 1)
    with torch.no_grad():
        gate.weight.zero_()
        gate.bias.zero_()
    coords = dirac_coordinates(canaries, n_classes, width)  # W[o, c] of the linear M_G
    dirac = dirac_rows(coords, included, sum(p.numel() for p in general.parameters()), C)
    users = Users(
        train=[splits[0]],
        held=[splits[1]],
        privates=[private],
        gates=[gate],
        private_opts=[torch.optim.Adam(private.parameters(), lr=_LR_PRIVATE)],
        gate_opts=[torch.optim.Adam(gate.parameters(), lr=_LR_GATE)],
        rates=[q],
        sigmas=np.array([run_sigma]),
        generators=[torch.Generator().manual_seed(seed * 1_000_003 + 1)],
        messages=[],
        algorithm=1 if variant == "paper-accounting" else 2,
        task="classification",
        dp=True,
        max_grad_norm=run_clip,
        record_messages=True,
        canaries=[CanaryGradients([dirac], torch.tensor([run_clip]))],
    )
    server = FedSGD(client_fraction=1.0, optimizer="sgd", lr=_LR_GENERAL)
    training: LocalTraining = LocalDP(functools.partial(local_round, users, general), 1, "pld")
    schedule = server.sample(1, rounds, seed)
    run_federation(list(general.parameters()), schedule, training, server, [rows])
    releases = torch.stack(
        [torch.cat([g.reshape(-1) for g in msg["gradient"]])[coords] for msg in users.messages]
    )
    claim = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=rounds
    )
    return one_run_result(
        "domain-experts-general",
        variant,
        claimed_epsilon=compute_epsilon([claim], delta),
        delta=delta,
        releases=releases.double().numpy() * q * rows / C,  # the message is g_G / L, L = q·n
        q=q,
        sigma=sigma,
        included=included,
        confidence=confidence,
        start=start,
        details={
            "path": f"algorithm-{users.algorithm}",
            "steps": rounds,
            "sample_rate": q,
            "noise_multiplier": sigma,
            "rows": rows,
        },
    )
