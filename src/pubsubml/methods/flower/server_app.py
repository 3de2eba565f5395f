"""A Flower ``ServerApp`` running Flower's own strategies over our DP clients.

:func:`dp_server_app` builds the ``ServerApp``: the initial global MLP (drawn as our federated
baselines draw it, :func:`~pubsubml.privacy.dpsgd.init_mlp`), Flower's ``FedAvg``, ``FedProx``
or ``FedAdam`` from ``flwr.serverapp.strategy`` (optionally wrapped in Flower's
``DifferentialPrivacyServerSideFixedClipping`` for client-level DP, with Flower's RDP accountant),
``rounds`` rounds through ``strategy.start``, then one ``query.pubsubml_privacy`` message to
every site for the DP events of all its rounds (and, for sites given ``publish``, their release).
The outcome lands in a :class:`FlowerRun`: the global model as a
:class:`~pubsubml.methods.flower.model.FlowerMLP` (``predict_proba`` on DataFrames; publishable
with ``Site.publish``), each site's events and ε, Flower's own ε where its accountant reports one,
and the wall time of every round.

References
----------
pubsub-ml.txt §7.3 (FedAvg, FedProx, FedAdam; "the server adds noise"); McMahan et al., ICLR 2018
(client-level DP-FedAvg, the fixed-clipping wrapper).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp import strategy as flower_strategy
from flwr.supercore.privacy_accounting import (
    NeighboringRelation,
    PrivacyConfig,
    SamplingMethod,
)
from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant

from pubsubml.errors import PrivacyError
from pubsubml.methods.flower.client_app import ClientConfigError, DPClientConfig
from pubsubml.methods.flower.model import FlowerMLP, build
from pubsubml.methods.flower.records import (
    PRIVACY_QUERY,
    events_from_json,
    params_from_record,
    params_to_record,
)
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.dpsgd import init_mlp
from pubsubml.privacy.events import DPEvent

__all__ = [
    "STRATEGIES",
    "CentralDPConfig",
    "FlowerRun",
    "SiteRecord",
    "check_publishable",
    "dp_server_app",
]

#: The Flower strategies :func:`dp_server_app` runs, by name.
STRATEGIES = ("fedavg", "fedprox", "fedadam")


@dataclass(frozen=True, kw_only=True)
class CentralDPConfig:
    """Client-level DP added by the server with Flower's fixed-clipping wrapper.

    The server clips each site's update to ``clipping_norm`` and adds N(0, σ²C²/m²) to the mean
    of the ``m`` sampled updates; Flower's RDP accountant (no amplification, equal weights)
    reports ε at ``delta`` for a whole site.  The sites train in the clear
    (``DPClientConfig(dp=False)``): the server must be trusted.
    """

    noise_multiplier: float
    clipping_norm: float = 1.0
    delta: float = 1e-5


@dataclass
class SiteRecord:
    """What one site reported at the end of a run."""

    node_id: int
    partition_id: int
    events: list[DPEvent]
    rounds: int
    n_examples: int
    epsilon: float
    noise: str
    published: str | None = None


@dataclass
class FlowerRun:
    """The outcome of one :func:`dp_server_app` run (filled when the run ends).

    Attributes
    ----------
    model : FlowerMLP or None
        The global model.
    sites : list of SiteRecord
        Per site, by partition id.
    flower_epsilon : float or None
        ε at the central-DP ``delta`` from Flower's accountant (client level), when it ran.
    round_seconds : list of float
        Wall time of every round (training, aggregation and messaging).
    history : flwr.serverapp.strategy.Result or None
    """

    model: FlowerMLP | None = None
    sites: list[SiteRecord] = field(default_factory=list)
    flower_epsilon: float | None = None
    round_seconds: list[float] = field(default_factory=list)
    history: Any = None

    @property
    def epsilons(self) -> dict[int, float]:
        """Each site's composed ε, by partition id."""
        return {s.partition_id: s.epsilon for s in self.sites}


