"""The private models of the ProxyFL evaluation (proxyfl.txt §4.2), for 1-D or 2-D inputs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from pubsubml.methods.proxyfl.local import PrivateFactory

__all__ = ["ARCHITECTURES", "private_factory"]


def _convnet(
    shape: tuple[int, ...], n_classes: int, channels: Sequence[int], k: int, fc: Sequence[int]
) -> nn.Module:
    conv, pool = (nn.Conv1d, nn.MaxPool1d) if len(shape) == 2 else (nn.Conv2d, nn.MaxPool2d)
    layers: list[nn.Module] = [nn.Unflatten(1, shape)]
    c_in = shape[0]
    for c in channels:
        layers += [conv(c_in, c, k, padding=k // 2), nn.ReLU(), pool(2)]
        c_in = c
    layers.append(nn.Flatten())
    with torch.no_grad():
        width = nn.Sequential(*layers)(torch.zeros(1, math.prod(shape))).shape[1]
    for h in fc:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, n_classes))
    return nn.Sequential(*layers)


def _mlp(shape: tuple[int, ...], n_classes: int) -> nn.Module:
    d = math.prod(shape)
    return nn.Sequential(
        nn.Linear(d, 200), nn.ReLU(), nn.Linear(200, 200), nn.ReLU(), nn.Linear(200, n_classes)
    )


#: The four private architectures of §4.2, adapted to 1-D (mnist1d) or 2-D (digits) inputs:
#: MLP 200-200, LeNet5-like (6, 16 channels, FC 120-84), CNN1 (6, 16 channels, FC 64) and CNN2
#: (128, 128 channels).
ARCHITECTURES: dict[str, Callable[[tuple[int, ...], int], nn.Module]] = {
    "mlp": _mlp,
    "lenet": lambda s, c: _convnet(s, c, (6, 16), 5, (120, 84)),
    "cnn1": lambda s, c: _convnet(s, c, (6, 16), 3, (64,)),
    "cnn2": lambda s, c: _convnet(s, c, (128, 128), 3, ()),
}


def private_factory(name: str, input_shape: tuple[int, ...]) -> PrivateFactory:
    """A private-model factory for :class:`ProxyFL` from :data:`ARCHITECTURES`.

    Raises
    ------
    KeyError
        Unknown architecture name.

    Examples
    --------
    >>> private_factory("cnn1", (1, 40))(40, 10)(torch.zeros(3, 40)).shape
    torch.Size([3, 10])
    """
    if name not in ARCHITECTURES:
        raise KeyError(f"unknown architecture {name!r}; known: {sorted(ARCHITECTURES)}")
    build = ARCHITECTURES[name]
    return lambda n_features, n_classes: build(input_shape, n_classes)
