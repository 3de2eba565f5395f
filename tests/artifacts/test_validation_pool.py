"""Tests of pubsubml.artifacts.validation_pool: pool arguments, shut-down and shared pools.

The worker round trip runs in tests/artifacts/test_validation_worker.py and
tests/registry/test_validation_pool.py; nothing here starts a process.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pubsubml.artifacts import PrivacyRecord, make_artifact
from pubsubml.artifacts.onnx_export import mlp_to_onnx
from pubsubml.artifacts.signing import generate_signing_key
from pubsubml.artifacts.validation_pool import ValidationPool, shared_pool
from pubsubml.errors import ServiceBusyError
from pubsubml.schema import FeatureSchema

MiB = 1 << 20
LIMITS: dict[str, Any] = {"cpu_seconds": 5.0, "memory_bytes": 2 << 30, "max_weights_bytes": MiB}


@pytest.mark.parametrize(
    ("size", "cpu_seconds", "memory_bytes"),
    [(0, 5.0, 1 << 30), (1, 0.0, 1 << 30), (1, -1.0, 1 << 30), (1, 5.0, 0)],
)
def test_non_positive_limits_are_refused(size: int, cpu_seconds: float, memory_bytes: int) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        ValidationPool(
            size, cpu_seconds=cpu_seconds, memory_bytes=memory_bytes, max_weights_bytes=MiB
        )


def test_a_closed_pool_answers_busy() -> None:
    layers = [(np.eye(2, dtype=np.float32), np.zeros(2, np.float32))]
    artifact = make_artifact(
        mlp_to_onnx(layers, activation="tanh", output_activation="softmax"),
        format="onnx",
        publisher="site-a",
        schema=FeatureSchema.numeric(["a", "b"]),
        classes=[0, 1],
        privacy=PrivacyRecord.from_events([], epsilon=math.inf, delta=0.0),
        signing_key=generate_signing_key(),
    )
    pool = ValidationPool(1, **LIMITS)
    pool.close()
    pool.start()  # a no-op once closed

    with pytest.raises(ServiceBusyError, match="shut down"):
        pool.validate(artifact.card, artifact.weights, site_delta=1e-5, max_weights_bytes=MiB)
    pool.close()  # closing twice is harmless


def test_shared_pools_are_keyed_by_their_limits() -> None:
    first = shared_pool(1, **LIMITS, wait_seconds=3.0)

    again = shared_pool(1, **LIMITS, wait_seconds=3.0)
    bigger = shared_pool(2, **LIMITS, wait_seconds=3.0)
    slower = shared_pool(1, **{**LIMITS, "cpu_seconds": 6.0}, wait_seconds=3.0)

    assert again is first
    assert bigger is not first and bigger.size == 2
    assert slower is not first and slower.cpu_seconds == 6.0
    assert first.wait_seconds == 3.0
