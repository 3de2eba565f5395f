"""De-biased PushSum gossip over a time-varying directed exponential graph.

ProxyFL exchanges proxies with PushSum (proxyfl.txt §3.4; Algorithm 1, lines 7–11): each client
keeps a de-biasing weight ``w_k`` (``w_k⁽⁰⁾ = 1``), sends the share ``P_{k',k}`` of its numerator
``w_k θ_k`` and of ``w_k`` to its out-neighbour, keeps the rest, adds what it receives and divides:
``θ_k ← (Σ_{k'} P_{k,k'} w_{k'} θ_{k'}) / (Σ_{k'} P_{k,k'} w_{k'})``.  With a column-stochastic
``P⁽ᵗ⁾`` the numerators and the weights follow the same Markov chain, so their ratio converges to the
exact average ``(1/K) Σ_k θ_k⁽⁰⁾`` even when ``P`` is not doubly stochastic (§3.4).

The graph is the directed exponential graph of Assran et al. (2019) used in proxyfl.txt §4 (Fig. 2):
in round ``t`` every participating client sends to the one that is ``2^(t mod ⌈log2 K⌉)`` positions
ahead of it among the ``K`` participating clients, so each client sends one message and receives one
per round, for any ``K`` (a power of two or not).  Clients that dropped out are removed from the ring
before the positions are counted, so the graph stays connected whoever leaves.

Message format (one flat float32 tensor, used by the simulation and the real peers alike)::

    [share · w_k θ_k (d values), share · w_k (1 value)]

Notes
-----
Algorithm 1 line 7 writes the message as ``P_{k',k} θ_k`` with ``θ_k`` already de-biased (line 11).
Mixing de-biased values and then dividing again by the mixed weight is only the PushSum average of
§3.4 when every ``w_k = 1``; we send the numerator ``w_k θ_k``, which is what the derivation in §3.4
(``Θ⁽ᵗ⁺¹⁾ = P⁽ᵗ⁾Θ⁽ᵗ⁾`` on the biased values, then ``θ/w``) requires.  The two coincide on the
exponential graph without dropouts, where ``P`` is doubly stochastic and ``w ≡ 1``.  The authors'
released code replaces the proxy by the received one (a permutation, no averaging); we average.

References
----------
proxyfl.txt §3.4 and §4 (Fig. 2); Kempe, Dobra and Gehrke, "Gossip-based computation of aggregate
information", FOCS 2003; Assran et al., "Stochastic gradient push for distributed deep learning",
ICML 2019.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from pubsubml.errors import DataValidationError

__all__ = [
    "PushEdge",
    "SimulatedPushSum",
    "combine_messages",
    "exponential_edges",
    "exponential_matrix",
    "exponential_offset",
    "mix",
    "push_message",
]


@dataclass(frozen=True)
class PushEdge:
    """One directed message of a gossip round: ``sender`` pushes to ``receiver``."""

    sender: int
    receiver: int


def exponential_offset(round_: int, n_participants: int) -> int:
    """How many positions ahead a client sends in round ``t``: ``2^(t mod ⌈log2 K⌉)``.

    Parameters
    ----------
    round_ : int
        ``t ≥ 0``.
    n_participants : int
        ``K ≥ 1`` clients taking part in the round.

    Returns
    -------
    int
        The offset; 0 when ``K = 1`` (nobody to talk to).

    Raises
    ------
    ValueError
        On a negative round or ``K < 1``.

    Notes
    -----
    ``⌈log2 K⌉ = ⌊log2(K − 1)⌋ + 1`` for ``K ≥ 2``, so the offsets are the paper's
    ``2⁰, 2¹, …, 2^⌊log2(K−1)⌋`` (proxyfl.txt §4), visited periodically.

    Examples
    --------
    >>> [exponential_offset(t, 6) for t in range(4)]
    [1, 2, 4, 1]
    >>> exponential_offset(5, 1)
    0
    """
    if round_ < 0 or n_participants < 1:
        raise ValueError(
            f"need round >= 0 and at least one participant, got {round_}, {n_participants}"
        )
    if n_participants == 1:
        return 0
    period = math.ceil(math.log2(n_participants))
    return 2 ** (round_ % period)


def exponential_edges(round_: int, participants: Sequence[int]) -> list[PushEdge]:
    """The messages of round ``t`` on the exponential graph over the participating clients.

    Parameters
    ----------
    round_ : int
    participants : sequence of int
        Ids of the clients that share in this round (any order; sorted internally).  Clients that
        dropped out are simply absent.

    Returns
    -------
    list of PushEdge
        One edge per participant (its single out-message), in the order of sorted ids; empty when
        fewer than two clients participate.

    Raises
    ------
    DataValidationError
        On duplicate ids.

    Examples
    --------
    >>> [(e.sender, e.receiver) for e in exponential_edges(1, [0, 2, 3, 5, 7, 9])]
    [(0, 3), (2, 5), (3, 7), (5, 9), (7, 0), (9, 2)]
    """
    ids = sorted(int(i) for i in participants)
    if len(set(ids)) != len(ids):
        raise DataValidationError(f"duplicate participant ids in {list(participants)}")
    if len(ids) < 2:
        return []
    offset = exponential_offset(round_, len(ids))
    return [PushEdge(k, ids[(pos + offset) % len(ids)]) for pos, k in enumerate(ids)]


def exponential_matrix(
    round_: int,
    n_clients: int,
    participants: Sequence[int] | None = None,
    share: float | Sequence[float] = 0.5,
) -> Tensor:
    """The column-stochastic mixing matrix ``P⁽ᵗ⁾`` of one round (float64, shape (K, K)).

    ``P[k, k] = 1 − share_k`` and ``P[out(k), k] = share_k`` for participants; a client that does
    not participate keeps everything (``P[k, k] = 1``).

    Parameters
    ----------
    round_ : int
    n_clients : int
    participants : sequence of int, optional
        Defaults to all clients.
    share : float or sequence of float, default=0.5
        Fraction of its numerator and weight a client pushes (per client or for all), in (0, 1].

    Raises
    ------
    DataValidationError
        On a share outside (0, 1] or ids outside ``range(n_clients)``.

    Examples
    --------
    >>> exponential_matrix(0, 3).sum(0).tolist()
    [1.0, 1.0, 1.0]
    """
    shares = _shares(share, n_clients)
    ids = list(range(n_clients)) if participants is None else list(participants)
    if any(not 0 <= i < n_clients for i in ids):
        raise DataValidationError(f"participant ids must lie in range({n_clients}), got {ids}")
    P = torch.eye(n_clients, dtype=torch.float64)
    for edge in exponential_edges(round_, ids):
        P[edge.sender, edge.sender] = 1.0 - shares[edge.sender]
        P[edge.receiver, edge.sender] = shares[edge.sender]
    return P


def _shares(share: float | Sequence[float], n: int) -> list[float]:
    shares = [float(share)] * n if isinstance(share, int | float) else [float(s) for s in share]
    if len(shares) != n or any(not 0.0 < s <= 1.0 for s in shares):
        raise DataValidationError(f"share must be in (0, 1] for each of {n} clients, got {share}")
    return shares


def mix(P: Tensor, theta: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
    """One PushSum round with any column-stochastic ``P``: returns de-biased ``θ`` and new ``w``.

    Parameters
    ----------
    P : Tensor of shape (K, K)
        ``P[k, k']`` is the share of client ``k'``'s mass that client ``k`` receives; columns sum to 1.
    theta : Tensor of shape (K, d)
        De-biased parameters (Algorithm 1's ``θ_k``, one row per client).
    weights : Tensor of shape (K,)
        De-biasing weights ``w_k > 0``.

    Returns
    -------
    theta : Tensor of shape (K, d)
        ``(P (w ∘ Θ)) / (P w)`` row-wise (Algorithm 1 lines 9–11).
    weights : Tensor of shape (K,)
        ``P w`` (line 10).

    Raises
    ------
    DataValidationError
        On mismatched shapes, columns that do not sum to one, or non-positive weights.

    Examples
    --------
    >>> P = torch.tensor([[0.5, 0.0], [0.5, 1.0]], dtype=torch.float64)
    >>> theta, w = mix(P, torch.tensor([[2.0], [4.0]], dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    >>> theta.squeeze(1).tolist(), w.tolist()
    ([2.0, 3.3333333333333335], [0.5, 1.5])
    """
    K = theta.shape[0]
    if P.shape != (K, K) or weights.shape != (K,):
        raise DataValidationError(
            f"P {tuple(P.shape)}, theta {tuple(theta.shape)} and weights {tuple(weights.shape)} disagree"
        )
    if not torch.allclose(P.sum(0), torch.ones(K, dtype=P.dtype), atol=1e-9):
        raise DataValidationError("P must be column-stochastic (every column sums to 1)")
    if bool((weights <= 0).any()):
        raise DataValidationError("de-biasing weights must be positive")
    P = P.to(theta.dtype)
    numer = P @ (weights.to(theta.dtype).unsqueeze(1) * theta)
    new_w = P @ weights.to(theta.dtype)
    return numer / new_w.unsqueeze(1), new_w.to(weights.dtype)


def push_message(theta: Tensor, weight: Tensor, share: float) -> tuple[Tensor, Tensor]:
    """Split one client's PushSum mass into what it sends and what it keeps (Alg. 1 line 7).

    Parameters
    ----------
    theta : Tensor of shape (d,)
        The de-biased proxy, flat (float32).
    weight : Tensor of shape ()
        Its de-biasing weight ``w_k``.
    share : float
        ``P_{out,k}``, in (0, 1].

    Returns
    -------
    message : Tensor of shape (d + 1,)
        ``share · [w θ, w]``: the only thing a client ever sends.
    kept : Tensor of shape (d + 1,)
        ``(1 − share) · [w θ, w]``.

    Examples
    --------
    >>> msg, kept = push_message(torch.tensor([2.0, 4.0]), torch.tensor(1.0), 0.5)
    >>> msg.tolist(), kept.tolist()
    ([1.0, 2.0, 0.5], [1.0, 2.0, 0.5])
    """
    packed = torch.cat([theta * weight, weight.reshape(1).to(theta.dtype)])
    return packed * share, packed * (1.0 - share)


def combine_messages(kept: Tensor, received: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """Add the received messages to the kept mass and de-bias (Alg. 1 lines 8–11).

    Parameters
    ----------
    kept : Tensor of shape (d + 1,)
    received : sequence of Tensor of shape (d + 1,)
        Messages from in-neighbours, added in the given order.

    Returns
    -------
    theta : Tensor of shape (d,)
        The de-biased proxy ``Σ numerators / Σ weights``.
    weight : Tensor of shape ()
        The new weight.

    Raises
    ------
    DataValidationError
        On a message of the wrong size or a non-positive total weight.

    Examples
    --------
    >>> theta, w = combine_messages(torch.tensor([1.0, 2.0, 0.5]), [torch.tensor([3.0, 1.0, 0.5])])
    >>> theta.tolist(), float(w)
    ([4.0, 3.0], 1.0)
    """
    total = kept.clone()
    for msg in received:
        if msg.shape != kept.shape:
            raise DataValidationError(
                f"message of shape {tuple(msg.shape)}, expected {tuple(kept.shape)}"
            )
        total = total + msg
    weight = total[-1]
    if not float(weight) > 0.0:
        raise DataValidationError(f"de-biasing weight must stay positive, got {float(weight)}")
    return total[:-1] / weight, weight


class SimulatedPushSum:
    """In-process PushSum on the exponential graph: the communicator of the simulation.

    Routes exactly the messages real peers send (:func:`push_message`, :func:`combine_messages`),
    so a simulated round gives the same proxies as the multi-process one.

    Parameters
    ----------
    n_clients : int
    share : float, default=0.5
        ``P_{out,k}`` for every client.
    record : bool, default=False
        Keep every message in :attr:`sent` as ``(round, sender, receiver, tensor)``.

    Attributes
    ----------
    bytes_sent : int
        Bytes of all messages so far (float32, ``d + 1`` values each).
    sent : list of tuple
    """

    def __init__(self, n_clients: int, *, share: float = 0.5, record: bool = False) -> None:
        _shares(share, n_clients)
        self.n_clients, self.share, self.record = n_clients, share, record
        self.bytes_sent = 0
        self.sent: list[tuple[int, int, int, Tensor]] = []

    def membership(self, client_ids: Sequence[int], willing: Tensor) -> Tensor:
        """All clients are local: participation is the clients' own willingness."""
        out = torch.zeros(self.n_clients, dtype=torch.bool)
        out[list(client_ids)] = willing
        return out

    def exchange(
        self,
        round_: int,
        client_ids: Sequence[int],
        theta: Tensor,
        weights: Tensor,
        participants: Sequence[int],
    ) -> tuple[Tensor, Tensor]:
        """One PushSum round among ``participants``; others keep their proxies and weights.

        Parameters
        ----------
        round_ : int
        client_ids : sequence of int
            Global id of each row of ``theta``.
        theta : Tensor of shape (S, d)
        weights : Tensor of shape (S,)
        participants : sequence of int

        Returns
        -------
        theta : Tensor of shape (S, d)
        weights : Tensor of shape (S,)
        """
        row = {k: s for s, k in enumerate(client_ids)}
        theta, weights = theta.clone(), weights.clone()
        edges = exponential_edges(round_, participants)
        messages, kept = {}, {}
        for edge in edges:
            s = row[edge.sender]
            messages[edge.sender], kept[edge.sender] = push_message(
                theta[s], weights[s], self.share
            )
        for edge in edges:
            msg = messages[edge.sender]
            self.bytes_sent += msg.numel() * msg.element_size()
            if self.record:
                self.sent.append((round_, edge.sender, edge.receiver, msg.clone()))
        for edge in edges:
            s = row[edge.receiver]
            theta[s], weights[s] = combine_messages(kept[edge.receiver], [messages[edge.sender]])
        return theta, weights
