"""Tests of pubsubml.privacy.dpsgd.functions: activations and losses against autograd."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from pubsubml.privacy.dpsgd.functions import ACTIVATIONS, LOSSES, Loss, _activation, _loss


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _close(actual: Tensor, expected: Tensor | None) -> None:
    assert expected is not None
    np.testing.assert_allclose(
        actual.detach().numpy(), expected.detach().numpy(), rtol=1e-7, atol=1e-12
    )


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_forward_and_backward_match_autograd(name: str) -> None:
    g = torch.Generator().manual_seed(0)
    z = torch.randn(4, 6, generator=g, dtype=torch.float64) * 3
    upstream = torch.randn(4, 6, generator=g, dtype=torch.float64)
    activation = ACTIVATIONS[name]
    leaf = z.clone().requires_grad_(True)
    reference_out = activation.module()(leaf)
    (reference_out * upstream).sum().backward()

    out = activation.forward_(z.clone())
    grad = activation.backward_(upstream.clone(), out, torch.empty_like(out))

    _close(out, reference_out)
    _close(grad, leaf.grad)


def test_activation_forward_works_in_place() -> None:
    z = torch.tensor([-1.0, 0.5])

    out = ACTIVATIONS["relu"].forward_(z)

    assert out.data_ptr() == z.data_ptr() and z.tolist() == [0.0, 0.5]


def test_cross_entropy_per_sample_loss_and_gradient_match_torch() -> None:
    g = torch.Generator().manual_seed(1)
    out = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)  # (sites, rows, classes)
    y = torch.randint(0, 4, (2, 5), generator=g)
    leaf = out.clone().requires_grad_(True)
    reference = nn.functional.cross_entropy(leaf.reshape(-1, 4), y.reshape(-1), reduction="none")
    reference.sum().backward()

    loss = LOSSES["cross_entropy"].per_sample(out, y)
    grad = LOSSES["cross_entropy"].output_grad(out, y)

    _close(loss, reference.reshape(2, 5))
    _close(grad, leaf.grad)


def test_mse_per_sample_loss_and_gradient_match_autograd() -> None:
    g = torch.Generator().manual_seed(2)
    out = torch.randn(3, 7, 1, generator=g, dtype=torch.float64)
    y = torch.randn(3, 7, generator=g, dtype=torch.float64)
    leaf = out.clone().requires_grad_(True)
    ((leaf[..., 0] - y) ** 2).sum().backward()

    loss = LOSSES["mse"].per_sample(out, y)
    grad = LOSSES["mse"].output_grad(out, y)

    _close(loss, (out[..., 0] - y) ** 2)
    _close(grad, leaf.grad)


def test_unknown_names_are_refused_and_a_loss_passes_through() -> None:
    custom = Loss(LOSSES["mse"].per_sample, LOSSES["mse"].output_grad)

    assert _loss(custom) is custom and _loss("mse") is LOSSES["mse"]
    assert _activation("tanh") is ACTIVATIONS["tanh"]
    with pytest.raises(ValueError, match="unknown loss"):
        _loss("hinge")
    with pytest.raises(ValueError, match="unknown activation"):
        _activation("gelu")
