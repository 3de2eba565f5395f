"""Tests of pubsubml.privacy.dpsgd.stacked: stacked optimizer, gradient hook, canaries, errors."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor

from pubsubml.errors import DataValidationError
from pubsubml.privacy.dpsgd import CanaryGradients, DPSGDConfig, Loss, MLPStack, train_dp_stacked

SIZES = (3, 4, 2)
_ZERO = Loss(lambda o, y: o.sum(-1) * 0.0, lambda o, y: torch.zeros_like(o))


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _close(actual: Tensor, expected: Tensor, rtol: float = 1.3e-6, atol: float = 1e-6) -> None:
    np.testing.assert_allclose(
        actual.detach().numpy(), expected.detach().numpy(), rtol=rtol, atol=atol
    )


def _gens(S: int, base: int = 0) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(base + s) for s in range(S)]


def _data(ns: list[int]) -> tuple[list[Tensor], list[Tensor]]:
    g = torch.Generator().manual_seed(99)
    Xs = [torch.randn(n, SIZES[0], generator=g) for n in ns]
    ys = [torch.randint(0, SIZES[-1], (n,), generator=g) for n in ns]
    return Xs, ys


def _reference_steps(
    start: Tensor, grad: Tensor, optimizer: str, lr: float, steps: int
) -> np.ndarray:
    """Plain SGD, or Adam as Kingma & Ba write it (torch's defaults β = (0.9, 0.999), ε = 1e-8),
    fed the same gradient at every step, in float64."""
    p, g = start.double().numpy().copy(), grad.double().numpy()
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t in range(1, steps + 1):
        if optimizer == "sgd":
            p -= lr * g
            continue
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p -= lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return p


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("private", [True, False])
def test_each_site_steps_like_its_own_optimizer(optimizer: str, private: bool) -> None:
    # The hook replaces every step's gradient with a fixed one, so each site's path is its
    # optimizer fed that gradient for its own number of steps at its own learning rate.
    ns, lrs = [16, 40], [0.05, 0.01]
    stack = MLPStack.init(SIZES, "tanh", _gens(2))
    start = stack.flat.clone()
    fixed = torch.randn(stack.flat.shape, generator=torch.Generator().manual_seed(5))
    kind: Any = optimizer
    configs = [
        DPSGDConfig(batch_size=8, epochs=2, lr=lr, optimizer=kind, private=private) for lr in lrs
    ]
    calls: list[bool] = []

    def hook(params: Tensor, grad: Tensor) -> None:
        calls.append(params is stack.flat)
        grad.copy_(fixed)

    Xs, ys = _data(ns)
    results = train_dp_stacked(
        stack, Xs, ys, configs=configs, generators=_gens(2, 10), loss=_ZERO, grad_hook=hook
    )

    assert [r.steps for r in results] == [4, 10]
    assert calls == [True] * 10  # one call per step of the longest site
    for s, (lr, result) in enumerate(zip(lrs, results, strict=True)):
        expected = _reference_steps(start[s], fixed[s], optimizer, lr, result.steps)
        _close(stack.flat[s], torch.from_numpy(expected).float(), rtol=1e-5, atol=1e-6)


def test_non_private_results_report_no_noise_and_no_clipping() -> None:
    stack = MLPStack.init(SIZES, "tanh", _gens(1))
    Xs, ys = _data([13])

    [result] = train_dp_stacked(
        stack,
        Xs,
        ys,
        configs=DPSGDConfig(batch_size=5, epochs=2, private=False),
        generators=_gens(1),
    )

    assert (result.noise_multiplier, result.max_grad_norm, result.events) == (0.0, math.inf, [])
    assert result.batch_sizes.tolist() == [5, 5, 3, 5, 5, 3]


def test_sites_must_share_the_optimizer_and_the_privacy_setting() -> None:
    stack = MLPStack.init(SIZES, "tanh", _gens(2))
    Xs, ys = _data([10, 10])
    base = DPSGDConfig(batch_size=5, epochs=1)
    for other in (
        dataclasses.replace(base, optimizer="sgd"),
        dataclasses.replace(base, private=False),
    ):
        with pytest.raises(ValueError, match="share"):
            train_dp_stacked(stack, Xs, ys, configs=[base, other], generators=_gens(2))


def test_sites_must_have_the_same_input_columns() -> None:
    stack = MLPStack.init(SIZES, "tanh", _gens(2))
    Xs = [torch.zeros(5, 3), torch.zeros(5, 4)]
    ys = [torch.zeros(5, dtype=torch.long)] * 2

    with pytest.raises(DataValidationError, match="same number of input columns"):
        train_dp_stacked(stack, Xs, ys, configs=DPSGDConfig(), generators=_gens(2))


def test_canaries_need_one_entry_per_site_and_finite_values() -> None:
    stack = MLPStack.init(SIZES, "tanh", _gens(2))
    Xs, ys = _data([10, 10])
    P = stack.flat.shape[1]
    bad = torch.zeros(1, P)
    bad[0, 0] = math.nan

    with pytest.raises(ValueError, match="canary entries"):
        train_dp_stacked(
            stack,
            Xs,
            ys,
            configs=DPSGDConfig(),
            generators=_gens(2),
            canary_gradients=[None],
        )
    with pytest.raises(DataValidationError, match="finite"):
        train_dp_stacked(
            stack,
            Xs,
            ys,
            configs=DPSGDConfig(),
            generators=_gens(2),
            canary_gradients=[None, bad],
        )


def test_canary_gradients_are_clipped_sampled_and_added_per_running_site() -> None:
    P = 4
    site0 = torch.tensor([[3.0, 4.0, 0.0, 0.0], [0.0, 0.0, 0.3, 0.0]])  # norms 5 and 0.3
    site2 = torch.tensor([[0.0, 0.0, 0.0, 2.0]])
    clip = torch.tensor([1.0, 1.0, 0.5])
    canaries = CanaryGradients([site0, None, site2], clip)
    gens = _gens(3, 20)
    grad = torch.zeros(3, P)
    sizes = torch.zeros(3, dtype=torch.long)

    canaries.add(grad, [0, 2], torch.ones(3), gens, sizes)  # q = 1: every canary is sampled

    expected = torch.zeros(3, P)
    expected[0] = site0[0] / (5.0 + 1e-6) + site0[1]  # only the long one is scaled to C = 1
    expected[2] = site2[0] * 0.5 / (2.0 + 1e-6)
    _close(grad, expected)
    assert sizes.tolist() == [2, 0, 1]
    # one uniform per canary of each running site came from that site's generator
    for s, used in ((0, 2), (1, 0), (2, 1)):
        reference = torch.Generator().manual_seed(20 + s)
        torch.rand(used, generator=reference)
        assert torch.equal(torch.rand(3, generator=gens[s]), torch.rand(3, generator=reference))

    canaries.add(grad, [2], torch.ones(3), gens)  # site 0 does not run: nothing added for it

    _close(grad[0], expected[0])
    _close(grad[2], 2 * expected[2])


def test_canaries_are_never_sampled_at_rate_zero() -> None:
    canaries = CanaryGradients([torch.ones(5, 3)], torch.tensor([1.0]))
    grad, sizes = torch.zeros(1, 3), torch.zeros(1, dtype=torch.long)

    canaries.add(grad, [0], torch.zeros(1), _gens(1), sizes)

    assert torch.equal(grad, torch.zeros(1, 3)) and sizes.tolist() == [0]
