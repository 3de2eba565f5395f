"""Tests of pubsubml.artifacts.onnx_codec: graph limits, interface checks and the ONNX runner."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pubsubml.artifacts.card import ModelCard, derive_model_id
from pubsubml.artifacts.codecs import DecodeOptions
from pubsubml.artifacts.onnx_codec import (
    MAX_CONSTANT_ELEMENTS,
    MAX_GRAPH_NODES,
    OnnxRunner,
    check_onnx,
    load_onnx,
)
from pubsubml.artifacts.privacy_record import PrivacyRecord
from pubsubml.errors import UntrustedArtifactError
from pubsubml.schema import FeatureSchema

N_IN, N_OUT = 3, 2


def _model(
    nodes: list[onnx.NodeProto],
    initializers: Sequence[TensorProto] = (),
    *,
    input_type: int = TensorProto.FLOAT,
    out_width: int | None = N_OUT,
    out_rank: int = 2,
) -> bytes:
    out_shape: list[int | None] = [None, out_width] if out_rank == 2 else [None]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("input", input_type, [None, N_IN])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)],
        initializer=list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model.SerializeToString()


def _weight(n_out: int = N_OUT) -> TensorProto:
    return numpy_helper.from_array(
        np.arange(n_out * N_IN, dtype=np.float32).reshape(n_out, N_IN), "w"
    )


def _gemm(output: str = "output") -> onnx.NodeProto:
    return helper.make_node("Gemm", ["input", "w"], [output], transB=1)


def _check(data: bytes, n_outputs: int = N_OUT) -> onnx.ModelProto:
    return check_onnx(data, n_inputs=N_IN, n_outputs=n_outputs, max_bytes=1 << 20)


def _chain(n_nodes: int) -> bytes:
    """``n_nodes`` nodes: a Gemm then Identity nodes."""
    nodes = [_gemm("h0")]
    nodes += [helper.make_node("Identity", [f"h{i}"], [f"h{i + 1}"]) for i in range(n_nodes - 2)]
    nodes.append(helper.make_node("Identity", [f"h{n_nodes - 2}"], ["output"]))
    return _model(nodes, [_weight()])


# ---- graph limits ---------------------------------------------------------------------------
def test_node_count_limit_is_inclusive() -> None:
    _check(_chain(MAX_GRAPH_NODES))

    with pytest.raises(UntrustedArtifactError, match=f"more than {MAX_GRAPH_NODES} nodes"):
        _check(_chain(MAX_GRAPH_NODES + 1))


@pytest.mark.parametrize("op", ["Range", "If", "Scan", "SequenceMap"])
def test_forbidden_operators_are_named(op: str) -> None:
    nodes = [
        _gemm("h"),
        helper.make_node(op, ["h"], ["x"]),
        helper.make_node("Identity", ["h"], ["output"]),
    ]

    with pytest.raises(UntrustedArtifactError, match=f"ONNX operator {op} \\(main graph\\)"):
        _check(_model(nodes, [_weight()]))


def _expand_graph(shape: list[int], *, in_node: bool = False, op: str = "Expand") -> bytes:
    one = numpy_helper.from_array(np.ones((1, 1), np.float32), "one")
    shape_tensor = numpy_helper.from_array(np.array(shape, np.int64), "shape")
    nodes = [_gemm("h")]
    initializers = [_weight(), one]
    if in_node:
        nodes.append(helper.make_node("Constant", [], ["shape"], value=shape_tensor))
    else:
        initializers.append(shape_tensor)
    nodes += [
        helper.make_node(op, ["one", "shape"], ["big"]),
        helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
        helper.make_node("Add", ["h", "s"], ["output"]),
    ]
    return _model(nodes, initializers)


def test_small_constant_expand_is_accepted() -> None:
    _check(_expand_graph([4, 4]))


@pytest.mark.parametrize(
    ("shape", "in_node", "op"),
    [
        ([1 << 12, (1 << 12) + 1], False, "Expand"),
        ([1 << 13, 1 << 13], True, "Expand"),
        ([1 << 13, 1 << 13], False, "Tile"),
        ([-1, 2], False, "Expand"),
    ],
    ids=["just-over", "constant-node", "tile", "negative"],
)
def test_large_constant_sizes_are_refused(shape: list[int], in_node: bool, op: str) -> None:
    data = _expand_graph(shape, in_node=in_node, op=op)

    with pytest.raises(UntrustedArtifactError, match=f"above the {MAX_CONSTANT_ELEMENTS}"):
        _check(data)


# ---- interface checks -----------------------------------------------------------------------
def test_a_graph_without_nodes_is_refused() -> None:
    with pytest.raises(UntrustedArtifactError, match="no graph"):
        _check(_model([], [_weight()]))


def test_double_input_is_refused() -> None:
    data = _model([_gemm()], [_weight()], input_type=TensorProto.DOUBLE)

    with pytest.raises(UntrustedArtifactError, match="not a float32 tensor"):
        _check(data)


def test_output_width_must_match_the_card_unless_dynamic() -> None:
    with pytest.raises(UntrustedArtifactError, match="does not match the card's 3 outputs"):
        _check(_model([_gemm()], [_weight()]), n_outputs=3)

    _check(_model([_gemm()], [_weight()], out_width=None))


def _row_sums() -> bytes:
    """A graph whose output is a vector: the row sums of the Gemm."""
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [_gemm("h"), helper.make_node("ReduceSum", ["h", "axes"], ["output"], keepdims=0)]
    return _model(nodes, [_weight(), axes], out_rank=1)


def test_one_dimensional_output_is_refused() -> None:
    with pytest.raises(UntrustedArtifactError, match="ONNX output shape"):
        _check(_row_sums(), n_outputs=1)


# ---- runner ---------------------------------------------------------------------------------
def test_runner_computes_the_graph() -> None:
    Z = np.random.default_rng(0).random((4, N_IN)).astype(np.float32)
    weight = numpy_helper.to_array(_weight())

    out = OnnxRunner(_model([_gemm()], [_weight()]), n_inputs=N_IN, n_outputs=N_OUT).run(Z)

    np.testing.assert_allclose(out, Z @ weight.T, rtol=1e-6)


def test_runner_refuses_outputs_wider_than_declared() -> None:
    data = _model([_gemm()], [_weight(n_out=3)], out_width=None)
    runner = OnnxRunner(data, n_inputs=N_IN, n_outputs=N_OUT)

    with pytest.raises(UntrustedArtifactError, match=r"shape \(2, 3\), expected \(2, 2\)"):
        runner.run(np.zeros((2, N_IN), np.float32))


def test_runner_turns_a_vector_into_one_column() -> None:
    runner = OnnxRunner(_row_sums(), n_inputs=N_IN, n_outputs=1)

    out = runner.run(np.ones((3, N_IN), np.float32))

    np.testing.assert_allclose(out, np.full((3, 1), numpy_helper.to_array(_weight()).sum()))


def test_runner_reports_bytes_it_cannot_load() -> None:
    with pytest.raises(UntrustedArtifactError, match="ONNX Runtime rejected the model"):
        OnnxRunner(b"\x08\x07garbage", n_inputs=N_IN, n_outputs=N_OUT)


# ---- load_onnx ------------------------------------------------------------------------------
def _card(weights: bytes) -> ModelCard:
    digest = hashlib.sha256(weights).hexdigest()
    return ModelCard(
        model_id=derive_model_id("site-a", digest),
        publisher="site-a",
        task="classification",
        classes=["no", "yes"],
        input_schema=FeatureSchema.numeric(["a", "b", "c"]),
        output=["proba[no]", "proba[yes]"],
        privacy=PrivacyRecord.from_events([], epsilon=math.inf, delta=0.0),
        created_at=datetime(2024, 1, 1, tzinfo=UTC),
        format="onnx",
        weights_sha256=digest,
    )


def test_load_onnx_applies_the_decode_options() -> None:
    data = _model([_gemm()], [_weight()])
    card = _card(data)

    runner = load_onnx(card, data, DecodeOptions(intra_op_threads=2))

    assert (runner.n_inputs, runner.n_outputs) == (N_IN, N_OUT)
    assert runner._session.get_session_options().intra_op_num_threads == 2
    with pytest.raises(UntrustedArtifactError, match=f"the limit is {len(data) - 1}"):
        load_onnx(card, data, DecodeOptions(max_bytes=len(data) - 1))


def test_load_onnx_checks_the_graph_against_the_card() -> None:
    data = _model([_gemm()], [_weight(n_out=3)], out_width=3)

    with pytest.raises(UntrustedArtifactError, match="card's 2 outputs"):
        load_onnx(_card(data), data, DecodeOptions())
