"""Hostile input at the HTTP edge: every answer is a 4xx with a clear code, never a 5xx, and
nothing changes (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest

BIG = str(2**63)  # one past the largest BIGINT


def _assert_4xx(r: Any, code: str | None = None) -> None:
    assert 400 <= r.status_code < 500, (r.request.url, r.status_code, r.text)
    body = r.json()
    assert set(body) >= {"error", "detail"}, body
    if code is not None:
        assert body["error"] == code, body


def test_cursors_beyond_bigint_are_refused(registry: Any) -> None:
    sub = registry.subscribe("b", "age")
    before = registry.snapshot()
    for path in ("/v1/models", "/v1/events", f"/v1/subscriptions/{sub}/models"):
        for value in (BIG, "9" * 40, "-1"):
            r = registry.client.get(path, params={"after": value}, headers=registry.auth("b"))
            _assert_4xx(r, "validation_error")
    assert registry.snapshot() == before


@pytest.mark.parametrize("header", ["²", "9" * 32, BIG, "12a", "-3"])
def test_malformed_last_event_id_is_refused(registry: Any, header: str) -> None:
    sub = registry.subscribe("b", "age")
    r = registry.client.get(
        f"/v1/subscriptions/{sub}/stream",
        headers={**registry.auth("b"), "Last-Event-ID": header.encode()},
    )
    _assert_4xx(r, "validation_error")
    assert "Last-Event-ID" in r.json()["detail"]


def test_nul_bytes_are_refused_everywhere(registry: Any) -> None:
    sub = registry.subscribe("b", "age")
    before = registry.snapshot()
    auth = registry.auth("b")
    get = registry.client.get
    _assert_4xx(get("/v1/models", params={"features": "a\x00b"}, headers=auth), "validation_error")
    _assert_4xx(get("/v1/models", params={"publisher": "a\x00"}, headers=auth), "validation_error")
    for path in (
        "/v1/models/ab%00cd",
        "/v1/models/ab%00cd/card",
        "/v1/sites/a%00",
        "/v1/sites/a%00/ledger",
        f"/v1/subscriptions/{sub}%00/models",
    ):
        _assert_4xx(get(path, headers=auth))
    post = registry.client.post
    r = post(
        "/v1/subscriptions", json={"channel": "age\x00", "task": "classification"}, headers=auth
    )
    _assert_4xx(r)
    r = post("/v1/contributions", json={"subscriber": "b", "scores": {"\x00": 0.5}}, headers=auth)
    _assert_4xx(r)
    r = post("/v1/sites/b/scopes", json={"scopes": ["q\x001"]}, headers=registry.auth("b"))
    _assert_4xx(r, "validation_error")
    assert registry.snapshot() == before


def test_every_created_at_is_rfc3339_with_a_timezone(registry: Any) -> None:
    import re

    rfc3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
    art = registry.artifacts("a", seed=90)
    assert registry.publish(art, site="a").status_code == 201
    registry.subscribe("b", "age")
    registry.client.post("/v1/sites/a/scopes", json={"scopes": ["q1"]}, headers=registry.auth("a"))
    a = registry.auth("a")
    found: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k == "created_at" and isinstance(v, str):
                    found.append(v)
                else:
                    collect(v)
        elif isinstance(value, list):
            for v in value:
                collect(v)

    for path in (
        "/v1/sites",
        "/v1/models",
        f"/v1/models/{art.card.model_id}",
        "/v1/sites/a/ledger",
        "/v1/sites/a/scopes",
        "/v1/events",
        "/v1/subscriptions",
    ):
        r = registry.client.get(path, headers=registry.admin if path == "/v1/subscriptions" else a)
        assert r.status_code == 200, (path, r.text)
        collect(r.json())
    assert len(found) >= 6
    bad = [v for v in found if not rfc3339.match(v)]
    assert not bad, bad


def _hostile_events() -> dict[str, tuple[list[Any], float]]:
    from pubsubml.privacy.events import DPEvent

    gauss = {"mechanism": "gaussian", "noise_multiplier": 5.0}
    return {
        "approx_dp ε = 1e308": ([DPEvent(mechanism="approx_dp", epsilon=1e308, delta=0.0)], 0.0),
        "count = 1e18": ([DPEvent(**gauss, count=10**18)], 1e-5),
        "Laplace b = 1e-300": ([DPEvent(mechanism="laplace", noise_multiplier=1e-300)], 1e-5),
        "σ = 1e-6": ([DPEvent(mechanism="gaussian", noise_multiplier=1e-6)], 1e-5),
        "σ = 0.2 over 10⁴ steps": (
            [
                DPEvent(
                    mechanism="subsampled_gaussian",
                    noise_multiplier=0.2,
                    sample_rate=0.01,
                    count=10_000,
                )
            ],
            1e-5,
        ),
        "100 distinct events": (
            [DPEvent(mechanism="gaussian", noise_multiplier=50.0 + i) for i in range(100)],
            1e-5,
        ),
    }


@pytest.mark.parametrize("name", sorted(_hostile_events()))
def test_expensive_or_unaccountable_dp_events_are_refused_fast(registry: Any, name: str) -> None:
    import time

    from pubsubml.artifacts.privacy_record import PrivacyRecord

    events, delta = _hostile_events()[name]
    art = registry.artifacts("a", seed=91)
    record = PrivacyRecord.from_events(
        events,
        epsilon=1.0,
        delta=delta,
        accountant="pure" if delta == 0 else "pld",
        noise="secure",
    )
    hostile = registry.artifacts.resign(art.card, art.weights, "a", privacy=record)
    before = registry.snapshot()
    start = time.perf_counter()
    r = registry.publish(hostile, site="a")
    assert time.perf_counter() - start < 5.0, name  # no exact accounting of such events
    _assert_4xx(r, "invalid_privacy")
    assert registry.snapshot() == before


@pytest.mark.parametrize("op", ["ConstantOfShape", "Loop"])
def test_onnx_memory_and_loop_bombs_are_refused_and_nothing_stored(registry: Any, op: str) -> None:
    import time

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    good = registry.artifacts("a", seed=92, fmt="onnx")
    n_in = len(good.card.input_schema.names)
    w = numpy_helper.from_array(np.ones((2, n_in), np.float32), "w")
    gemm = helper.make_node("Gemm", ["input", "w"], ["h"], transB=1)
    if op == "ConstantOfShape":
        extra = [numpy_helper.from_array(np.array([16384, 16384], np.int64), "shape")]
        nodes = [
            gemm,
            helper.make_node("ConstantOfShape", ["shape"], ["big"]),
            helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
            helper.make_node("Add", ["h", "s"], ["output"]),
        ]
    else:
        body = helper.make_graph(
            [
                helper.make_node("Identity", ["x_in"], ["x_out"]),
                helper.make_node("Identity", ["c_in"], ["c_out"]),
            ],
            "body",
            [
                helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [None, 2]),
            ],
            [
                helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [None, 2]),
            ],
        )
        extra = [
            numpy_helper.from_array(np.array(10**12, np.int64), "trips"),
            numpy_helper.from_array(np.array(True), "cond"),
        ]
        nodes = [gemm, helper.make_node("Loop", ["trips", "cond", "h"], ["output"], body=body)]
    graph = helper.make_graph(
        nodes,
        "bomb",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, n_in])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [None, 2])],
        initializer=[w, *extra],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    bomb = registry.artifacts.resign(good.card, model.SerializeToString(), "a")
    before = registry.snapshot()
    start = time.perf_counter()
    r = registry.publish(bomb, site="a")
    assert time.perf_counter() - start < 5.0
    _assert_4xx(r, "untrusted_artifact")
    assert op in r.json()["detail"]
    assert registry.snapshot() == before
