"""The baselines of proxyfl.txt §4.1 share ProxyFL's rounds and differ in communication; the server
of FedAvg and FML is a strategy of the federated loop."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
import torch
from torch import Tensor

from pubsubml.errors import UnknownLearnerError
from pubsubml.methods.federated.strategies import FedAdam
from pubsubml.methods.proxyfl.baselines import (
    METHODS,
    CentralAveraging,
    CyclicTransfer,
    create_method,
)
from pubsubml.methods.proxyfl.protocol import DMLConfig, ProxyMethod, WeakPrivacyWarning


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread: the 2-core test machine is shared, and spinning threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


C = 3
CFG = DMLConfig(batch_size=20, delta=1e-3)


def _clients(n_clients: int = 4) -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(0)
    W = torch.randn(5, C, generator=g)
    out = []
    for _ in range(n_clients):
        X = torch.randn(80, 5, generator=g)
        out.append((X, (X @ W).argmax(1)))
    return out


def _fit(name: str, rounds: int = 2) -> ProxyMethod:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakPrivacyWarning)
        method = create_method(name, n_classes=C, rounds=rounds, proxy_hidden=(6,), config=CFG)
        return method.fit(_clients())


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_trains_and_predicts(name: str) -> None:
    method = _fit(name)
    X = _clients()[0][0]
    assert method.predict_proba(X, client=0).shape == (80, C)
    assert method.uses_private == (name in ("FML", "ProxyFL"))
    assert all(eps > 0 for eps in method.epsilons_)


def test_fedavg_and_fml_leave_every_client_with_the_same_shared_model() -> None:
    for name in ("FedAvg", "FML"):
        flat = _fit(name).cohort_.flat_proxies()
        torch.testing.assert_close(flat, flat[0].expand_as(flat))


def test_regular_sends_nothing_and_joint_pools_the_data() -> None:
    assert sum(r.bytes_sent for r in _fit("Regular").history_) == 0
    joint = _fit("Joint")
    assert joint.cohort_.n == [320]
    assert joint.cohort_.q == [20 / 320]
    assert joint.epsilons_[0] < _fit("Regular").epsilons_[0]  # smaller q on the pooled data


def test_cyclic_transfer_moves_each_model_one_step_round_the_ring() -> None:
    theta = torch.arange(4.0).unsqueeze(1)
    out, _ = CyclicTransfer(4).exchange(0, range(4), theta, torch.ones(4), [0, 1, 3])
    assert out.squeeze(1).tolist() == [3.0, 0.0, 2.0, 1.0]  # client 2 dropped: kept its model


def test_central_averaging_traffic_grows_with_the_number_of_clients() -> None:
    comm = CentralAveraging(8, torch.zeros(1))
    out, _ = comm.exchange(0, range(8), torch.arange(8.0).unsqueeze(1), torch.ones(8), range(8))
    assert out.squeeze(1).tolist() == [3.5] * 8
    assert comm.server_bytes == 8 * 4


def test_central_averaging_sends_the_plain_mean_to_participants_only() -> None:
    theta = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    comm = CentralAveraging(4, torch.zeros(5))
    out, _ = comm.exchange(0, range(4), theta, torch.ones(4), [0, 1, 3])
    mean = theta[[0, 1, 3]].mean(0)  # unweighted, as the authors average
    for s in (0, 1, 3):
        assert torch.equal(out[s], mean)
    assert torch.equal(out[2], theta[2])  # dropped out: keeps its own model
    assert torch.equal(comm.global_model[0], mean)
    assert comm.bytes_sent == 3 * 5 * 4


def test_central_averaging_runs_its_server_strategy_from_the_initial_model() -> None:
    # FedAdam on the server: x1 = x0 + lr · m / (√v + τ), Δ = mean(participants) − x0.
    x0 = torch.tensor([1.0, -1.0])
    server = FedAdam(server_lr=0.5, beta1=0.9, beta2=0.99, tau=0.1)
    comm = CentralAveraging(3, x0, server)
    theta = torch.tensor([[2.0, 0.0], [4.0, 2.0], [9.0, 9.0]])
    out, _ = comm.exchange(0, range(3), theta, torch.ones(3), [0, 1])
    delta = torch.tensor([3.0, 1.0]) - x0
    m, v = 0.1 * delta, 0.99 * 0.1**2 + 0.01 * delta**2
    x1 = x0 + 0.5 * m / (v.sqrt() + 0.1)
    torch.testing.assert_close(out[:2], x1.expand(2, 2))
    assert torch.equal(out[2], theta[2])
    # A round without participants: no server step, nothing sent.
    again, _ = comm.exchange(1, range(3), out, torch.ones(3), [])
    assert torch.equal(again, out) and server.steps == 1 and comm.bytes_sent == 2 * 2 * 4


@pytest.mark.parametrize("name", ["FedAvg", "FML"])
def test_server_averaged_methods_start_their_server_at_the_common_initial_proxy(
    name: str,
) -> None:
    method = create_method(name, n_classes=C, rounds=1, proxy_hidden=(6,), config=CFG)
    cohort = method._make_cohort(_clients(), [0, 1, 2, 3])
    initial = cohort.flat_proxies()
    comm = method._communicator(cohort)
    assert isinstance(comm, CentralAveraging)
    assert torch.equal(comm.global_model[0], initial[0])
    assert torch.equal(initial, initial[0].expand_as(initial))


def test_unknown_method_names_raise() -> None:
    with pytest.raises(UnknownLearnerError, match="no method"):
        create_method("FedProx", n_classes=2)
