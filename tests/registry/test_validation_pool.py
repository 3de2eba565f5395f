"""Untrusted artifacts are validated in pooled worker processes with CPU-time and memory limits:
a validation beyond a limit is refused, only its worker is replaced, and nothing is stored."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from pubsubml.artifacts import PrivacyRecord
from pubsubml.artifacts.validation_pool import ValidationPool
from pubsubml.errors import (
    InvalidPrivacyParameterError,
    ServiceBusyError,
    UntrustedArtifactError,
)
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent

MiB = 1 << 20
DELTA = 1e-5  # the test sites' δ
# ε ≈ 92 at δ = 1e-5: under the registry's RDP cap of 100, about 1 s and 150 MB of exact accounting.
HEAVY_EVENTS = [
    DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=1.0, count=100)
]


def privacy_record(events: Any = None, **changes: Any) -> PrivacyRecord:
    """A correct privacy record of ``events`` (default: one Gaussian release), or a changed one."""
    events = list(events or [DPEvent(mechanism="gaussian", noise_multiplier=5.0)])
    data: dict[str, Any] = {"epsilon": compute_epsilon(events, DELTA), "delta": DELTA, **changes}
    return PrivacyRecord.from_events(events, accountant="pld", noise="secure", **data)


def _chain(n_nodes: int, n_in: int) -> bytes:
    """An ONNX graph of ``n_nodes`` chained ``Add`` nodes: valid, small, slow to load."""
    w = numpy_helper.from_array(np.ones((2, n_in), np.float32), "w")
    one = numpy_helper.from_array(np.ones((1,), np.float32), "one")
    nodes = [helper.make_node("Gemm", ["input", "w"], ["h0"], transB=1)]
    nodes += [helper.make_node("Add", [f"h{i}", "one"], [f"h{i + 1}"]) for i in range(n_nodes - 2)]
    nodes.append(helper.make_node("Softmax", [f"h{n_nodes - 2}"], ["output"]))
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, n_in])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [None, 2])],
        initializer=[w, one],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.fixture
def pool() -> Iterator[ValidationPool]:
    p = ValidationPool(1, cpu_seconds=30, memory_bytes=4 << 30, max_weights_bytes=64 * MiB)
    yield p
    p.close()


def _validate(pool: ValidationPool, art: Any) -> float:
    return pool.validate(art.card, art.weights, site_delta=DELTA, max_weights_bytes=64 * MiB)


def test_an_honest_artifact_gets_its_epsilon(pool: ValidationPool, artifacts: Any) -> None:
    pool.start()  # workers start ahead of the first upload
    assert len(pool._all) == pool.size
    art = artifacts("a", seed=1, fmt="onnx")
    assert _validate(pool, art) == pytest.approx(
        compute_epsilon(list(art.card.privacy.events), DELTA)
    )
    assert _validate(pool, artifacts("a", seed=2)) > 0  # the same worker serves again


def test_worker_errors_keep_their_class(pool: ValidationPool, artifacts: Any) -> None:
    good = artifacts("a", seed=3)
    understated = artifacts.resign(
        good.card, good.weights, "a", privacy=privacy_record(epsilon=0.01).model_dump()
    )
    with pytest.raises(InvalidPrivacyParameterError, match="may not claim less"):
        _validate(pool, understated)
    n_in = good.card.input_schema.n_encoded
    too_big = artifacts.resign(good.card, _chain(2049, n_in), "a", format="onnx", architecture=None)
    with pytest.raises(UntrustedArtifactError, match="more than 2048 nodes"):
        _validate(pool, too_big)


def test_cpu_time_limit_refuses_and_replaces_only_that_worker(artifacts: Any) -> None:
    pool = ValidationPool(1, cpu_seconds=0.2, memory_bytes=4 << 30, max_weights_bytes=64 * MiB)
    try:
        good = artifacts("a", seed=4)
        assert _validate(pool, good) > 0  # the worker is up (imports are not the request's)
        n_in = good.card.input_schema.n_encoded
        slow = artifacts.resign(
            good.card,
            _chain(2048, n_in),
            "a",
            format="onnx",
            architecture=None,
            privacy=privacy_record(HEAVY_EVENTS).model_dump(),
        )
        start = time.perf_counter()
        with pytest.raises(UntrustedArtifactError, match="exceeded the registry's limits"):
            _validate(pool, slow)
        assert time.perf_counter() - start < 15.0
        assert _validate(pool, good) > 0  # a fresh worker took its place
    finally:
        pool.close()


def test_memory_limit_refuses(artifacts: Any) -> None:
    good = artifacts("a", seed=5)
    heavy = artifacts.resign(
        good.card, good.weights, "a", privacy=privacy_record(HEAVY_EVENTS).model_dump()
    )
    roomy = ValidationPool(1, cpu_seconds=30, memory_bytes=4 << 30, max_weights_bytes=MiB)
    try:
        assert _validate(roomy, good) > 0
        # The address space a worker needs for its imports and one honest artifact, plus 64 MB:
        # the exact accounting of the heavy card needs more.
        pid = next(iter(roomy._all)).proc.pid
        with open(f"/proc/{pid}/status") as fh:
            vm_size = next(int(line.split()[1]) for line in fh if line.startswith("VmSize"))
        assert _validate(roomy, heavy) > 90  # fits with room
    finally:
        roomy.close()
    tight = ValidationPool(
        1, cpu_seconds=30, memory_bytes=vm_size * 1024 + 64 * MiB, max_weights_bytes=MiB
    )
    try:
        assert _validate(tight, good) > 0
        refused = (UntrustedArtifactError, InvalidPrivacyParameterError)  # where it ran out
        with pytest.raises(refused, match=r"(?i)memory|exceeded the registry.s limits"):
            _validate(tight, heavy)
        assert _validate(tight, good) > 0
    finally:
        tight.close()


def test_a_full_pool_answers_busy(artifacts: Any) -> None:
    pool = ValidationPool(
        1, cpu_seconds=30, memory_bytes=4 << 30, max_weights_bytes=MiB, wait_seconds=0.2
    )
    try:
        good = artifacts("a", seed=6)
        heavy = artifacts.resign(
            good.card, good.weights, "a", privacy=privacy_record(HEAVY_EVENTS).model_dump()
        )
        assert _validate(pool, good) > 0
        t = threading.Thread(target=_validate, args=(pool, heavy))
        t.start()
        time.sleep(0.1)
        with pytest.raises(ServiceBusyError, match="busy"):
            _validate(pool, good)
        t.join(30)
    finally:
        pool.close()


def test_the_registry_refuses_a_slow_graph_and_stores_nothing(registry_factory: Any) -> None:
    reg = registry_factory(validation_cpu_seconds=0.2)
    reg.add_features()
    reg.add_site("a")
    good = reg.artifacts("a", seed=95)
    assert reg.publish(good, site="a").status_code == 201  # warm worker
    slow = reg.artifacts.resign(
        good.card,
        _chain(2048, good.card.input_schema.n_encoded),
        "a",
        format="onnx",
        architecture=None,
        privacy=privacy_record(HEAVY_EVENTS).model_dump(),
    )
    before = reg.snapshot()
    r = reg.publish(slow, site="a")
    assert r.status_code == 422 and r.json()["error"] == "untrusted_artifact", r.text
    assert reg.snapshot() == before


def test_publishes_beyond_the_cap_wait_then_get_503(registry_factory: Any) -> None:
    reg = registry_factory(max_concurrent_publishes=1, publish_wait_seconds=0.2)
    reg.add_features()
    reg.add_site("a")
    slots = reg.client.app.state.registry.publish_slots
    asyncio.run(slots.acquire())  # another publish holds the only slot
    try:
        r = reg.publish(reg.artifacts("a", seed=96), site="a")
    finally:
        slots.release()
    assert r.status_code == 503 and r.json()["error"] == "busy", r.text
    assert r.headers["Retry-After"] == "1"
    assert reg.publish(reg.artifacts("a", seed=96), site="a").status_code == 201
