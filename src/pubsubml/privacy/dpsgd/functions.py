"""The losses and activations of the DP-SGD engine, with the gradients its fast path needs.

The generic path (:mod:`pubsubml.privacy.dpsgd.generic`) differentiates a :class:`Loss` with
``torch.func``; the stacked path (:mod:`pubsubml.privacy.dpsgd.mlp_stack`) uses its closed-form
output gradient and each :class:`Activation`'s in-place backward.

References
----------
pubsub-ml.txt §7.2 (Table 4 networks: tanh hidden layers, cross-entropy) and §8 (DP-SGD).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["ACTIVATIONS", "LOSSES", "Activation", "Loss"]


@dataclass(frozen=True)
class Activation:
    """An elementwise activation of the fast path.

    ``forward_(z)`` applies it in place; ``backward_(h, a, tmp)`` multiplies the upstream gradient
    ``h`` in place by the derivative written from the output ``a`` (``tmp``: scratch of a's shape).
    """

    module: type[nn.Module]
    forward_: Callable[[Tensor], Tensor]
    backward_: Callable[[Tensor, Tensor, Tensor], Tensor]


def _tanh_backward_(h: Tensor, a: Tensor, tmp: Tensor) -> Tensor:
    return h.addcmul_(h, torch.mul(a, a, out=tmp), value=-1.0)  # h·(1 − a²)


def _relu_backward_(h: Tensor, a: Tensor, tmp: Tensor) -> Tensor:
    return h.masked_fill_(a <= 0, 0.0)


def _sigmoid_backward_(h: Tensor, a: Tensor, tmp: Tensor) -> Tensor:
    return h.mul_(torch.sub(a, torch.mul(a, a, out=tmp), out=tmp))  # h·a(1 − a)


@dataclass(frozen=True)
class Loss:
    """A per-sample loss over outputs (..., k) and targets (...), and its gradient in the outputs."""

    per_sample: Callable[[Tensor, Tensor], Tensor]
    output_grad: Callable[[Tensor, Tensor], Tensor]


def _ce(out: Tensor, y: Tensor) -> Tensor:
    return -torch.log_softmax(out, -1).gather(-1, y.unsqueeze(-1)).squeeze(-1)


def _ce_grad(out: Tensor, y: Tensor) -> Tensor:
    g = torch.softmax(out, -1)
    return g.scatter_add_(-1, y.unsqueeze(-1), torch.full_like(g[..., :1], -1.0))


ACTIVATIONS: dict[str, Activation] = {
    "tanh": Activation(nn.Tanh, torch.tanh_, _tanh_backward_),
    "relu": Activation(nn.ReLU, torch.relu_, _relu_backward_),
    "sigmoid": Activation(nn.Sigmoid, torch.sigmoid_, _sigmoid_backward_),
}
LOSSES: dict[str, Loss] = {
    "cross_entropy": Loss(_ce, _ce_grad),  # logits (..., k), int64 labels (...)
    "mse": Loss(lambda o, y: (o[..., 0] - y) ** 2, lambda o, y: 2.0 * (o - y.unsqueeze(-1))),
}


def _activation(name: str) -> Activation:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def _loss(loss: str | Loss) -> Loss:
    if isinstance(loss, Loss):
        return loss
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; choose one of {sorted(LOSSES)}")
    return LOSSES[loss]
