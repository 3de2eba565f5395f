"""The gloo communicators on a real one-process gloo group (127.0.0.1): membership, exchanges,
and the central server's strategy; the multi-process runs are in ``test_peers.py``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from torch import Tensor

from pubsubml.methods.federated.loop import Strategy
from pubsubml.methods.proxyfl.peers import free_port
from pubsubml.methods.proxyfl.peers_gloo import GlooCentralAveraging, GlooPushSum


@pytest.fixture
def one_rank() -> Iterator[None]:
    """A gloo process group of one rank on a free loopback port."""
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{free_port()}",
        rank=0,
        world_size=1,
        timeout=timedelta(seconds=30),
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


class _Scaled(Strategy):
    """A server that halves the mean (to see that the strategy, not a fixed mean, aggregates)."""

    client_fraction = 1.0

    def aggregate(
        self, global_params: list[Tensor], client_params: list[Tensor], weights: Tensor
    ) -> list[Tensor]:
        return [0.5 * (weights[:, None] * client_params[0]).sum(0)]


def test_membership_is_the_all_reduced_willingness(one_rank: None) -> None:
    push = GlooPushSum(world_size=1)
    assert push.membership([0], torch.tensor([True])).tolist() == [True]
    assert push.membership([0], torch.tensor([False])).tolist() == [False]
    assert len(push.membership_seconds) == 2


def test_a_lone_participant_keeps_its_proxy_and_sends_nothing(one_rank: None) -> None:
    push = GlooPushSum(world_size=1)
    theta, w = torch.randn(1, 5), torch.ones(1)
    new_theta, new_w = push.exchange(0, [0], theta, w, [0])
    assert torch.equal(new_theta, theta) and torch.equal(new_w, w)
    assert push.bytes_sent == 0 and push.sent_numels == []


def test_central_averaging_aggregates_with_its_strategy(one_rank: None) -> None:
    flat = torch.arange(4, dtype=torch.float32)
    mean = GlooCentralAveraging(world_size=1).exchange_flat(0, flat)
    assert torch.allclose(mean, flat)
    scaled = GlooCentralAveraging(world_size=1, strategy=_Scaled()).exchange_flat(0, flat)
    assert torch.allclose(scaled, 0.5 * flat)
