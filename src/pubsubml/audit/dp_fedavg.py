"""One-run audit of client-level DP-FedAvg (central DP) with white-box Dirac client canaries.

What is audited is the server's mechanism as :class:`~pubsubml.methods.federated.rounds.FederatedMLP`
runs it with ``dp="central"``: :class:`~pubsubml.methods.federated.dp.CentralDP` around
:class:`~pubsubml.methods.federated.strategies.FedAvg` in the shared round loop
(:func:`~pubsubml.methods.federated.loop.run_federation`) — Poisson client sampling at
``q = client_fraction``, each update clipped to C, N(0, σ²C²) added to the sum, one
subsampled-Gaussian event per round, σ calibrated to (ε, δ) for the rounds.  Real clients train
on the stacked DP-SGD engine (:class:`~pubsubml.methods.federated.rounds.StackedClients`, without
record-level noise, as central DP runs them).

The unit of privacy is a client, so the canaries are clients (Steinke, Nasr & Jagielski,
NeurIPS 2023, §6, one level up): canary client ``i`` joins the federation with probability ½ and,
whenever it is sampled, sends the global model plus ``10·C`` on one coordinate of its own (a
first-layer weight of an input column that is zero in every real client's rows, so no real
update reaches it); a correct server clips it to C.  The auditor sees every released noisy mean
update (what the server hands the wrapped strategy) and scores each canary by
:func:`~pubsubml.audit.guesses.dirac_scores`.

Negative controls keep the correct mechanism's claim: ``"noise-off"`` (σ = 0), ``"noise-x0.1"``
(σ/10) and ``"clip-off"`` (C → 10⁶·C with the noise kept at σ·C).

References
----------
McMahan et al., "Learning differentially private recurrent language models", ICLR 2018
(client-level DP-FedAvg); Steinke, Nasr & Jagielski, NeurIPS 2023 (one-run audits); pubsub-ml.txt
§7.3 (the DP federated baselines).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pubsubml.audit.dirac import (
    REAL_FEATURES,
    broken_run,
    dirac_coordinates,
    dirac_rows,
    mlp_parameter_count,
    one_run_result,
    run_details,
)
from pubsubml.audit.dpsgd import check_audit
from pubsubml.audit.guesses import draw_inclusion
from pubsubml.audit.result import AuditResult
from pubsubml.methods.federated.dp import CentralDP, noise_multipliers
from pubsubml.methods.federated.loop import ClientUpdates, LocalTerm, run_federation
from pubsubml.methods.federated.rounds import StackedClients
from pubsubml.methods.federated.strategies import FedAvg
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.dpsgd import DPSGDConfig, init_mlp

__all__ = ["DEFAULT_CLIENT_CANARIES", "audit_dp_fedavg"]

#: m: as many canary clients as Dirac canaries in the DP-SGD audits (Steinke et al.'s size).
DEFAULT_CLIENT_CANARIES = 5000
# DPFedAvg's public defaults (pubsub-ml.txt §7.3 baselines) for the network and q; 100 rounds
# rather than its 30, so that a canary client that joined is sampled at least once with
# probability 1 − 0.9¹⁰⁰ > 0.9999 (at 30 rounds 4 % of them are never seen, which caps what any
# attack can show near log(1/0.04)).
_HIDDEN = (100, 50)
_ROUNDS = 100
_CLIENT_FRACTION = 0.1
_BATCH = 100


class _RecordingFedAvg(FedAvg):
    """FedAvg that keeps, each round, the released noisy mean update on the canaries' coordinates."""

    def __init__(self, client_fraction: float, coords: Tensor) -> None:
        super().__init__(client_fraction=client_fraction)
        self.coords, self.rows = coords, list[Tensor]()

    def aggregate(
        self, global_params: list[Tensor], client_params: list[Tensor], weights: Tensor
    ) -> list[Tensor]:
        flat = torch.cat([p.reshape(-1) for p in global_params])
        virtual = torch.cat([p.reshape(-1) for p in client_params])
        self.rows.append((virtual - flat)[self.coords].clone())
        return super().aggregate(global_params, client_params, weights)


