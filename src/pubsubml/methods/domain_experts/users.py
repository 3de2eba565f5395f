"""The users' side of federated learning with private domain experts (fl-domain-experts.txt §3).

What the users hold and never send (:class:`Users`: their data splits, private experts M_P_i,
gates α_i, σ and generators) and their side of one round of the federated loop
(:func:`local_round`): at every chosen user one minibatch of Algorithm 1 (or 2, §3.2.1), which
sends the clipped, noised gradient of the general model M_G divided by L, then takes a noise-free
step of the private expert on the mixture loss of the same batch and a step of the gate on a
sample of the held-out split H (:func:`user_step`).

References
----------
fl-domain-experts.txt §3.1 (local DP), §3.2 (Eq. 3, Algorithm 1) and §3.2.1 (Algorithm 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

from pubsubml.methods.domain_experts.gate import (
    Task,
    general_gradients,
    mixture_loss,
    mixture_output,
)
from pubsubml.methods.federated.loop import ClientUpdates, LocalTerm
from pubsubml.privacy.dpsgd import CanaryGradients, poisson_sample
from pubsubml.privacy.events import DPEvent

__all__ = ["Split", "Users", "local_round", "user_step"]

#: A user's ``(X, y)`` rows: encoded inputs (n, d) and targets (n,).
Split = tuple[Tensor, Tensor]


@dataclass
class Users:
    """What the users hold and never send: data splits, experts, gates, σ, generators, messages.

    Attributes
    ----------
    train, held : list of Split
        Per user, the rows of its expert and general model, and the held-out split H of its gate.
    privates : list of nn.Sequential
        The private experts M_P_i.
    gates : list of nn.Linear
        The gates; α_i(x) = sigmoid(gates[i](x)).
    private_opts, gate_opts : list of torch.optim.Optimizer
    rates : list of float
        Poisson sample rates ``min(1, L / n_i)``.
    sigmas : ndarray of shape (n_users,)
        Noise multipliers σ_i.
    generators : list of torch.Generator
        Each user's sampling and noise.
    messages : list of dict
        The messages sent, when ``record_messages``.
    algorithm : {1, 2}
        Which gradient is sent (§3.2, §3.2.1).
    task : {"classification", "regression"}
    dp : bool
        Clip to ``max_grad_norm`` and add noise; ``False`` sends the raw gradient.
    max_grad_norm : float
        C.
    record_messages : bool
    canaries : list of (CanaryGradients or None), optional
        Per user, audit canaries (:mod:`pubsubml.audit.domain_experts`): with ``dp`` each step
        Poisson-samples them at the user's rate into the sum of clipped gradients, before the
        noise.  None (the default) outside an audit.
    """

    train: list[Split]
    held: list[Split]
    privates: list[nn.Sequential]
    gates: list[nn.Linear]
    private_opts: list[torch.optim.Optimizer]
    gate_opts: list[torch.optim.Optimizer]
    rates: list[float]
    sigmas: np.ndarray
    generators: list[torch.Generator]
    messages: list[dict[str, Any]]
    algorithm: Literal[1, 2]
    task: Task
    dp: bool
    max_grad_norm: float
    record_messages: bool
    canaries: list[CanaryGradients | None] | None = None


def local_round(
    users: Users,
    general: nn.Sequential,
    round_: int,
    chosen: np.ndarray,
    global_params: list[Tensor],
    local_term: LocalTerm,
) -> ClientUpdates:
    """One round at the chosen users (``global_params`` are ``general``'s parameters).

    Returns
    -------
    ClientUpdates
        The users' messages g_G / L stacked per parameter, and per user the subsampled-Gaussian
        step (σ_i, q_i) it ran (none without noise).
    """
    sent: list[list[Tensor]] = []
    events: list[list[DPEvent]] = []
    for i in chosen.tolist():
        sent.append(user_step(i, users, general))
        sigma, rate = float(users.sigmas[i]), users.rates[i]
        noisy = users.dp and sigma > 0
        events.append(
            [DPEvent(mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=rate)]
            if noisy
            else []
        )
        if users.record_messages:
            users.messages.append({"round": round_, "user": i, "gradient": sent[-1]})
    return ClientUpdates([torch.stack(grads) for grads in zip(*sent, strict=True)], events)


def user_step(i: int, users: Users, general: nn.Module) -> list[Tensor]:
    """Algorithm 1 (or 2) at user ``i`` for one minibatch; returns the message g_G / L."""
    X, y = users.train[i]
    private, gate, gen = users.privates[i], users.gates[i], users.generators[i]
    rate, sigma = users.rates[i], float(users.sigmas[i])
    L = rate * len(X)
    names = [k for k, _ in general.named_parameters()]
    batch = poisson_sample(len(X), rate, gen)
    Xb, yb = X[batch], y[batch]
    if len(Xb) > 0:
        grads, _ = general_gradients(
            general, private, gate, Xb, yb,
            algorithm=users.algorithm, task=users.task,
            max_grad_norm=users.max_grad_norm if users.dp else None,
        )  # fmt: skip
        summed = [grads[k].sum(0) for k in names]
    else:
        summed = [torch.zeros_like(p) for p in general.parameters()]
    canaries = None if users.canaries is None else users.canaries[i]
    if users.dp and canaries is not None:
        flat = torch.cat([g.reshape(-1) for g in summed]).unsqueeze(0)
        canaries.add(flat, [0], torch.tensor([rate]), [gen])
        parts = flat[0].split([g.numel() for g in summed])
        summed = [part.reshape(g.shape) for part, g in zip(parts, summed, strict=True)]
    if users.dp and sigma > 0:
        std = sigma * users.max_grad_norm
        summed = [g + std * torch.randn(g.shape, generator=gen) for g in summed]
    message = [g.detach() / L for g in summed]
    # Private expert: noise-free step on the mixture loss of the same batch (lines 9, 18).
    if len(Xb) > 0:
        with torch.no_grad():
            out_G, alpha = general(Xb), torch.sigmoid(gate(Xb)[:, 0])
        pred = mixture_output(out_G, private(Xb), alpha, users.task)
        users.private_opts[i].zero_grad()
        (mixture_loss(pred, yb, users.task).sum() / L).backward()
        users.private_opts[i].step()
    # Gate: a sample of the held-out split H (lines 11-16, 19).
    Xh, yh = users.held[i]
    hb = poisson_sample(len(Xh), min(1.0, L / len(Xh)), gen)
    if bool(hb.any()):
        with torch.no_grad():
            out_G, out_P = general(Xh[hb]), private(Xh[hb])
        pred = mixture_output(out_G, out_P, torch.sigmoid(gate(Xh[hb])[:, 0]), users.task)
        users.gate_opts[i].zero_grad()
        mixture_loss(pred, yh[hb], users.task).mean().backward()
        users.gate_opts[i].step()
    return message
