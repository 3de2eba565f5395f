"""Tests of pubsubml.methods.federated.dp: LocalDP, CentralDP and noise_multipliers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import Tensor

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.methods.federated.dp import CentralDP, LocalDP, noise_multipliers
from pubsubml.methods.federated.loop import ClientUpdates, LocalTerm
from pubsubml.methods.federated.strategies import FedAvg, FedProx
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent


def _assert_close(
    actual: Tensor, expected: Tensor, *, rtol: float = 1.3e-6, atol: float = 1e-5
) -> None:
    """Same shape and dtype, equal within tolerance (torch.testing's float32 defaults)."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    assert torch.allclose(actual, expected, rtol=rtol, atol=atol), (actual, expected)


def _sgm(sigma: float, q: float, count: int) -> DPEvent:
    return DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=count
    )


def test_noise_multipliers_calibrate_each_client_to_the_target() -> None:
    sigmas = noise_multipliers(1.5, 1e-4, [0.25, 0.25, 0.5], [8, 8, 0], "rdp")
    assert sigmas[0] == sigmas[1] > 0 and sigmas[2] == 0.0  # no step, no noise
    eps = compute_epsilon([_sgm(sigmas[0], 0.25, 8)], 1e-4, backend="rdp")
    assert 0.99 * 1.5 <= eps <= 1.5
    less_noise = compute_epsilon([_sgm(0.98 * sigmas[0], 0.25, 8)], 1e-4, backend="rdp")
    assert less_noise > 1.5  # the smallest σ that meets the target, within 2%


def test_noise_multipliers_reject_bad_targets_and_lengths() -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        noise_multipliers(0.0, 1e-4, [0.5], [3], "rdp")
    with pytest.raises(InvalidPrivacyParameterError):
        noise_multipliers(1.0, 1.0, [0.5], [3], "rdp")
    with pytest.raises(ValueError):
        noise_multipliers(1.0, 1e-4, [0.5, 0.5], [0], "rdp")


class _Train:
    """Local training stub: client ``c`` adds ``c`` to the model and reports its own events."""

    def __init__(self, events: dict[int, list[DPEvent]]) -> None:
        self.events = events
        self.calls: list[tuple[int, list[int], LocalTerm]] = []

    def __call__(
        self, round_: int, chosen: np.ndarray, global_params: list[Tensor], local_term: LocalTerm
    ) -> ClientUpdates:
        self.calls.append((round_, chosen.tolist(), local_term))
        shift = torch.tensor(chosen, dtype=torch.float32)
        params = [p.unsqueeze(0) + shift.reshape(-1, *[1] * p.dim()) for p in global_params]
        return ClientUpdates(params, [self.events[c] for c in chosen.tolist()])


def test_local_dp_epsilon_is_the_accountant_on_what_each_client_ran() -> None:
    # Prepare: client 0 runs two different DP-SGD phases a round, client 2 one; client 1 idles.
    ran = {0: [_sgm(1.0, 0.1, 5), _sgm(2.0, 0.3, 3)], 2: [_sgm(0.8, 0.2, 4)]}
    train = _Train(ran)
    local = LocalDP(train, n_clients=3, backend="rdp")
    params = [torch.zeros(2)]
    # Execute: two rounds.
    first = local(0, np.array([0, 2]), params, FedAvg().local_term)
    local(1, np.array([0]), params, FedAvg().local_term)
    # Assert: the wrapped training saw the call unchanged, and its updates pass through.
    assert [(r, c) for r, c, _ in train.calls] == [(0, [0, 2]), (1, [0])]
    assert torch.equal(first.params[0], torch.tensor([[0.0, 0.0], [2.0, 2.0]]))
    eps = local.client_epsilons(1e-5, idle=-1.0)
    assert eps[0] == pytest.approx(compute_epsilon(ran[0] * 2, 1e-5, backend="rdp"), rel=1e-9)
    assert eps[2] == pytest.approx(compute_epsilon(ran[2], 1e-5, backend="rdp"), rel=1e-9)
    assert eps[1] == -1.0 and local.client_events()[1] == []
    steps = [sum(e.count for e in events) for events in local.client_events()]
    assert steps == [2 * (5 + 3), 0, 4]


def _central(**kw: object) -> CentralDP:
    args: dict[str, object] = {"noise_multiplier": 0.0, "clip_norm": 100.0, "n_clients": 4,
                               "seed": 0, "backend": "rdp"}  # fmt: skip
    strategy = kw.pop("strategy", FedAvg(client_fraction=0.5))
    return CentralDP(strategy, **(args | kw))  # type: ignore[arg-type]


def test_central_update_divides_by_the_expected_number_of_participants() -> None:
    # q·N = 0.5·4 = 2 whoever joins: one participant moves the model half its update.
    server = _central()
    w = [torch.tensor([1.0, 1.0])]
    one = server.aggregate(w, [torch.tensor([[3.0, -3.0]])], torch.ones(1))
    _assert_close(one[0], torch.tensor([2.0, -1.0]))
    two = server.aggregate(w, [torch.tensor([[3.0, -3.0], [1.0, 5.0]])], torch.ones(2) / 2)
    _assert_close(two[0], torch.tensor([2.0, 1.0]))  # the plain mean
    # An update longer than C is scaled to C first: Δ = (6, 8), ‖Δ‖ = 10, C = 1.
    tight = _central(clip_norm=1.0)
    out = tight.aggregate([torch.zeros(2)], [torch.tensor([[6.0, 8.0]])], torch.ones(1))
    _assert_close(out[0], torch.tensor([0.3, 0.4]))


def test_central_dp_accounts_one_release_per_round_for_every_client() -> None:
    server = _central(noise_multiplier=1.3)
    assert server.client_epsilons(1e-5).tolist() == [0.0] * 4  # nothing released yet
    w = [torch.zeros(3)]
    for _ in range(3):
        w = server.aggregate_round(w, None, torch.ones(0))
    expected = compute_epsilon([_sgm(1.3, 0.5, 1)] * 3, 1e-5, backend="rdp")
    np.testing.assert_allclose(server.client_epsilons(1e-5), [expected] * 4, rtol=1e-9)
    assert server.client_events() == [server.accountant.events] * 4
    assert float(w[0].abs().sum()) > 0  # empty rounds still add noise


def test_central_noise_is_seeded() -> None:
    def noisy(seed: int) -> Tensor:
        server = _central(noise_multiplier=1.0, seed=seed)
        return server.aggregate([torch.zeros(50)], None, torch.ones(0))[0]

    assert torch.equal(noisy(3), noisy(3)) and not torch.equal(noisy(3), noisy(4))
    a, b = _central(seed=5).sample(4, 6, seed=9), _central(seed=6).sample(4, 6, seed=9)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))  # sampling: its own seed


def test_central_dp_keeps_the_wrapped_strategy_local_objective() -> None:
    center = torch.zeros(1, 2)
    assert _central().local_term(center) is None
    hook = _central(strategy=FedProx(client_fraction=0.5, mu=0.5)).local_term(center)
    assert hook is not None
    grad = torch.ones(1, 2)
    hook(torch.tensor([[2.0, -2.0]]), grad)
    _assert_close(grad, torch.tensor([[2.0, 0.0]]))
    assert _central(strategy=FedAvg(client_fraction=0.25)).client_fraction == 0.25
