"""Server strategies of the DP federated baselines: FedAvg, FedProx, FedAdam (pubsub-ml.txt §7.3).

Each is a :class:`~pubsubml.methods.federated.rounds.FederatedMLP` (round loop, client sampling, local or
central DP, accounting) with its own server update; all three share the privacy accounting of the
base, so at the same ``target_epsilon`` they run at the same privacy level.  FedProx's proximal
term is added to the local gradient after clipping and noise (it reads no data: no privacy cost),
FedAdam's moments are post-processing of DP outputs.  With personalized budgets the baselines run
at the smallest one (:func:`min_epsilon`, pubsub-ml.txt §8.2.1).

References
----------
pubsub-ml.txt §7.3 (FedAvg(V/F), FedProx(V/F), FedAdam(V/F)) and §8.2.1; McMahan et al. 2017
(FedAvg); Li et al., "Federated optimization in heterogeneous networks", MLSys 2020 (FedProx);
Reddi et al., "Adaptive federated optimization", ICLR 2021 (FedAdam).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import torch

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.methods.federated.rounds import Client, FederatedMLP
from pubsubml.privacy.accountant import check_epsilon
from pubsubml.privacy.mlp_stack import GradHook
from pubsubml.schema import FeatureSchema

__all__ = ["DPFedAdam", "DPFedAvg", "DPFedProx", "min_epsilon"]


def min_epsilon(budgets: Mapping[Any, float] | Iterable[float]) -> float:
    """The smallest ε of per-site budgets: what the FL baselines use (pubsub-ml.txt §8.2.1).

    Parameters
    ----------
    budgets : mapping of site to ε, or iterable of ε

    Raises
    ------
    InvalidPrivacyParameterError
        No budget, or an ε that is not finite and > 0.

    Examples
    --------
    >>> min_epsilon({"site0": 0.8, "site1": 0.25, "site2": 1.0})
    0.25
    """
    values = list(budgets.values() if isinstance(budgets, Mapping) else budgets)
    if not values:
        raise InvalidPrivacyParameterError("min_epsilon needs at least one budget")
    for eps in values:
        check_epsilon(eps)
    return float(min(values))


def _average(client_params: list[torch.Tensor], weights: torch.Tensor) -> list[torch.Tensor]:
    return [torch.einsum("k,k...->...", weights, p) for p in client_params]


def _base_kwargs(local: dict[str, Any], own: Sequence[str]) -> dict[str, Any]:
    """The :class:`FederatedMLP` arguments among a subclass ``__init__``'s ``locals()``."""
    return {k: v for k, v in local.items() if k not in ("self", "__class__", *own)}


class DPFedAvg(FederatedMLP):
    """DP-FedAvg: the server takes the data-weighted average of the clients' models.

    See :class:`~pubsubml.methods.federated.rounds.FederatedMLP` for the parameters and the privacy
    accounting (``dp=True``: DP-SGD at every client; ``dp="central"``: the server clips and
    noises the updates, McMahan et al. 2018).

    References
    ----------
    pubsub-ml.txt §7.3 (FedAvg(V)) and §8.2.3 (10% of clients per round); McMahan et al.,
    "Communication-efficient learning of deep networks from decentralized data" (FedAvg).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> schema = FeatureSchema.numeric(["a", "b"])
    >>> clients = []
    >>> for _ in range(4):
    ...     X = pd.DataFrame(rng.random((60, 2)), columns=["a", "b"])
    ...     clients.append((X, (X.a > X.b).astype(int).to_numpy()))
    >>> fl = DPFedAvg(schema=schema, classes=[0, 1], hidden_layer_sizes=(8,), rounds=2,
    ...               client_fraction=0.5, batch_size=20, noise_multiplier=1.0,
    ...               accountant="rdp").fit(clients)
    >>> fl.participation_.tolist(), bool(fl.epsilon_ > 0)
    ([1, 1, 1, 1], True)
    """

    def aggregate(
        self,
        global_params: list[torch.Tensor],
        client_params: list[torch.Tensor],
        weights: torch.Tensor,
    ) -> list[torch.Tensor]:
        """Weighted average of the clients' models (FedAvg)."""
        return _average(client_params, weights)


