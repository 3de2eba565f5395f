"""Tests of pubsubml.methods.proxyfl.architectures: the private architectures of the evaluation."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from pubsubml.methods.proxyfl.architectures import ARCHITECTURES, private_factory

pytestmark = pytest.mark.usefixtures("one_thread")


def _n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
@pytest.mark.parametrize("shape", [(1, 40), (1, 8, 8), (1, 7, 9)])
def test_every_architecture_maps_flat_rows_to_class_logits(
    name: str, shape: tuple[int, ...]
) -> None:
    d = math.prod(shape)
    model = private_factory(name, shape)(d, 5)
    X = torch.randn(3, d, generator=torch.Generator().manual_seed(0))
    out = model(X)
    assert out.shape == (3, 5) and bool(torch.isfinite(out).all())
    out.sum().backward()  # trainable end to end
    assert all(p.grad is not None for p in model.parameters())


def test_parameter_counts_follow_the_stated_layers() -> None:
    # 1-D input of 40 values, 10 classes; "same" padding, then max-pooling by 2.
    def conv(c_in: int, c_out: int, k: int) -> int:
        return c_out * c_in * k + c_out

    def fc(n_in: int, n_out: int) -> int:
        return n_in * n_out + n_out

    expected = {
        "mlp": fc(40, 200) + fc(200, 200) + fc(200, 10),
        # 40 → 20 → 10 positions after two poolings
        "cnn1": conv(1, 6, 3) + conv(6, 16, 3) + fc(16 * 10, 64) + fc(64, 10),
        "lenet": conv(1, 6, 5) + conv(6, 16, 5) + fc(16 * 10, 120) + fc(120, 84) + fc(84, 10),
        "cnn2": conv(1, 128, 3) + conv(128, 128, 3) + fc(128 * 10, 10),
    }
    for name, count in expected.items():
        assert _n_params(private_factory(name, (1, 40))(40, 10)) == count, name


def test_the_factory_builds_a_fresh_model_each_call() -> None:
    factory = private_factory("cnn1", (1, 12))
    torch.manual_seed(0)
    a = factory(12, 3)
    torch.manual_seed(0)
    b = factory(12, 3)
    c = factory(12, 3)
    assert a is not b
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters(), strict=True))


def test_unknown_architecture_is_refused() -> None:
    with pytest.raises(KeyError, match="resnet"):
        private_factory("resnet", (1, 40))
