"""Shared pieces of the Flower tests: messages built as a SuperNode would deliver them."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import ConfigRecord, Context, Message, Metadata, RecordDict

from pubsubml.data import hyperplane
from pubsubml.data.dataset import Dataset
from pubsubml.methods.flower.client_app import DPClientConfig
from pubsubml.methods.flower.records import params_to_record
from pubsubml.privacy.dpsgd import init_mlp

_IDS = itertools.count()


def message(message_type: str, content: RecordDict, node_id: int = 7) -> Message:
    """A message to ``node_id`` with the metadata a run gives it."""
    metadata = Metadata(
        run_id=1,
        message_id=f"m{next(_IDS)}",
        src_node_id=0,
        dst_node_id=node_id,
        reply_to_message_id="",
        group_id="",
        created_at=time.time(),
        ttl=3600.0,
        message_type=message_type,
    )
    return Message(content, metadata=metadata)


def context(partition: int = 0, node_id: int = 7) -> Context:
    """A node's context with an empty persistent state."""
    return Context(
        run_id=1,
        node_id=node_id,
        node_config={"partition-id": partition},
        state=RecordDict(),
        run_config={},
    )


def initial(config: DPClientConfig, seed: int = 0) -> list[np.ndarray]:
    """The initial global model's parameters."""
    net = init_mlp(config.layer_sizes, config.activation, torch.Generator().manual_seed(seed))
    return [p.detach().numpy().copy() for p in net.parameters()]


def train_message(params: Sequence[np.ndarray], round_: int, **config: Any) -> Message:
    """A ``train`` message of round ``round_`` carrying ``params``."""
    record = ConfigRecord({"server-round": round_, **config})
    return message("train", RecordDict({"arrays": params_to_record(params), "config": record}))


@pytest.fixture(scope="module")
def sites() -> list[Dataset]:
    """Three Hyperplane sites of 300 rows."""
    return [hyperplane(300, seed=s) for s in range(3)]


@pytest.fixture
def config(sites: list[Dataset]) -> DPClientConfig:
    """A small network, ε = 1 over three planned rounds."""
    return DPClientConfig(
        schema=sites[0].schema,
        classes=[0, 1],
        hidden_layer_sizes=(8,),
        batch_size=50,
        lr=0.01,
        epsilon_budget=1.0,
        planned_rounds=3,
    )
