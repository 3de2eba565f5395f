"""The baselines of the ProxyFL paper: Regular, Joint, FedAvg, AvgPush, CWT and FML.

All run the same rounds as :class:`~pubsubml.methods.proxyfl.protocol.ProxyFL` (:func:`run_rounds`: one
local epoch of DP-SGD, then communication, per-client accounting and budget drop-out) and differ only
in whether a client keeps a private model and in how models travel (proxyfl.txt §4.1):

========  ===============  ==========================================================
method    private model    communication after each round
========  ===============  ==========================================================
Regular   no               none: each client trains its DP model on its own data
Joint     no               none: one DP model on the pooled data (an upper bound)
FedAvg    no               a server averages the clients' DP models and sends it back
AvgPush   no               PushSum of the DP models on the exponential graph
CWT       no               cyclical weight transfer: each model moves to the next client
FML       yes (DML)        a server averages the DP "meme" models (the proxies)
========  ===============  ==========================================================

Regular, Joint, FedAvg, AvgPush and CWT train their only model with DP-SGD (it is what they share or
release); FML and ProxyFL use DP-SGD for the proxy and none for the private model (§4.1).

The server of FedAvg and FML (:class:`CentralAveraging`) is a server
:class:`~pubsubml.methods.federated.loop.Strategy` of the federated loop: each round it hands the
participants' models to the strategy's ``aggregate_round``, the call
:func:`~pubsubml.methods.federated.loop.run_federation` makes, and sends the result back.  By
default that strategy is :class:`UnweightedFedAvg`, FedAvg with every participant weighing the
same, as in the authors' code.  The rounds are :func:`run_rounds` for all seven methods, ProxyFL's
federation on the shared round loop (:func:`~pubsubml.methods.federated.loop.run_loop`): which
clients take part is decided before each round by each client from its own accountant (budget
drop-out, §3.3), not sampled by a server, and the cohort accounts its DP-SGD steps itself.

References
----------
proxyfl.txt §2 and §4.1; McMahan et al. 2017 (FedAvg); Chang et al. 2018 (CWT); Shen et al. 2020
(FML).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from pubsubml.errors import UnknownLearnerError
from pubsubml.methods.federated import strategies
from pubsubml.methods.federated.loop import Strategy
from pubsubml.methods.federated.strategies import weighted_mean
from pubsubml.methods.proxyfl.protocol import ClientCohort, Communicator, ProxyFL, ProxyMethod

__all__ = [
    "CWT",
    "FML",
    "METHODS",
    "AvgPush",
    "CentralAveraging",
    "CyclicTransfer",
    "FedAvg",
    "Joint",
    "NoCommunication",
    "Regular",
    "UnweightedFedAvg",
    "create_method",
    "register_method",
]


class _InProcess:
    """Membership of in-process clients: participation is each client's own willingness."""

    def __init__(self, n_clients: int) -> None:
        self.n_clients = n_clients
        self.bytes_sent = 0

    def membership(self, client_ids: Sequence[int], willing: Tensor) -> Tensor:
        out = torch.zeros(self.n_clients, dtype=torch.bool)
        out[list(client_ids)] = willing
        return out


class NoCommunication(_InProcess):
    """Nothing is exchanged (Regular, Joint)."""

    def exchange(
        self,
        round_: int,
        client_ids: Sequence[int],
        theta: Tensor,
        weights: Tensor,
        participants: Sequence[int],
    ) -> tuple[Tensor, Tensor]:
        """Return the proxies unchanged."""
        return theta, weights


@dataclass(eq=False)
class UnweightedFedAvg(strategies.FedAvg):
    """FedAvg's server with every participant weighing the same: the plain mean of their models.

    The ProxyFL authors average unweighted (their clients hold equally many records, proxyfl.txt
    §4.1); the mean is :func:`~pubsubml.methods.federated.strategies.weighted_mean` without
    weights, whatever ``weights`` the loop passes.
    """

    def aggregate(
        self, global_params: list[Tensor], client_params: list[Tensor], weights: Tensor
    ) -> list[Tensor]:
        """The plain mean of the participants' models."""
        return weighted_mean(client_params)


class CentralAveraging(_InProcess):
    """A server aggregates the participants' models and sends the result back (FedAvg, FML).

    The server holds a global model, the common initial proxy at first, and each round passes the
    participants' models (weighing the same) to its strategy's ``aggregate_round``, as
    :func:`~pubsubml.methods.federated.loop.run_federation` does; participants receive the new
    global model, clients that dropped out keep theirs.  The strategy's local term is not used:
    the clients' local objective is the cohort's (DML or plain DP-SGD).

    Parameters
    ----------
    n_clients : int
    initial_model : Tensor of shape (d,)
        The proxy every client starts from (the agreed initialisation), flat.
    strategy : Strategy, optional
        The server update; :class:`UnweightedFedAvg` by default (proxyfl.txt §4.1).  Strategies
        that change only the server's side fit (FedAvg, FedAdam).

    Attributes
    ----------
    global_model : list of one Tensor of shape (d,)
        What the server sent last (the initial model before the first round).
    bytes_sent : int
        Client uploads (``d`` float32 per participant per round).
    server_bytes : int
        The server's downloads to the clients (as many again): its traffic grows linearly with the
        number of clients, against one message per client for PushSum (§3.4).
    """

    def __init__(
        self, n_clients: int, initial_model: Tensor, strategy: Strategy | None = None
    ) -> None:
        super().__init__(n_clients)
        self.server_bytes = 0
        self.strategy = strategy if strategy is not None else UnweightedFedAvg()
        self.global_model = [initial_model.detach().clone()]
        self.strategy.start(self.global_model)

    def exchange(
        self,
        round_: int,
        client_ids: Sequence[int],
        theta: Tensor,
        weights: Tensor,
        participants: Sequence[int],
    ) -> tuple[Tensor, Tensor]:
        """Every participant gets the strategy's aggregate of the participants' proxies."""
        rows = [s for s, k in enumerate(client_ids) if k in set(participants)]
        if not rows:
            return theta, weights
        theta = theta.clone()
        client_weights = torch.full((len(rows),), 1.0 / len(rows))
        self.global_model = self.strategy.aggregate_round(
            self.global_model, [theta[rows]], client_weights
        )
        theta[rows] = self.global_model[0]
        size = theta.shape[1] * theta.element_size() * len(rows)
        self.bytes_sent += size
        self.server_bytes += size
        return theta, weights


