"""The federated round loop shared by every federated method: sample, train locally, aggregate.

A :class:`Strategy` says how the server runs a federation, as in Flower's strategies: which
clients take part in each round (:meth:`Strategy.sample`), what it adds to the clients' local
objective (:meth:`Strategy.local_term`) and how it turns their updates into the next global model
(:meth:`Strategy.aggregate`).  A :data:`LocalTraining` is the clients' side of one round.
:func:`run_federation` is the loop itself.  Differential privacy wraps either side
(:mod:`pubsubml.methods.federated.dp`): record-level DP wraps the local training, client-level DP
wraps the strategy, and each records every round's release in its accountant.

ProxyFL and its baselines (proxyfl.txt §4.1) keep their own rounds
(:func:`~pubsubml.methods.proxyfl.protocol.run_rounds`: clients leave by their own budget, keep
their models between rounds, and most methods have no server); the server of its FedAvg and FML
is a :class:`Strategy` all the same, called through :meth:`Strategy.aggregate_round` each round.

References
----------
pubsub-ml.txt §7.3 (the FL baselines) and §8.2.3 (10% of the clients per round);
fl-domain-experts.txt §3.2 (one round of Algorithm 1 at every chosen user); McMahan et al. 2017
(FedAvg: sample clients, train locally, average).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.mlp_stack import GradHook

__all__ = [
    "ClientUpdates",
    "LocalTerm",
    "LocalTraining",
    "Strategy",
    "client_schedule",
    "participation",
    "run_federation",
]


def client_schedule(n_clients: int, per_round: int, rounds: int, seed: int) -> list[np.ndarray]:
    """Which clients take part in each round: consecutive blocks of shuffled passes over all.

    Every client takes part ⌊R·m/N⌋ or ⌈R·m/N⌉ times.

    Returns
    -------
    list of ``rounds`` sorted int arrays of length ``per_round``

    Examples
    --------
    >>> rounds = client_schedule(4, 2, 3, seed=0)
    >>> sorted(np.bincount(np.concatenate(rounds), minlength=4).tolist())
    [1, 1, 2, 2]
    """
    if not 1 <= per_round <= n_clients or rounds < 0:
        raise ValueError(
            f"need 1 <= per_round <= n_clients and rounds >= 0, got per_round={per_round}, "
            f"n_clients={n_clients}, rounds={rounds}"
        )
    rng = np.random.default_rng(seed)
    order: list[int] = []
    out = []
    for _ in range(rounds):
        if len(order) < per_round:
            # Append a whole new pass (every client once).  The clients still owed by the current
            # pass go last in the new one, so no client is chosen twice in a round.
            owed = set(order)
            perm = rng.permutation(n_clients).tolist()
            order += [c for c in perm if c not in owed] + [c for c in perm if c in owed]
        out.append(np.sort(np.asarray(order[:per_round])))
        del order[:per_round]
    return out


def participation(schedule: Sequence[np.ndarray], n_clients: int) -> np.ndarray:
    """How many rounds of ``schedule`` each client takes part in, int array of shape (n_clients,).

    Examples
    --------
    >>> participation(client_schedule(4, 2, 3, seed=0), 4).tolist()
    [1, 1, 2, 2]
    """
    counts = np.zeros(n_clients, dtype=int)
    for chosen in schedule:
        counts[chosen] += 1
    return counts


@dataclass
class ClientUpdates:
    """What the chosen clients of one round send to the server.

    Attributes
    ----------
    params : list of Tensor of shape (k, *param.shape)
        The ``k`` chosen clients' results, stacked per parameter: their models after local
        training (FedAvg and its variants) or the gradients they computed (FedSGD).
    events : list of list of DPEvent
        Per chosen client, the DP events its data went through in this round (empty when nothing
        private ran); :class:`~pubsubml.methods.federated.dp.LocalDP` records them.
    """

    params: list[Tensor]
    events: list[list[DPEvent]]


#: ``local_term(center)``: a data-independent gradient term given the global model flat as (1, P).
LocalTerm = Callable[[Tensor], GradHook | None]

#: ``train(round_, chosen, global_params, local_term)``: local training of the chosen clients.
LocalTraining = Callable[[int, np.ndarray, list[Tensor], LocalTerm], ClientUpdates]


class Strategy(ABC):
    """How the server runs a federation: client sampling, the local objective, aggregation.

    Attributes
    ----------
    client_fraction : float
        Fraction of the clients chosen per round.
    """

    client_fraction: float

    def sample(self, n_clients: int, rounds: int, seed: int) -> list[np.ndarray]:
        """The clients of every round: ``max(1, round(fraction · N))`` each, balanced passes."""
        per_round = max(1, round(float(self.client_fraction) * n_clients))
        return client_schedule(n_clients, per_round, rounds, seed)

    def start(self, global_params: list[Tensor]) -> None:
        """Set up server state (e.g. optimizer moments) before the first round; none here."""
        return None

    def local_term(self, center: Tensor) -> GradHook | None:
        """A data-independent term for the local gradients (the global model flat as (1, P), see
        :func:`~pubsubml.privacy.mlp_stack.train_dp_stacked`); none here."""
        return None

    @abstractmethod
    def aggregate(
        self, global_params: list[Tensor], client_params: list[Tensor], weights: Tensor
    ) -> list[Tensor]:
        """The server update of one round.

        Parameters
        ----------
        global_params : list of Tensor of shape param.shape
            The global model before the round (W0, b0, W1, b1, …).
        client_params : list of Tensor of shape (k, *param.shape)
            What the ``k`` participants sent, stacked.
        weights : Tensor of shape (k,)
            Client weights ``n_k / Σ n_k``.

        Returns
        -------
        list of Tensor: the new global parameters
        """

    def aggregate_round(
        self, global_params: list[Tensor], client_params: list[Tensor] | None, weights: Tensor
    ) -> list[Tensor]:
        """What the loop calls each round; a round without participants changes nothing."""
        if client_params is None:
            return global_params
        return self.aggregate(global_params, client_params, weights)


def run_federation(
    global_params: list[Tensor],
    schedule: Sequence[np.ndarray],
    local_training: LocalTraining,
    strategy: Strategy,
    client_sizes: Sequence[int],
) -> list[Tensor]:
    """Run the rounds of ``schedule``: local training of the chosen clients, then aggregation.

    Parameters
    ----------
    global_params : list of Tensor
        The initial global model.
    schedule : sequence of int arrays
        The clients of each round (:meth:`Strategy.sample`); a round may have none.
    local_training : LocalTraining
        The clients' side of a round (wrapped in :class:`~pubsubml.methods.federated.dp.LocalDP`
        for record-level DP).
    strategy : Strategy
        The server's side (wrapped in :class:`~pubsubml.methods.federated.dp.CentralDP` for
        client-level DP).
    client_sizes : sequence of int
        Records per client; a participant weighs ``n_k / Σ n_k`` in the aggregation.

    Returns
    -------
    list of Tensor: the global model after the last round
    """
    strategy.start(global_params)
    for round_, chosen in enumerate(schedule):
        sent: list[Tensor] | None = None
        if len(chosen):
            sent = local_training(round_, chosen, global_params, strategy.local_term).params
        sizes = torch.tensor([client_sizes[c] for c in chosen], dtype=torch.float32)
        global_params = strategy.aggregate_round(global_params, sent, sizes / sizes.sum())
    return global_params