class _BrokenCentralDP(CentralDP):
    """A negative control: noises and clips with its own (σ, C), accounts the shipped σ."""

    def __init__(self, strategy: FedAvg, shipped_sigma: float, **kwargs: Any) -> None:
        super().__init__(strategy, **kwargs)
        self.shipped_sigma = shipped_sigma

    def aggregate_round(
        self, global_params: list[Tensor], client_params: list[Tensor] | None, weights: Tensor
    ) -> list[Tensor]:
        self.accountant.step(
            noise_multiplier=self.shipped_sigma, sample_rate=self.client_fraction, steps=1
        )
        return self.aggregate(global_params, client_params, weights)


@dataclasses.dataclass
class _WithCanaries:
    """Real clients train on the engine; a sampled canary client sends its Dirac update."""

    real: StackedClients
    n_real: int
    dirac: Tensor  # (n_canary_clients, P): each included canary's update

    def __call__(
        self, round_: int, chosen: np.ndarray, global_params: list[Tensor], local_term: LocalTerm
    ) -> ClientUpdates:
        real = chosen[chosen < self.n_real]
        canary = torch.from_numpy(chosen[chosen >= self.n_real] - self.n_real)
        flat = torch.cat([p.reshape(-1) for p in global_params])
        rows = [flat + self.dirac[canary]]
        if len(real):
            sent = self.real(round_, real, global_params, local_term).params
            rows.insert(0, torch.cat([p.reshape(len(real), -1) for p in sent], 1))
        stacked = torch.cat(rows)
        sizes = [p.numel() for p in global_params]
        params = [
            part.reshape(len(stacked), *p.shape)
            for part, p in zip(stacked.split(sizes, 1), global_params, strict=True)
        ]
        return ClientUpdates(params, [[] for _ in range(len(stacked))])


