"""The ServerApp factory: bad inputs, Flower's strategies, what may be published."""

from __future__ import annotations

import pytest
from flwr.serverapp import strategy as flower_strategy

from methods.flower.conftest import initial
from pubsubml.errors import PrivacyError
from pubsubml.methods.flower.client_app import ClientConfigError, DPClientConfig
from pubsubml.methods.flower.model import build
from pubsubml.methods.flower.server_app import (
    CentralDPConfig,
    FlowerRun,
    SiteRecord,
    _strategy,
    check_publishable,
    dp_server_app,
)
from pubsubml.privacy.events import DPEvent


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"strategy": "scaffold"}, "strategy must be one of"),
        ({"rounds": 0}, "rounds >= 1"),
        ({"client_fraction": 0.0}, "client_fraction"),
        ({"n_clients": 0}, "n_clients"),
    ],
)
def test_bad_server_options_are_refused(config: DPClientConfig, kwargs: dict, match: str) -> None:
    options = {"n_clients": 3, "rounds": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        dp_server_app(config, **options)


def test_the_server_needs_the_sites_public_config() -> None:
    with pytest.raises(ClientConfigError, match="DPClientConfig"):
        dp_server_app(None, n_clients=3, rounds=2)  # type: ignore[arg-type]


def test_the_strategies_are_flowers_own() -> None:
    assert type(_strategy("fedavg", 4, 1.0, 0.0, 0.01, None)) is flower_strategy.FedAvg
    prox = _strategy("fedprox", 4, 1.0, 0.1, 0.01, None)
    assert type(prox) is flower_strategy.FedProx and prox.proximal_mu == 0.1
    assert type(_strategy("fedadam", 4, 0.5, 0.0, 0.05, None)) is flower_strategy.FedAdam
    central = _strategy("fedavg", 4, 1.0, 0.0, 0.01, CentralDPConfig(noise_multiplier=1.0))
    assert isinstance(central, flower_strategy.DifferentialPrivacyServerSideFixedClipping)
    assert central.accountant is not None  # Flower's RDP accountant, FedAvg only
    adam = _strategy("fedadam", 4, 1.0, 0.0, 0.01, CentralDPConfig(noise_multiplier=1.0))
    assert adam.accountant is None


def _run(config: DPClientConfig, events: list[list[DPEvent]]) -> FlowerRun:
    sites = [
        SiteRecord(node_id=i, partition_id=i, events=e, rounds=len(e), n_examples=300,
                   epsilon=float(len(e)), noise="secure")
        for i, e in enumerate(events)
    ]  # fmt: skip
    run = FlowerRun(sites=sites)
    run.model = build(
        schema=config.schema,
        classes=config.classes,
        layer_sizes=config.layer_sizes,
        activation=config.activation,
        params=initial(config),
        events=max(events, key=len),
        delta=config.delta,
        accountant="pld",
        noise="secure",
    )
    return run


def test_only_a_run_with_record_level_dp_at_every_site_is_publishable(
    config: DPClientConfig,
) -> None:
    step = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.1, count=10)
    assert check_publishable(_run(config, [[step], [step, step]])).privacy_events_ == [step, step]
    with pytest.raises(PrivacyError, match="not record-level DP at every site"):
        check_publishable(_clear_site(config, step))
    with pytest.raises(PrivacyError, match="not finished"):
        check_publishable(FlowerRun())


def _clear_site(config: DPClientConfig, step: DPEvent) -> FlowerRun:
    run = _run(config, [[step]])
    run.sites.append(
        SiteRecord(node_id=9, partition_id=9, events=[], rounds=2, n_examples=10, epsilon=0.0,
                   noise="secure")
    )  # fmt: skip
    return run


def test_our_fedadam_with_flowers_step_is_flowers_fedadam() -> None:
    """``FedAdam(bias_correction=True)`` takes Flower's server steps, round after round."""
    import numpy as np
    import torch
    from flwr.app import ArrayRecord, MetricRecord, RecordDict

    from methods.flower.conftest import message
    from pubsubml.methods.federated.strategies import FedAdam

    rng = np.random.default_rng(0)
    current = [rng.normal(size=(3, 2)).astype(np.float32), rng.normal(size=2).astype(np.float32)]
    flower = flower_strategy.FedAdam(eta=0.05, beta_1=0.9, beta_2=0.99, tau=1e-3)
    ours = FedAdam(server_lr=0.05, beta1=0.9, beta2=0.99, tau=1e-3, bias_correction=True)
    ours.start([torch.from_numpy(p.copy()) for p in current])
    weights = np.array([30.0, 10.0])
    for server_round in (1, 2, 3):
        clients = [[p + rng.normal(scale=0.1, size=p.shape).astype(np.float32) for p in current]
                   for _ in weights]  # fmt: skip
        sent = ArrayRecord([p.copy() for p in current])  # what configure_train keeps
        flower.current_arrays = {k: a.numpy() for k, a in sent.items()}
        replies = [
            message("train", RecordDict({"arrays": ArrayRecord(c),
                                         "metrics": MetricRecord({"num-examples": int(w)})}))
            for c, w in zip(clients, weights, strict=True)
        ]  # fmt: skip
        expected, _ = flower.aggregate_train(server_round, replies)
        stacked = [torch.from_numpy(np.stack([c[i] for c in clients])) for i in range(2)]
        got = ours.aggregate(
            [torch.from_numpy(p) for p in current],
            stacked,
            torch.from_numpy(weights / weights.sum()).float(),
        )
        for g, e in zip(got, expected.to_numpy_ndarrays(), strict=True):
            np.testing.assert_allclose(g.numpy(), e, rtol=1e-4, atol=1e-6)
        current = [g.numpy() for g in got]
