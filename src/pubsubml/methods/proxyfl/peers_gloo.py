"""The gloo communicators of ProxyFL's peer processes: PushSum, and central averaging to compare.

proxyfl.txt §3.4: per round a client ``isend``s its PushSum message (one flat float32 tensor,
``share·[w θ, w]``) to its out-peer on the exponential graph and ``irecv``s one from its in-peer;
a membership all-reduce (one float per client) lets clients that reached their ε budget leave the
graph.  :class:`GlooPushSum` does this over ``torch.distributed`` with the gloo backend, and
:class:`GlooCentralAveraging` is the server-based exchange it is compared with (§4: one message
per client per round against ``2 (K − 1)`` at the server).  Only float tensors cross process
boundaries, never pickled objects.

References
----------
proxyfl.txt §3.4 and §4; PyTorch ``torch.distributed`` point-to-point communication (gloo).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from pubsubml.methods.federated.loop import Strategy
from pubsubml.methods.federated.strategies import FedAvg
from pubsubml.methods.proxyfl.pushsum import combine_messages, exponential_edges, push_message

__all__ = ["GlooCentralAveraging", "GlooPushSum"]


def _wait(requests: Sequence[dist.Work | None]) -> None:
    for request in requests:
        if request is not None:
            request.wait()


class GlooPushSum:
    """PushSum between processes: one client per process, rank = client id.

    Attributes
    ----------
    bytes_sent : int
        Bytes of the PushSum messages this process sent (``4 (d + 1)`` per round it shared).
    sent_numels : list of int
        Number of values of every message sent (what left the client, for audits and tests).
    exchange_seconds, membership_seconds : list of float
        Per-round wall time of the PushSum exchange and of the membership all-reduce.
    """

    def __init__(self, *, world_size: int, share: float = 0.5) -> None:
        self.world_size, self.share = world_size, share
        self.bytes_sent = 0
        self.sent_numels: list[int] = []
        self.exchange_seconds: list[float] = []
        self.membership_seconds: list[float] = []

    def membership(self, client_ids: Sequence[int], willing: Tensor) -> Tensor:
        """All-reduce of one flag per client (float32 tensor of shape (K,))."""
        start = time.perf_counter()
        flags = torch.zeros(self.world_size, dtype=torch.float32)
        flags[list(client_ids)] = willing.to(torch.float32)
        dist.all_reduce(flags)
        self.membership_seconds.append(time.perf_counter() - start)
        return flags > 0.5

    def exchange(
        self,
        round_: int,
        client_ids: Sequence[int],
        theta: Tensor,
        weights: Tensor,
        participants: Sequence[int],
    ) -> tuple[Tensor, Tensor]:
        """Send ``share·[w θ, w]`` to the out-peer, receive from the in-peer, de-bias."""
        (rank,) = client_ids
        start = time.perf_counter()
        edges = exponential_edges(round_, participants)
        if rank not in participants or not edges:
            self.exchange_seconds.append(0.0)
            return theta, weights
        out = next(e.receiver for e in edges if e.sender == rank)
        src = next(e.sender for e in edges if e.receiver == rank)
        message, kept = push_message(theta[0], weights[0], self.share)
        received = torch.empty_like(message)
        requests = [dist.isend(message, dst=out), dist.irecv(received, src=src)]
        _wait(requests)
        new_theta, new_w = combine_messages(kept, [received])
        self.bytes_sent += message.numel() * message.element_size()
        self.sent_numels.append(message.numel())
        self.exchange_seconds.append(time.perf_counter() - start)
        return new_theta.unsqueeze(0), new_w.reshape(1)


class GlooCentralAveraging:
    """Central averaging between processes, rank 0 doubling as the server (for the comparison).

    Every client sends its flat model to rank 0, which aggregates them with the server
    :class:`~pubsubml.methods.federated.loop.Strategy` of the federated loop (FedAvg, every client
    weighing the same, by default) and sends the result back: the server handles ``2 (K − 1)``
    messages per round against one message per client for PushSum.
    """

    def __init__(self, *, world_size: int, strategy: Strategy | None = None) -> None:
        self.world_size = world_size
        self.strategy = strategy if strategy is not None else FedAvg()
        self.bytes_sent = 0
        self.exchange_seconds: list[float] = []

    def exchange_flat(self, rank: int, flat: Tensor) -> Tensor:
        """The server's aggregate of all ranks' ``flat`` tensors (their mean by default)."""
        start = time.perf_counter()
        if rank == 0:
            buffers = [torch.empty_like(flat) for _ in range(1, self.world_size)]
            _wait([dist.irecv(b, src=r) for r, b in enumerate(buffers, start=1)])
            weights = torch.full((self.world_size,), 1.0 / self.world_size)
            (mean,) = self.strategy.aggregate_round(
                [flat], [torch.stack([flat, *buffers])], weights
            )
            _wait([dist.isend(mean, dst=r) for r in range(1, self.world_size)])
            self.bytes_sent += (self.world_size - 1) * flat.numel() * flat.element_size()
        else:
            dist.send(flat, dst=0)
            mean = torch.empty_like(flat)
            dist.recv(mean, src=0)
            self.bytes_sent += flat.numel() * flat.element_size()
        self.exchange_seconds.append(time.perf_counter() - start)
        return mean