def audit_dp_fedavg(
    *,
    epsilon: float = 1.0,
    delta: float = 1e-5,
    variant: str = "correct",
    canaries: int | None = None,
    real_clients: int = 20,
    rows_per_client: int = 100,
    rounds: int = _ROUNDS,
    client_fraction: float = _CLIENT_FRACTION,
    confidence: float = 0.95,
    seed: int = 0,
) -> AuditResult:
    """One-run audit of client-level DP-FedAvg with Dirac canary clients (module docstring).

    Parameters
    ----------
    epsilon, delta : float
        The federation's client-level target; σ is calibrated to it for ``rounds`` rounds at
        ``client_fraction``, as ``DPFedAvg(dp="central")`` does.
    variant : {"correct", "noise-off", "noise-x0.1", "clip-off"}, default="correct"
    canaries : int, optional
        ``m`` canary clients, default :data:`DEFAULT_CLIENT_CANARIES`.
    real_clients, rows_per_client : int
        The real federation (a public synthetic task, 10 features).
    rounds : int, default=100
    client_fraction : float, default=0.1
        ``q``, DPFedAvg's default.
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
    >>> r = audit_dp_fedavg(epsilon=1.0, canaries=200, real_clients=4, rows_per_client=20,
    ...                     rounds=5, client_fraction=0.5)
    >>> r.lower_bound <= r.claimed_epsilon
    True
    """
    m = DEFAULT_CLIENT_CANARIES if canaries is None else canaries
    check_audit(epsilon, variant, m, delta, confidence, rows_per_client)
    _check_federation(real_clients, rounds, client_fraction)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    out0 = _HIDDEN[0]
    width = REAL_FEATURES + -(-m // out0)
    sizes = (width, *_HIDDEN, 2)
    real = _real_clients(real_clients, rows_per_client, width, rng, seed)
    included = draw_inclusion(m, rng)
    coords = dirac_coordinates(m, out0, width)
    C = 1.0
    dirac = dirac_rows(coords, included, mlp_parameter_count(sizes), C)
    sigma = noise_multipliers(epsilon, delta, [client_fraction], [rounds], "pld")[0]
    q = client_fraction
    server, releases = _run_rounds(real, dirac, coords, sizes, variant, sigma, q, rounds, seed)
    return one_run_result(
        "dp-fedavg-central",
        variant,
        claimed_epsilon=compute_epsilon(server.accountant.events, delta),
        delta=delta,
        releases=releases,
        q=q,
        sigma=sigma,
        details=run_details(
            "central", rounds, q, sigma, real_clients * rows_per_client, counted="rounds"
        ),
        canary="client",
        included=included,
        confidence=confidence,
        start=start,
    )


def _check_federation(real_clients: int, rounds: int, client_fraction: float) -> None:
    if real_clients < 1 or rounds < 1 or not 0 < client_fraction <= 1:
        raise ValueError("need real_clients >= 1, rounds >= 1 and 0 < client_fraction <= 1")


def _run_rounds(
    real: StackedClients,
    dirac: Tensor,
    coords: Tensor,
    sizes: tuple[int, ...],
    variant: str,
    sigma: float,
    client_fraction: float,
    rounds: int,
    seed: int,
) -> tuple[CentralDP, np.ndarray]:
    """Run the federation of the real clients and the included canary clients, from a fresh MLP.

    Returns the server and its released mean updates on the canaries' coordinates in units of
    C = 1, shape (rounds, m).
    """
    recorder = _RecordingFedAvg(client_fraction, coords)
    n_real = len(real.Xs)
    n_clients = n_real + len(dirac)
    server = _audited_server(recorder, variant, sigma, 1.0, n_clients, seed)
    init = init_mlp(sizes, "tanh", torch.Generator().manual_seed(seed))
    params = [p.detach().clone() for p in init.parameters()]
    schedule = server.sample(n_clients, rounds, seed)
    rows_per_client = len(real.Xs[0])
    run_federation(
        params,
        schedule,
        _WithCanaries(real, n_real, dirac),
        server,
        [rows_per_client] * n_real + [1] * len(dirac),
    )
    # the server divides the noised sum by q·N
    return server, torch.stack(recorder.rows).double().numpy() * client_fraction * n_clients


def _real_clients(
    n: int, rows: int, width: int, rng: np.random.Generator, seed: int
) -> StackedClients:
    """``n`` clients of the public synthetic task (one shared rule), widened by zero canary
    columns to ``width``, training without record-level noise as central DP runs them."""
    w = rng.standard_normal(REAL_FEATURES)
    Xs, ys = [], []
    for _ in range(n):
        X = rng.standard_normal((rows, REAL_FEATURES))
        y = (X @ w + rng.standard_normal(rows) > 0).astype(np.int64)
        padded = torch.zeros(rows, width)
        padded[:, :REAL_FEATURES] = torch.from_numpy(X.astype(np.float32))
        Xs.append(padded)
        ys.append(torch.from_numpy(y))
    base = DPSGDConfig(batch_size=_BATCH, epochs=1, private=False, max_grad_norm=1.0)
    return StackedClients(Xs, ys, [base] * n, "tanh", "cross_entropy", seed=seed * 1_000_003)


def _audited_server(
    recorder: _RecordingFedAvg, variant: str, sigma: float, clip: float, n_clients: int, seed: int
) -> CentralDP:
    """The shipped :class:`CentralDP` around ``recorder``, or a negative control's server."""
    common: dict[str, Any] = {"n_clients": n_clients, "seed": seed, "backend": "pld"}
    if variant == "correct":
        return CentralDP(recorder, noise_multiplier=sigma, clip_norm=clip, **common)
    run_sigma, run_clip = broken_run(variant, sigma, clip)
    return _BrokenCentralDP(
        recorder, sigma, noise_multiplier=run_sigma, clip_norm=run_clip, **common
    )
