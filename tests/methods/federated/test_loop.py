"""The shared round loop, its strategies and the DP wrappers, on toy clients."""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np
import pytest
import torch
from sklearn.base import clone
from torch import Tensor

from pubsubml.methods import hyperplane_schema
from pubsubml.methods.domain_experts.federation import DomainExpertsFL
from pubsubml.methods.federated import (
    CentralDP,
    DPFedAdam,
    DPFedAvg,
    DPFedProx,
    FedAdam,
    FedAvg,
    FederatedMLP,
    FedProx,
    FedSGD,
    LocalDP,
    run_federation,
)
from pubsubml.methods.federated.loop import ClientUpdates, LocalTerm, run_loop
from pubsubml.methods.federated.strategies import weighted_mean
from pubsubml.privacy.events import DPEvent

SCHEMA = hyperplane_schema(4)


class _Shift:
    """Toy clients: client ``c`` returns the global model plus ``c`` and one DP event of 5 steps."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, list[int]]] = []

    def __call__(
        self, round_: int, chosen: np.ndarray, global_params: list[Tensor], local_term: LocalTerm
    ) -> ClientUpdates:
        self.calls.append((round_, chosen.tolist()))
        shift = torch.tensor([float(c) for c in chosen])
        stacked = [p.unsqueeze(0) + shift.reshape(-1, *([1] * p.dim())) for p in global_params]
        event = DPEvent(
            mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.1, count=5
        )
        return ClientUpdates(stacked, [[event] for _ in chosen])


def _schedule(*rounds: list[int]) -> list[np.ndarray]:
    return [np.asarray(r, dtype=int) for r in rounds]


def test_loop_trains_the_chosen_clients_and_weighs_them_by_size() -> None:
    clients = _Shift()
    start = [torch.zeros(2, 2), torch.zeros(2)]
    out = run_federation(start, _schedule([0, 2], [1], []), clients, FedAvg(), [1, 2, 3])
    # round 0: (1·0 + 3·2) / 4 = 1.5; round 1: + 1; round 2 has nobody: no training, no change
    assert clients.calls == [(0, [0, 2]), (1, [1])]
    for p in out:
        assert torch.equal(p, torch.full_like(p, 2.5))


def test_central_dp_accounts_and_noises_every_round_even_without_participants() -> None:
    start = [torch.zeros(3)]
    server = CentralDP(
        FedAvg(client_fraction=0.5),
        noise_multiplier=2.0,
        clip_norm=1.0,
        n_clients=4,
        seed=0,
        backend="rdp",
    )
    out = run_federation(start, _schedule([], [1], []), _Shift(), server, [1, 1, 1, 4])
    event = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=2.0, sample_rate=0.5, count=3)
    assert server.accountant.events == [event]
    assert server.client_events() == [[event]] * 4  # a whole client is the unit of privacy
    assert not torch.equal(out[0], start[0])  # empty rounds are released too, with noise
    plain = run_federation(start, _schedule([], []), _Shift(), FedAvg(), [1, 1, 1, 4])
    assert torch.equal(plain[0], start[0])


def test_central_dp_samples_clients_by_poisson() -> None:
    server = CentralDP(
        FedAvg(client_fraction=0.3), noise_multiplier=1.0, clip_norm=1.0, n_clients=50, seed=3,
        backend="rdp",
    )  # fmt: skip
    sizes = [len(chosen) for chosen in server.sample(50, 200, seed=3)]
    assert abs(np.mean(sizes) - 15) < 1.0 and np.std(sizes) > 1.0  # Binomial(50, 0.3)
    assert len(set(FedAvg(client_fraction=0.3).sample(50, 20, seed=3)[0].tolist())) == 15


def test_local_dp_records_what_each_chosen_client_ran_in_its_accountant() -> None:
    local = LocalDP(_Shift(), 3, "rdp")
    run_federation([torch.zeros(1)], _schedule([0, 1], [1]), local, FedAvg(), [1, 1, 1])
    assert [[e.count for e in events] for events in local.client_events()] == [[5], [10], []]
    eps = local.client_epsilons(1e-5, idle=math.inf)
    assert 0 < eps[0] < eps[1] < math.inf and eps[2] == math.inf


def test_weighted_mean_is_fedavg_and_without_weights_the_plain_mean() -> None:
    stacked = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0))
    weights = torch.tensor([0.2, 0.3, 0.5])
    (weighted,) = weighted_mean([stacked], weights)
    torch.testing.assert_close(weighted, (weights[:, None, None] * stacked).sum(0))
    assert torch.equal(weighted_mean([stacked])[0], stacked.mean(0))  # ProxyFL's central mean


def test_fedprox_local_term_is_the_proximal_gradient_and_fedavg_has_none() -> None:
    center = torch.zeros(1, 3)
    params, grad = torch.tensor([[1.0, 2.0, -1.0]]), torch.ones(1, 3)
    hook = FedProx(mu=0.5).local_term(center)
    hook(params, grad)
    assert grad.tolist() == [[1.5, 2.0, 0.5]]
    assert FedAvg().local_term(center) is None and FedAdam().local_term(center) is None
    with pytest.raises(ValueError, match="mu"):
        FedProx(mu=-1.0)


def test_fedsgd_steps_the_server_optimizer_along_the_weighted_mean_gradient() -> None:
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    server = FedSGD(optimizer="sgd", lr=0.5)
    server.start([w])
    grads = [torch.tensor([[2.0, 0.0], [0.0, 4.0]])]
    out = server.aggregate([w], grads, torch.tensor([0.25, 0.75]))
    assert out[0] is w and w.tolist() == [1.0 - 0.5 * 0.5, 2.0 - 0.5 * 3.0]


def test_fedadam_restarts_its_state_at_start() -> None:
    server = FedAdam(server_lr=0.1, tau=0.5)
    server.start([torch.zeros(2)])
    server.aggregate([torch.zeros(2)], [torch.ones(1, 2)], torch.ones(1))
    assert server.steps == 1 and server.m[0].tolist() == pytest.approx([0.1, 0.1])
    server.start([torch.zeros(2)])
    assert server.steps == 0 and server.m[0].tolist() == [0.0, 0.0]
    assert server.v[0].tolist() == [0.25, 0.25]


@pytest.mark.parametrize(
    ("cls", "own"),
    [(DPFedProx, {"mu": 0.3}), (DPFedAdam, {"server_lr": 0.2, "beta1": 0.5, "tau": 0.01})],
)
def test_baselines_declare_only_their_own_parameters_and_clone(
    cls: type[FederatedMLP], own: dict[str, Any]
) -> None:
    base = set(DPFedAvg(schema=SCHEMA).get_params())
    model = cls(schema=SCHEMA, rounds=7, dp="central", **own)
    assert set(model.get_params()) - base == set(cls.__annotations__)  # no base parameter again
    copy = clone(model)
    assert copy.get_params() == model.get_params() and copy is not model
    kinds = {p.kind for n, p in inspect.signature(cls.__init__).parameters.items() if n != "self"}
    assert kinds == {inspect.Parameter.KEYWORD_ONLY}


def test_domain_experts_parameters_and_clone() -> None:
    model = DomainExpertsFL(schema=SCHEMA, rounds=9, algorithm=1, lr_gate=0.2)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert (copy.rounds, copy.algorithm, copy.lr_gate, copy.batch_size) == (9, 1, 0.2, 50)


class _Recorder:
    """A federation that records the order of the loop's calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, list[int]]] = []

    def select(self, round_: int) -> list[int]:
        self.calls.append(("select", round_, []))
        return [] if round_ == 1 else [round_, round_ + 10]

    def train(self, round_: int, participants: Any) -> None:
        self.calls.append(("train", round_, list(participants)))

    def communicate(self, round_: int, participants: Any) -> None:
        self.calls.append(("communicate", round_, list(participants)))


def test_run_loop_selects_trains_then_communicates_every_round() -> None:
    fed, seen = _Recorder(), []
    timings = run_loop(fed, 3, callback=lambda t: seen.append(t.round))
    assert [c[0] for c in fed.calls] == ["select", "train", "communicate"] * 3
    assert [c[2] for c in fed.calls if c[0] == "communicate"] == [[0, 10], [], [2, 12]]
    assert [t.participants for t in timings] == [[0, 10], [], [2, 12]]
    assert seen == [0, 1, 2]
    assert all(t.train_seconds >= 0 and t.comm_seconds >= 0 for t in timings)
    assert run_loop(fed, 0) == []
    with pytest.raises(ValueError, match="rounds"):
        run_loop(fed, -1)