class DPFedProx(FederatedMLP):
    """DP-FedProx: each client minimizes its loss + μ/2·‖w − w_global‖²; the server averages.

    Parameters
    ----------
    mu : float, default=0.01
        Proximal weight μ ≥ 0 (Li et al. suggest {0.001, 0.01, 0.1, 1}); μ = 0 is FedAvg.
    **others
        As :class:`~pubsubml.methods.federated.rounds.FederatedMLP`.

    Notes
    -----
    The proximal gradient μ(w − w_global) is added after the per-sample gradients are clipped,
    summed, noised and averaged: it depends on the current and the published global model only,
    so it is post-processing and the accounting is that of FedAvg.  With a large μ·lr and
    ``optimizer="sgd"`` the local steps overshoot (lr·μ must stay below 2); Adam normalizes them.

    References
    ----------
    pubsub-ml.txt §7.3 (FedProx(V), FedProx(F)); Li et al., "Federated optimization in
    heterogeneous networks", MLSys 2020.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> schema = FeatureSchema.numeric(["a", "b"])
    >>> X = pd.DataFrame(np.random.default_rng(0).random((40, 2)), columns=["a", "b"])
    >>> clients = [(X, (X.a > X.b).astype(int).to_numpy())] * 2
    >>> fl = DPFedProx(schema=schema, classes=[0, 1], hidden_layer_sizes=(4,), rounds=1,
    ...                client_fraction=1.0, batch_size=20, noise_multiplier=1.0, mu=0.1,
    ...                accountant="rdp").fit(clients)
    >>> fl.participation_.tolist()
    [1, 1]
    """

    def __init__(
        self,
        *,
        schema: FeatureSchema,
        mu: float = 0.01,
        task: Literal["classification", "regression"] = "classification",
        classes: Sequence[Any] | None = None,
        hidden_layer_sizes: tuple[int, ...] = (100, 50),
        activation: str = "tanh",
        rounds: int = 30,
        local_epochs: int = 1,
        batch_size: int = 100,
        client_fraction: float = 0.1,
        lr: float = 1e-3,
        optimizer: Literal["adam", "sgd"] = "adam",
        dp: bool | Literal["local", "central"] = True,
        target_epsilon: float = 1.0,
        target_delta: float = 1e-4,
        noise_multiplier: float | None = None,
        max_grad_norm: float = 1.0,
        accountant: Literal["pld", "rdp"] = "pld",
        random_state: int = 0,
    ) -> None:
        super().__init__(**_base_kwargs(locals(), ["mu"]))
        self.mu = mu

    def fit(self, clients: Sequence[Client]) -> DPFedProx:
        """As :meth:`FederatedMLP.fit`; raises ValueError unless ``mu`` is finite and ≥ 0."""
        if isinstance(self.mu, bool) or not (
            isinstance(self.mu, int | float) and 0 <= self.mu < math.inf
        ):
            raise ValueError(f"mu must be a finite number >= 0, got {self.mu!r}")
        super().fit(clients)
        return self

    def _grad_hook(self, center: torch.Tensor) -> GradHook:
        mu = float(self.mu)

        def proximal(params: torch.Tensor, grad: torch.Tensor) -> None:
            grad.add_(params - center, alpha=mu)

        return proximal

    def aggregate(
        self,
        global_params: list[torch.Tensor],
        client_params: list[torch.Tensor],
        weights: torch.Tensor,
    ) -> list[torch.Tensor]:
        """Weighted average of the clients' models (as FedAvg)."""
        return _average(client_params, weights)


