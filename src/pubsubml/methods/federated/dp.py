"""Differential privacy around the federated loop: record-level at the clients, client-level at the server.

* :class:`LocalDP` wraps the clients' local training (Flower's ``LocalDpMod``): every client runs
  DP-SGD on its own records (Poisson sampling, clipping, noise) and has its own accountant, which
  records, round after round, exactly the DP events the client ran.  The server sees only DP
  outputs, so aggregation is post-processing (pubsub-ml.txt §3.1, Theorem 2).
* :class:`CentralDP` wraps a server :class:`~pubsubml.methods.federated.loop.Strategy` (Flower's
  ``DifferentialPrivacyServerSideFixedClipping``; McMahan et al. 2018): each round every client
  takes part with probability q (Poisson), the server clips each update ``w_k − w`` to norm C,
  adds N(0, σ²C²) to the sum and divides by ``qN`` (:func:`privatize`), then hands this one
  virtual client to the wrapped strategy.  One subsampled-Gaussian event per round, empty rounds
  included; the unit of privacy is a whole client.

:func:`noise_multipliers` calibrates σ to a target (ε, δ) for either.

References
----------
pubsub-ml.txt §3.1 (post-processing) and §7.3 ("the server adds noise"); McMahan et al., "Learning
differentially private recurrent language models", ICLR 2018 (client-level DP-FedAvg).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from pubsubml.methods.federated.loop import ClientUpdates, LocalTerm, LocalTraining, Strategy
from pubsubml.privacy.accountants import PrivacyAccountant, create_accountant
from pubsubml.privacy.calibration import calibrate_noise
from pubsubml.privacy.dpsgd import GradHook
from pubsubml.privacy.events import DPEvent

__all__ = ["CentralDP", "LocalDP", "noise_multipliers", "privatize"]

Backend = Literal["pld", "rdp"]


def noise_multipliers(
    target_epsilon: float,
    target_delta: float,
    sample_rates: Sequence[float],
    total_steps: Sequence[int],
    backend: Backend,
) -> list[float]:
    """σ per client so that its ``total_steps`` subsampled-Gaussian steps end at (ε, δ).

    Clients with the same sample rate and steps share one calibration; a client that runs no
    step gets 0.

    Raises
    ------
    InvalidPrivacyParameterError
        An unreachable target.
    """
    cache: dict[tuple[float, int], float] = {}
    out = []
    for rate, steps in zip(sample_rates, total_steps, strict=True):
        key = (rate, int(steps))
        if steps > 0 and key not in cache:
            cache[key] = float(
                calibrate_noise(target_epsilon, target_delta, rate, int(steps), backend)
            )
        out.append(cache.get(key, 0.0))
    return out


def _epsilons(accountants: Sequence[PrivacyAccountant], delta: float, idle: float) -> np.ndarray:
    return np.array([a.get_epsilon(delta) if a.events else idle for a in accountants])


class LocalDP:
    """Record-level DP at every client: a wrapper of the local training that accounts its rounds.

    The wrapped training runs DP-SGD with each client's σ and reports, per chosen client, the
    DP events it ran (:class:`~pubsubml.methods.federated.loop.ClientUpdates`); each is recorded
    in that client's accountant.

    Parameters
    ----------
    train : LocalTraining
    n_clients : int
    backend : {"pld", "rdp"}

    Attributes
    ----------
    accountants : list of PrivacyAccountant
        One per client.
    """

    def __init__(self, train: LocalTraining, n_clients: int, backend: Backend) -> None:
        self.train = train
        self.accountants = [create_accountant(backend) for _ in range(n_clients)]

    def __call__(
        self,
        round_: int,
        chosen: np.ndarray,
        global_params: list[Tensor],
        local_term: LocalTerm,
    ) -> ClientUpdates:
        """Train the chosen clients, then record what each ran in its accountant."""
        updates = self.train(round_, chosen, global_params, local_term)
        for client, events in zip(chosen.tolist(), updates.events, strict=True):
            for event in events:
                assert event.noise_multiplier is not None  # a subsampled Gaussian has its σ
                self.accountants[client].step(
                    noise_multiplier=event.noise_multiplier,
                    sample_rate=event.sample_rate,
                    steps=event.count,
                )
        return updates

    def client_events(self) -> list[list[DPEvent]]:
        """What each client's accountant recorded."""
        return [list(a.events) for a in self.accountants]

    def client_epsilons(self, delta: float, *, idle: float) -> np.ndarray:
        """Each client's ε at ``delta``; ``idle`` for a client whose accountant recorded nothing."""
        return _epsilons(self.accountants, delta, idle)