class CyclicTransfer(_InProcess):
    """Cyclical weight transfer: each participant's model moves to the next one in the ring (CWT)."""

    def exchange(
        self,
        round_: int,
        client_ids: Sequence[int],
        theta: Tensor,
        weights: Tensor,
        participants: Sequence[int],
    ) -> tuple[Tensor, Tensor]:
        """Participant ``i`` (in id order) receives the model of participant ``i − 1``."""
        row = {k: s for s, k in enumerate(client_ids)}
        ring = sorted(participants)
        if len(ring) < 2:
            return theta, weights
        out = theta.clone()
        for i, k in enumerate(ring):
            out[row[k]] = theta[row[ring[i - 1]]]
        self.bytes_sent += theta.shape[1] * theta.element_size() * len(ring)
        return out, weights


def _server_for(cohort: ClientCohort) -> CentralAveraging:
    """The server of FedAvg and FML over the cohort, starting from its common initial proxy."""
    return CentralAveraging(len(cohort.client_ids), cohort.flat_proxies()[0])


class Regular(ProxyMethod):
    """Each client trains a DP model on its own data; no collaboration (proxyfl.txt §4.1).

    Parameters are those of :class:`~pubsubml.methods.proxyfl.protocol.ProxyFL` without ``push_share``;
    the DP model is an MLP with ``proxy_hidden`` (the "proxy" slot of the cohort).
    """

    uses_private = False

    def _communicator(self, cohort: ClientCohort) -> Communicator:
        return NoCommunication(len(cohort.client_ids))


class Joint(Regular):
    """One DP model trained on the pooled data of all clients (the upper bound of §4.1).

    ``fit`` pools the clients' data into one client; ε is that of the pooled data set (one record
    per individual, sample rate ``B / Σ n_k``).
    """

    def fit(
        self,
        clients: Sequence[tuple[Any, Any]],
        *,
        client_ids: Sequence[int] | None = None,
        communicator: Communicator | None = None,
        callback: Callable[[int, ClientCohort], None] | None = None,
    ) -> Joint:
        """Pool ``clients`` and train one model (client 0 of the fitted cohort)."""
        X = torch.cat([torch.as_tensor(X, dtype=torch.float32) for X, _ in clients])
        y = torch.cat([torch.as_tensor(y, dtype=torch.long) for _, y in clients])
        super().fit([(X, y)], client_ids=[0], communicator=communicator, callback=callback)
        return self


class FedAvg(Regular):
    """Central averaging of the clients' DP models after every round (McMahan et al. 2017)."""

    def _communicator(self, cohort: ClientCohort) -> Communicator:
        return _server_for(cohort)


class AvgPush(ProxyFL):
    """PushSum averaging of DP models on the exponential graph, no private model (§4.1)."""

    uses_private = False


class CWT(Regular):
    """Cyclical weight transfer of DP models (Chang et al. 2018)."""

    def _communicator(self, cohort: ClientCohort) -> Communicator:
        return CyclicTransfer(len(cohort.client_ids))


class FML(ProxyMethod):
    """Federated mutual learning: private + DP meme model, memes averaged by a server (Shen et al.)."""

    def _communicator(self, cohort: ClientCohort) -> Communicator:
        return _server_for(cohort)


METHODS: dict[str, type[ProxyMethod]] = {
    "AvgPush": AvgPush,
    "CWT": CWT,
    "FML": FML,
    "FedAvg": FedAvg,
    "Joint": Joint,
    "ProxyFL": ProxyFL,
    "Regular": Regular,
}


def register_method(name: str, cls: type[ProxyMethod]) -> None:
    """Register a method class under ``name`` (explicit plug-in registry).

    Raises
    ------
    ValueError
        If the name is taken or ``cls`` is not a :class:`ProxyMethod` subclass.
    """
    if name in METHODS or not (isinstance(cls, type) and issubclass(cls, ProxyMethod)):
        raise ValueError(f"cannot register {cls!r} as {name!r}")
    METHODS[name] = cls


def create_method(name: str, **params: Any) -> ProxyMethod:
    """A method by name: ``create_method("FedAvg", n_classes=10, rounds=5)``.

    Raises
    ------
    UnknownLearnerError
        No method registered under ``name``.

    Examples
    --------
    >>> type(create_method("CWT", n_classes=2)).__name__
    'CWT'
    """
    if name not in METHODS:
        raise UnknownLearnerError(f"no method {name!r}; known: {sorted(METHODS)}")
    return METHODS[name](**params)