class DPFedAdam(FederatedMLP):
    """DP-FedAdam: the server applies Adam to the pseudo-gradient Δ = avg(clients) − global.

    Each round: m ← β₁m + (1 − β₁)Δ, v ← β₂v + (1 − β₂)Δ², w ← w + η·m / (√v + τ), with m₀ = 0,
    v₀ = τ² and no bias correction (Reddi et al., Algorithm 2).  The state lives across the
    rounds of one :meth:`fit` and restarts with the next.

    Parameters
    ----------
    server_lr : float, default=1e-2
        η.
    beta1, beta2 : float, default=0.9, 0.99
    tau : float, default=1e-3
        Adaptivity τ (also √v₀).
    **others
        As :class:`~pubsubml.methods.federated.rounds.FederatedMLP`.

    Attributes
    ----------
    server_m_, server_v_ : list of Tensor
        The server's first and second moments, one per parameter (W0, b0, W1, b1, …).
    server_steps_ : int
        Server updates so far.

    Notes
    -----
    Δ is computed from DP outputs only (local DP-SGD models, or the server's noised average with
    ``dp="central"``), so the server optimizer costs no privacy.

    References
    ----------
    pubsub-ml.txt §7.3 (FedAdam(V), FedAdam(F)); Reddi et al., "Adaptive federated
    optimization", ICLR 2021.
    """

    def __init__(
        self,
        *,
        schema: FeatureSchema,
        server_lr: float = 1e-2,
        beta1: float = 0.9,
        beta2: float = 0.99,
        tau: float = 1e-3,
        task: Literal["classification", "regression"] = "classification",
        classes: Sequence[Any] | None = None,
        hidden_layer_sizes: tuple[int, ...] = (100, 50),
        activation: str = "tanh",
        rounds: int = 30,
        local_epochs: int = 1,
        batch_size: int = 100,
        client_fraction: float = 0.1,
        lr: float = 1e-3,
        optimizer: Literal["adam", "sgd"] = "adam",
        dp: bool | Literal["local", "central"] = True,
        target_epsilon: float = 1.0,
        target_delta: float = 1e-4,
        noise_multiplier: float | None = None,
        max_grad_norm: float = 1.0,
        accountant: Literal["pld", "rdp"] = "pld",
        random_state: int = 0,
    ) -> None:
        super().__init__(**_base_kwargs(locals(), ["server_lr", "beta1", "beta2", "tau"]))
        self.server_lr = server_lr
        self.beta1 = beta1
        self.beta2 = beta2
        self.tau = tau

    def fit(self, clients: Sequence[Client]) -> DPFedAdam:
        """As :meth:`FederatedMLP.fit`; raises ValueError on ``server_lr`` ≤ 0, β outside
        [0, 1) or ``tau`` ≤ 0."""
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
        super().fit(clients)
        return self

    def _reset_server(self, global_params: list[torch.Tensor]) -> None:
        self.server_m_ = [torch.zeros_like(p) for p in global_params]
        self.server_v_ = [torch.full_like(p, float(self.tau) ** 2) for p in global_params]
        self.server_steps_ = 0

    def aggregate(
        self,
        global_params: list[torch.Tensor],
        client_params: list[torch.Tensor],
        weights: torch.Tensor,
    ) -> list[torch.Tensor]:
        """One server Adam step on Δ = weighted average of the clients − global (FedAdam)."""
        b1, b2, tau, lr = float(self.beta1), float(self.beta2), float(self.tau), self.server_lr
        out = []
        for x, avg, m, v in zip(
            global_params,
            _average(client_params, weights),
            self.server_m_,
            self.server_v_,
            strict=True,
        ):
            delta = avg - x
            m.mul_(b1).add_(delta, alpha=1 - b1)
            v.mul_(b2).addcmul_(delta, delta, value=1 - b2)
            out.append(x + float(lr) * m / (v.sqrt() + tau))
        self.server_steps_ += 1
        return out