def privatize(
    params: list[Tensor],
    clients: list[Tensor] | None,
    C: float,
    sigma: float,
    denominator: float,
    gen: torch.Generator,
) -> list[Tensor]:
    """One virtual client ``w + (Σ_k clip_C(w_k − w) + N(0, σ²C²)) / denominator`` (k, 1, …)."""
    flat = torch.cat([p.reshape(-1) for p in params])
    total = torch.randn(flat.shape, generator=gen).mul_(sigma * C)
    if clients is not None:
        deltas = torch.cat([c.reshape(c.shape[0], -1) for c in clients], 1) - flat
        norms = torch.linalg.vector_norm(deltas, dim=1, keepdim=True)
        total += (deltas * (C / (norms + 1e-12)).clamp(max=1.0)).sum(0)
    out = (flat + total / denominator).split([p.numel() for p in params])
    return [o.reshape(1, *p.shape) for o, p in zip(out, params, strict=True)]


class CentralDP(Strategy):
    """Client-level DP by a trusted server: a wrapper of a strategy (McMahan et al. 2018).

    Clients take part by Poisson sampling at ``q = strategy.client_fraction``; each round the
    server clips every participant's update to ``clip_norm``, adds Gaussian noise and passes the
    one noised mean update to ``strategy`` with weight 1 (clients weigh the same), and its
    accountant records one subsampled-Gaussian event (σ, q), also for a round nobody joined.

    Parameters
    ----------
    strategy : Strategy
        The server update applied to the noised mean (FedAvg, FedProx, FedAdam).
    noise_multiplier : float
        σ.
    clip_norm : float
        C.
    n_clients : int
    seed : int
        Seeds the client sampling and the server's noise.
    backend : {"pld", "rdp"}

    Attributes
    ----------
    accountant : PrivacyAccountant
        The server's releases.

    Notes
    -----
    Adding or removing one client changes the clipped sum by at most C.  Changing one record
    *inside* a client that takes part moves its clipped update by up to 2C (replace-one), so at
    the record level the same σ gives only the guarantee of two add/remove steps.  The server
    sees every client's model in the clear: it must be trusted.
    """

    def __init__(
        self,
        strategy: Strategy,
        *,
        noise_multiplier: float,
        clip_norm: float,
        n_clients: int,
        seed: int,
        backend: Backend,
    ) -> None:
        self.strategy = strategy
        self.client_fraction = float(strategy.client_fraction)
        self.noise_multiplier = noise_multiplier
        self.clip_norm = float(clip_norm)
        self.n_clients = n_clients
        self.accountant = create_accountant(backend)
        self._noise = torch.Generator().manual_seed(seed * 1_000_003 + 7)

    def sample(self, n_clients: int, rounds: int, seed: int) -> list[np.ndarray]:
        """Poisson sampling: each client joins each round with probability q, independently."""
        rng = np.random.default_rng((seed, 1))
        return [np.flatnonzero(rng.random(n_clients) < self.client_fraction) for _ in range(rounds)]

    def start(self, global_params: list[Tensor]) -> None:
        """Start the wrapped strategy."""
        self.strategy.start(global_params)

    def local_term(self, center: Tensor) -> GradHook | None:
        """The wrapped strategy's local term."""
        return self.strategy.local_term(center)

    def aggregate(
        self, global_params: list[Tensor], client_params: list[Tensor] | None, weights: Tensor
    ) -> list[Tensor]:
        """Clip, sum and noise the updates (:func:`privatize`), then the wrapped server update."""
        virtual = privatize(
            global_params,
            client_params,
            self.clip_norm,
            self.noise_multiplier,
            self.client_fraction * self.n_clients,
            self._noise,
        )
        return self.strategy.aggregate(global_params, virtual, torch.ones(1))

    def aggregate_round(
        self, global_params: list[Tensor], client_params: list[Tensor] | None, weights: Tensor
    ) -> list[Tensor]:
        """Account the round's release, then :meth:`aggregate` (noise only without participants)."""
        self.accountant.step(
            noise_multiplier=self.noise_multiplier, sample_rate=self.client_fraction, steps=1
        )
        return self.aggregate(global_params, client_params, weights)

    def client_events(self) -> list[list[DPEvent]]:
        """The server's releases, which read every client's data."""
        return [list(self.accountant.events) for _ in range(self.n_clients)]

    def client_epsilons(self, delta: float) -> np.ndarray:
        """Every client's ε at ``delta``: the server's (client level)."""
        return _epsilons([self.accountant] * self.n_clients, delta, 0.0)
