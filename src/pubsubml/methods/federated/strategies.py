"""Server strategies of the federated loop: FedAvg, FedProx, FedAdam and FedSGD.

As in Flower's strategies, each changes only its part of
:class:`~pubsubml.methods.federated.loop.Strategy`: :class:`FedAvg` averages the clients' models
(:func:`weighted_mean`); :class:`FedProx` adds the proximal term μ to the local objective (after
clipping and noise: it reads no data, no privacy cost); :class:`FedAdam` runs Adam on the server
over the averaged update (post-processing of DP outputs); :class:`FedSGD` averages the gradients
the clients send and steps a server optimizer.  Differential privacy wraps a strategy
(:class:`~pubsubml.methods.federated.dp.CentralDP`) or the clients' training
(:class:`~pubsubml.methods.federated.dp.LocalDP`).

References
----------
pubsub-ml.txt §7.3 (FedAvg, FedProx, FedAdam); McMahan et al. 2017 (FedAvg, FedSGD); Li et al.,
"Federated optimization in heterogeneous networks", MLSys 2020 (FedProx); Reddi et al., "Adaptive
federated optimization", ICLR 2021 (FedAdam).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

from pubsubml.methods.federated.loop import Strategy
from pubsubml.privacy.dpsgd import GradHook

__all__ = ["FedAdam", "FedAvg", "FedProx", "FedSGD", "weighted_mean"]


def weighted_mean(client_params: Sequence[Tensor], weights: Tensor | None = None) -> list[Tensor]:
    """FedAvg's aggregation ``Σ_k w_k x_k`` over stacked clients (k, …); the plain mean without
    ``weights``.

    Examples
    --------
    >>> weighted_mean([torch.tensor([[1.0], [3.0]])], torch.tensor([0.25, 0.75]))
    [tensor([2.5000])]
    """
    if weights is None:
        return [p.mean(0) for p in client_params]
    return [torch.einsum("k,k...->...", weights, p) for p in client_params]


@dataclass(eq=False)
class FedAvg(Strategy):
    """FedAvg: the server takes the data-weighted average of the clients' models.

    Parameters
    ----------
    client_fraction : float, default=1.0
        Fraction of the clients chosen per round.

    References
    ----------
    McMahan et al., "Communication-efficient learning of deep networks from decentralized data",
    AISTATS 2017.
    """

    client_fraction: float = 1.0

    def aggregate(
        self, global_params: list[Tensor], client_params: list[Tensor], weights: Tensor
    ) -> list[Tensor]:
        """Weighted average of the clients' models."""
        return weighted_mean(client_params, weights)


@dataclass(eq=False)
class FedProx(FedAvg):
    """FedProx: each client minimizes its loss + μ/2·‖w − w_global‖²; the server averages.

    Parameters
    ----------
    mu : float, default=0.01
        Proximal weight μ ≥ 0 (Li et al. suggest {0.001, 0.01, 0.1, 1}); μ = 0 is FedAvg.

    Raises
    ------
    ValueError
        ``mu`` not a finite number ≥ 0.
    """

    mu: float = 0.01

    def __post_init__(self) -> None:
        if isinstance(self.mu, bool) or not (
            isinstance(self.mu, int | float) and 0 <= self.mu < math.inf
        ):
            raise ValueError(f"mu must be a finite number >= 0, got {self.mu!r}")

    def local_term(self, center: Tensor) -> GradHook:
        """The proximal gradient μ(w − w_global), added to every local step's gradient."""
        mu = float(self.mu)

        def proximal(params: Tensor, grad: Tensor) -> None:
            grad.add_(params - center, alpha=mu)

        return proximal