def _strategy(
    name: str,
    n_clients: int,
    client_fraction: float,
    proximal_mu: float,
    server_lr: float,
    central: CentralDPConfig | None,
) -> Any:
    common: dict[str, Any] = {
        "fraction_train": client_fraction,
        "fraction_evaluate": 0.0,
        # Flower samples int(connected · fraction) sites but at least min_train_nodes, counted
        # before it waits for min_available_nodes: a first round that starts before every site
        # has connected would take fewer sites without this floor.
        "min_train_nodes": max(1, int(n_clients * client_fraction)),
        "min_available_nodes": n_clients,
        # Client-level DP bounds each site's influence, so sites weigh the same (Flower's
        # accountant requires it); record-level DP keeps FedAvg's n_k / Σ n_k.
        "weighted_by_key": "num-examples" if central is None else "unit-weight",
    }
    if name == "fedavg":
        inner: Any = flower_strategy.FedAvg(**common)
    elif name == "fedprox":
        inner = flower_strategy.FedProx(**common, proximal_mu=proximal_mu)
    elif name == "fedadam":
        inner = flower_strategy.FedAdam(**common, eta=server_lr)
    else:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {name!r}")
    if central is None:
        return inner
    sampled = max(1, int(n_clients * client_fraction))
    accountant = None
    if name == "fedavg":  # Flower's accountant covers FedAvg's aggregation only
        accountant = RdpAccountant(
            PrivacyConfig(
                target_delta=central.delta,
                population_size=n_clients,
                neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
                sampling_method=SamplingMethod.NO_AMPLIFICATION,
            )
        )
    return flower_strategy.DifferentialPrivacyServerSideFixedClipping(
        inner,
        noise_multiplier=central.noise_multiplier,
        clipping_norm=central.clipping_norm,
        num_sampled_clients=sampled,
        accountant=accountant,
    )


def _site_record(reply: Message) -> SiteRecord:
    record = reply.content["privacy"]
    assert isinstance(record, ConfigRecord)
    events = events_from_json(str(record["events"]))
    return SiteRecord(
        node_id=int(reply.metadata.src_node_id),
        partition_id=int(record["partition-id"]),  # type: ignore[arg-type]
        events=events,
        rounds=int(record["rounds"]),  # type: ignore[arg-type]
        n_examples=int(record["num-examples"]),  # type: ignore[arg-type]
        epsilon=0.0,
        noise=str(record["noise"]),
        published=str(record["published"]) if "published" in record else None,
    )


def dp_server_app(
    config: DPClientConfig,
    *,
    n_clients: int,
    rounds: int,
    strategy: Literal["fedavg", "fedprox", "fedadam"] = "fedavg",
    client_fraction: float = 1.0,
    proximal_mu: float = 0.01,
    server_lr: float = 1e-2,
    central_dp: CentralDPConfig | None = None,
    seed: int = 0,
    run: FlowerRun | None = None,
    on_finish: Callable[[FlowerRun], None] | None = None,
    timeout: float = 3600.0,
) -> tuple[ServerApp, FlowerRun]:
    """A Flower ``ServerApp`` running Flower's ``strategy`` over sites of :func:`dp_client_app`.

    Parameters
    ----------
    config : DPClientConfig
        The sites' public config (schema, classes, network, δ, accountant).
    n_clients : int
        Sites in the federation (the run waits for all of them).
    rounds : int
    strategy : {"fedavg", "fedprox", "fedadam"}, default="fedavg"
        Flower's own strategy of that name.
    client_fraction : float, default=1.0
        Flower's ``fraction_train`` (Flower samples without replacement each round).
    proximal_mu : float, default=0.01
        FedProx's μ (sent to the sites as ``proximal-mu``).
    server_lr : float, default=1e-2
        FedAdam's η.
    central_dp : CentralDPConfig, optional
        Client-level DP by Flower's fixed-clipping wrapper (Flower's accountant with FedAvg).
    seed : int, default=0
        Draws the initial global model.
    run : FlowerRun, optional
        Filled in place (a new one when absent).
    on_finish : callable, optional
        ``on_finish(run)`` once the run is filled, e.g. to publish the global model.
    timeout : float, default=3600
        Seconds to wait for the sites' replies each round.

    Returns
    -------
    (ServerApp, FlowerRun)

    Raises
    ------
    ClientConfigError
        ``config`` is not a DPClientConfig.
    ValueError
        Unknown strategy, ``rounds`` < 1, ``n_clients`` < 1 or a fraction outside (0, 1].
    """
    _check_server_args(config, strategy, n_clients, rounds, client_fraction)
    outcome = run if run is not None else FlowerRun()
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        chosen = _strategy(strategy, n_clients, client_fraction, proximal_mu, server_lr, central_dp)
        init = init_mlp(config.layer_sizes, config.activation, torch.Generator().manual_seed(seed))
        initial = params_to_record([p.detach().numpy() for p in init.parameters()])
        outcome.history, outcome.round_seconds = _run_rounds(
            chosen,
            grid,
            initial,
            rounds=rounds,
            timeout=timeout,
            proximal_mu=float(proximal_mu) if strategy == "fedprox" else None,
        )
        outcome.sites = _query_sites(grid, config, timeout)
        spent = getattr(chosen, "privacy_spent", lambda: None)()
        outcome.flower_epsilon = None if spent is None else float(spent.epsilon)
        outcome.model = _global_model(config, outcome, params_from_record(outcome.history.arrays))
        if on_finish is not None:
            on_finish(outcome)

    return app, outcome


