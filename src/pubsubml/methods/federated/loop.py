"""The federated round loop shared by every federated method: choose, train locally, communicate.

:func:`run_loop` is the one loop: each round it asks a :class:`Federation` who takes part
(:meth:`Federation.select`), lets them train (:meth:`Federation.train`) and lets them communicate
(:meth:`Federation.communicate`), and times both halves.  Two federations run on it:

* :func:`run_federation`, a server's federation as in Flower: a :class:`Strategy` says which
  clients take part in each round (:meth:`Strategy.sample`, fixed before the first round), what it
  adds to the clients' local objective (:meth:`Strategy.local_term`) and how it turns their
  updates into the next global model (:meth:`Strategy.aggregate`); a :data:`LocalTraining` is the
  clients' side of a round.  Differential privacy wraps either side
  (:mod:`pubsubml.methods.federated.dp`): record-level DP wraps the local training, client-level
  DP wraps the strategy, and each records every round's release in its accountant.  The DP
  federated baselines and the domain-experts federation run here.
* ProxyFL and its baselines (proxyfl.txt §4.1;
  :func:`~pubsubml.methods.proxyfl.protocol.run_rounds`): clients decide before every round, from
  their own accountants, whether they still take part, keep their models between rounds, and
  most methods have no server; the server of its FedAvg and FML is a :class:`Strategy` all the
  same, called through :meth:`Strategy.aggregate_round`.

References
----------
pubsub-ml.txt §7.3 (the FL baselines) and §8.2.3 (10% of the clients per round);
fl-domain-experts.txt §3.2 (one round of Algorithm 1 at every chosen user); proxyfl.txt §3
(Algorithm 1: local training, then communication); McMahan et al. 2017 (FedAvg: sample clients,
train locally, average).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from pubsubml.privacy.dpsgd import GradHook
from pubsubml.privacy.events import DPEvent

__all__ = [
    "ClientUpdates",
    "Federation",
    "LocalTerm",
    "LocalTraining",
    "RoundTiming",
    "Strategy",
    "client_schedule",
    "participation",
    "run_federation",
    "run_loop",
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
        :func:`~pubsubml.privacy.dpsgd.stacked.train_dp_stacked`); none here."""
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


class Federation(Protocol):
    """A federation's side of :func:`run_loop`: who takes part, their training, their messages."""

    def select(self, round_: int) -> Sequence[int]:
        """The clients taking part in round ``round_`` (possibly none)."""
        ...

    def train(self, round_: int, participants: Sequence[int]) -> None:
        """Local training of the round (and the accounting of what it released)."""
        ...

    def communicate(self, round_: int, participants: Sequence[int]) -> None:
        """What travels after local training: to and from a server, or between peers."""
        ...


@dataclass
class RoundTiming:
    """What :func:`run_loop` measured in one round."""

    round: int
    participants: list[int]
    train_seconds: float
    comm_seconds: float


def run_loop(
    federation: Federation,
    rounds: int,
    callback: Callable[[RoundTiming], None] | None = None,
) -> list[RoundTiming]:
    """The round loop: ``rounds`` times, choose participants, train locally, communicate.

    Parameters
    ----------
    federation : Federation
        What happens in each phase of a round.
    rounds : int
        Number of rounds (≥ 0).
    callback : callable, optional
        ``callback(timing)`` after every round.

    Returns
    -------
    list of RoundTiming, one per round.

    Examples
    --------
    >>> class Count:
    ...     def __init__(self): self.log = []
    ...     def select(self, r): return [r % 2]
    ...     def train(self, r, chosen): self.log.append(("train", r, list(chosen)))
    ...     def communicate(self, r, chosen): self.log.append(("send", r, list(chosen)))
    >>> f = Count()
    >>> [t.participants for t in run_loop(f, 2)], f.log[:2]
    ([[0], [1]], [('train', 0, [0]), ('send', 0, [0])])
    """
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {rounds}")
    history = []
    for round_ in range(rounds):
        participants = [int(c) for c in federation.select(round_)]
        start = time.perf_counter()
        federation.train(round_, participants)
        trained = time.perf_counter()
        federation.communicate(round_, participants)
        timing = RoundTiming(
            round=round_,
            participants=participants,
            train_seconds=trained - start,
            comm_seconds=time.perf_counter() - trained,
        )
        history.append(timing)
        if callback is not None:
            callback(timing)
    return history


class _ServerFederation:
    """A server's federation: a fixed schedule, local training from the global model, a strategy."""

    def __init__(
        self,
        global_params: list[Tensor],
        schedule: Sequence[np.ndarray],
        local_training: LocalTraining,
        strategy: Strategy,
        client_sizes: Sequence[int],
    ) -> None:
        self.global_params = global_params
        self.schedule = schedule
        self.local_training = local_training
        self.strategy = strategy
        self.client_sizes = client_sizes
        self._sent: list[Tensor] | None = None

    def select(self, round_: int) -> Sequence[int]:
        return [int(c) for c in self.schedule[round_]]

    def train(self, round_: int, participants: Sequence[int]) -> None:
        self._sent = None
        if participants:
            chosen = np.asarray(participants, dtype=int)
            updates = self.local_training(
                round_, chosen, self.global_params, self.strategy.local_term
            )
            self._sent = updates.params

    def communicate(self, round_: int, participants: Sequence[int]) -> None:
        sizes = torch.tensor([self.client_sizes[c] for c in participants], dtype=torch.float32)
        self.global_params = self.strategy.aggregate_round(
            self.global_params, self._sent, sizes / sizes.sum()
        )


def run_federation(
    global_params: list[Tensor],
    schedule: Sequence[np.ndarray],
    local_training: LocalTraining,
    strategy: Strategy,
    client_sizes: Sequence[int],
) -> list[Tensor]:
    """Run the rounds of ``schedule`` on :func:`run_loop`: local training, then aggregation.

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
    federation = _ServerFederation(global_params, schedule, local_training, strategy, client_sizes)
    run_loop(federation, len(schedule))
    return federation.global_params