@dataclass(eq=False)
class FedAdam(FedAvg):
    """FedAdam: the server applies Adam to the pseudo-gradient Δ = avg(clients) − global.

    Each round: m ← β₁m + (1 − β₁)Δ, v ← β₂v + (1 − β₂)Δ², w ← w + η·m / (√v + τ), with m₀ = 0,
    v₀ = τ² and no bias correction (Reddi et al., Algorithm 2).  :meth:`start` resets the state.

    Parameters
    ----------
    server_lr : float, default=1e-2
        η.
    beta1, beta2 : float, default=0.9, 0.99
    tau : float, default=1e-3
        Adaptivity τ (also √v₀).
    bias_correction : bool, default=False
        Flower's variant (``flwr.serverapp.strategy.FedAdam``): v₀ = 0 and the step
        η·√(1 − β₂^(t+1)) / (1 − β₁^(t+1)) at server round t = 1, 2, … (Kingma & Ba's bias
        correction, with Flower's round count).  Off: Reddi et al.'s Algorithm 2 as written.

    Attributes
    ----------
    m, v : list of Tensor
        First and second moments, one per parameter.
    steps : int
        Server updates since :meth:`start`.

    Raises
    ------
    ValueError
        ``server_lr`` ≤ 0, β outside [0, 1) or ``tau`` ≤ 0.
    """

    server_lr: float = 1e-2
    beta1: float = 0.9
    beta2: float = 0.99
    tau: float = 1e-3
    bias_correction: bool = False
    m: list[Tensor] = field(default_factory=list, init=False)
    v: list[Tensor] = field(default_factory=list, init=False)
    steps: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        checks = {
            "server_lr": 0 < self.server_lr < math.inf,
            "beta1": 0 <= self.beta1 < 1,
            "beta2": 0 <= self.beta2 < 1,
            "tau": 0 < self.tau < math.inf,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(
                f"need server_lr > 0, 0 <= beta1, beta2 < 1 and tau > 0; bad: {', '.join(bad)}"
            )

    def start(self, global_params: list[Tensor]) -> None:
        """m = 0, v = τ² (0 with ``bias_correction``), no step yet."""
        v0 = 0.0 if self.bias_correction else float(self.tau) ** 2
        self.m = [torch.zeros_like(p) for p in global_params]
        self.v = [torch.full_like(p, v0) for p in global_params]
        self.steps = 0

    def aggregate(
        self, global_params: list[Tensor], client_params: list[Tensor], weights: Tensor
    ) -> list[Tensor]:
        """One server Adam step on Δ = weighted average of the clients − global."""
        b1, b2, tau, lr = float(self.beta1), float(self.beta2), float(self.tau), self.server_lr
        if self.bias_correction:
            t = self.steps + 2  # Flower's server round + 1
            lr = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
        out = []
        averages = weighted_mean(client_params, weights)
        for x, avg, m, v in zip(global_params, averages, self.m, self.v, strict=True):
            delta = avg - x
            m.mul_(b1).add_(delta, alpha=1 - b1)
            v.mul_(b2).addcmul_(delta, delta, value=1 - b2)
            out.append(x + float(lr) * m / (v.sqrt() + tau))
        self.steps += 1
        return out


@dataclass(eq=False)
class FedSGD(Strategy):
    """FedSGD: clients send gradients; the server averages them as FedAvg does and steps its
    optimizer on the global parameters, in place.

    Parameters
    ----------
    client_fraction : float, default=1.0
    optimizer : {"sgd", "adam"}, default="sgd"
        torch's SGD or Adam on the server.
    lr : float, default=0.1

    References
    ----------
    McMahan et al. 2017 (FedSGD); fl-domain-experts.txt §3.2 (the server's update of Θ_G).
    """

    client_fraction: float = 1.0
    optimizer: Literal["sgd", "adam"] = "sgd"
    lr: float = 0.1
    server_optimizer: torch.optim.Optimizer | None = field(default=None, init=False)

    def start(self, global_params: list[Tensor]) -> None:
        """A fresh server optimizer over ``global_params`` (tensors that require grad)."""
        kind = torch.optim.SGD if self.optimizer == "sgd" else torch.optim.Adam
        self.server_optimizer = kind(global_params, lr=self.lr)

    def aggregate(
        self, global_params: list[Tensor], client_params: list[Tensor], weights: Tensor
    ) -> list[Tensor]:
        """One optimizer step along the weighted mean of the clients' gradients."""
        if self.server_optimizer is None:
            raise RuntimeError("FedSGD.start must run before the first round")
        self.server_optimizer.zero_grad()
        for p, grad in zip(global_params, weighted_mean(client_params, weights), strict=True):
            p.grad = grad
        self.server_optimizer.step()
        return global_params