def _check_server_args(
    config: DPClientConfig, strategy: str, n_clients: int, rounds: int, client_fraction: float
) -> None:
    if not isinstance(config, DPClientConfig):
        raise ClientConfigError("config must be the sites' DPClientConfig")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if rounds < 1 or n_clients < 1 or not 0 < client_fraction <= 1:
        raise ValueError("need rounds >= 1, n_clients >= 1 and 0 < client_fraction <= 1")


def _run_rounds(
    chosen: flower_strategy.Strategy,
    grid: Grid,
    initial: ArrayRecord,
    *,
    rounds: int,
    timeout: float,
    proximal_mu: float | None,
) -> tuple[Any, list[float]]:
    """Flower's strategy over the grid (sending FedProx's μ when given); its result and the
    seconds each round took."""
    stamps: list[float] = []

    def clock(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        stamps.append(time.perf_counter())
        return None

    history = chosen.start(
        grid=grid,
        initial_arrays=initial,
        num_rounds=rounds,
        train_config=None if proximal_mu is None else ConfigRecord({"proximal-mu": proximal_mu}),
        timeout=timeout,
        evaluate_fn=clock,
    )
    return history, np.diff(stamps).tolist()


def _query_sites(grid: Grid, config: DPClientConfig, timeout: float) -> list[SiteRecord]:
    """Every site's privacy record (its DP events and their ε), in partition order."""
    query = [
        Message(RecordDict(), dst_node_id=node, message_type=PRIVACY_QUERY)
        for node in grid.get_node_ids()
    ]
    replies = [r for r in grid.send_and_receive(query, timeout=timeout) if not r.has_error()]
    sites = sorted((_site_record(r) for r in replies), key=lambda s: s.partition_id)
    for s in sites:
        s.epsilon = (
            compute_epsilon(s.events, config.delta, backend=config.accountant) if s.events else 0.0
        )
    return sites


def _global_model(
    config: DPClientConfig, run: FlowerRun, params: Sequence[np.ndarray]
) -> FlowerMLP:
    """The global model with the events of the site that spent the most (record-level DP)."""
    worst = max(run.sites, key=lambda s: s.epsilon, default=None)
    events = worst.events if (worst is not None and config.dp) else []
    noise: Literal["secure", "seeded"] = (
        "secure" if run.sites and all(s.noise == "secure" for s in run.sites) else "seeded"
    )
    return build(
        schema=config.schema,
        classes=config.classes,
        layer_sizes=config.layer_sizes,
        activation=config.activation,
        params=params,
        events=events,
        delta=config.delta,
        accountant=config.accountant,
        noise=noise,
    )


def check_publishable(run: FlowerRun) -> FlowerMLP:
    """The run's global model if it may be published with a record-level card.

    Raises
    ------
    PrivacyError
        No model, a run without record-level DP, or a site that took part without DP.
    """
    if run.model is None:
        raise PrivacyError("the run has not finished: no global model")
    if not run.model.privacy_events_ or any(not s.events for s in run.sites if s.rounds):
        raise PrivacyError(
            "the global model is not record-level DP at every site (a site trained without "
            "DP-SGD, or client-level DP only): it stays inside the federation"
        )
    return run.model
