"""Safety checks on untrusted ONNX weights: foreign payloads, external data, custom domains."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from onnx import TensorProto, helper, numpy_helper

from pubsubml.artifacts import Artifact, PublishedModel, make_artifact
from pubsubml.artifacts.codecs import describe_foreign_payload
from pubsubml.artifacts.onnx_codec import OnnxRunner, check_onnx
from pubsubml.errors import UntrustedArtifactError
from pubsubml.schema import FeatureSchema

# Hand-written pickles that would run ``os.system`` if unpickled (they never are).
PICKLE_PROTOCOL_0 = b"cos\nsystem\n(S'echo pwned'\ntR."
PICKLE_PROTOCOL_4 = (
    b"\x80\x04\x95\x1e\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06system\x94\x93\x94"
    b"\x8c\x04true\x94\x85\x94R\x94."
)
N_IN, N_OUT = 5, 2


def _graph(
    nodes: list[onnx.NodeProto] | None = None,
    initializers: list[TensorProto] | None = None,
    n_in: int = N_IN,
    name: str = "g",
) -> onnx.GraphProto:
    weight = numpy_helper.from_array(np.ones((N_OUT, n_in), np.float32), "w")
    return helper.make_graph(
        nodes or [helper.make_node("Gemm", ["input", "w"], ["output"], transB=1)],
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, n_in])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [None, N_OUT])],
        initializer=initializers if initializers is not None else [weight],
    )


def _model(
    graph: onnx.GraphProto, extra_opsets: tuple[tuple[str, int], ...] = ()
) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", 18)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def _external(name: str, location: str = "../../etc/passwd") -> TensorProto:
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[N_OUT, N_IN])
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    return tensor


def _check(data: bytes, n_in: int = N_IN, max_bytes: int = 1 << 20) -> onnx.ModelProto:
    return check_onnx(data, n_inputs=n_in, n_outputs=N_OUT, max_bytes=max_bytes)


def test_a_clean_model_passes() -> None:
    _check(_model(_graph()).SerializeToString())


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        (PICKLE_PROTOCOL_0, "a Python pickle"),
        (PICKLE_PROTOCOL_4, r"a Python pickle \(protocol 4\)"),
        (b"PK\x03\x04" + b"\x00" * 64, "a zip archive"),
        (b"\x93NUMPY\x01\x00" + b"\x00" * 64, "a NumPy"),
    ],
    ids=["pickle-0", "pickle-4", "zip", "npy"],
)
def test_foreign_payloads_are_named(payload: bytes, named: str) -> None:
    with pytest.raises(UntrustedArtifactError, match=f"weights are {named}"):
        _check(payload)


def test_random_bytes_are_rejected() -> None:
    data = np.random.default_rng(0).bytes(4096)

    with pytest.raises(UntrustedArtifactError, match="not a valid ONNX model"):
        _check(data)


def test_empty_and_oversized_payloads_are_rejected() -> None:
    data = _model(_graph()).SerializeToString()

    with pytest.raises(UntrustedArtifactError, match="empty"):
        _check(b"")
    with pytest.raises(UntrustedArtifactError, match="the limit is 16"):
        _check(data, max_bytes=16)


def test_external_initializer_is_rejected() -> None:
    model = _model(_graph(initializers=[_external("w")]))

    with pytest.raises(UntrustedArtifactError, match=r"external data at '\.\./\.\./etc/passwd'"):
        _check(model.SerializeToString())


def test_external_data_entries_without_location_flag_are_rejected() -> None:
    tensor = numpy_helper.from_array(np.ones((N_OUT, N_IN), np.float32), "w")
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "/etc/shadow"

    with pytest.raises(UntrustedArtifactError, match="external data"):
        _check(_model(_graph(initializers=[tensor])).SerializeToString())


def test_external_tensor_in_a_constant_attribute_is_rejected() -> None:
    nodes = [
        helper.make_node("Constant", [], ["w"], value=_external("const")),
        helper.make_node("Gemm", ["input", "w"], ["output"], transB=1),
    ]

    with pytest.raises(UntrustedArtifactError, match="attribute 'value'"):
        _check(_model(_graph(nodes=nodes, initializers=[])).SerializeToString())


def test_external_tensor_in_a_nested_subgraph_is_rejected() -> None:
    inner = helper.make_graph(
        [helper.make_node("Identity", ["hidden"], ["branch_out"])],
        "inner",
        [],
        [helper.make_tensor_value_info("branch_out", TensorProto.FLOAT, [N_OUT, N_IN])],
        initializer=[_external("hidden")],
    )
    branch = helper.make_graph(
        [helper.make_node("If", ["flag"], ["branch_out"], then_branch=inner, else_branch=inner)],
        "branch",
        [],
        [helper.make_tensor_value_info("branch_out", TensorProto.FLOAT, [N_OUT, N_IN])],
    )
    nodes = [
        helper.make_node(
            "Constant", [], ["flag"], value=helper.make_tensor("f", TensorProto.BOOL, [], [True])
        ),
        helper.make_node("If", ["flag"], ["w"], then_branch=branch, else_branch=branch),
        helper.make_node("Gemm", ["input", "w"], ["output"], transB=1),
    ]

    with pytest.raises(UntrustedArtifactError, match="subgraph 'inner'"):
        _check(_model(_graph(nodes=nodes, initializers=[])).SerializeToString())


def test_custom_operator_domain_is_rejected() -> None:
    nodes = [
        helper.make_node("Gemm", ["input", "w"], ["h"], transB=1),
        helper.make_node("Exfiltrate", ["h"], ["output"], domain="com.evil"),
    ]
    model = _model(_graph(nodes=nodes), extra_opsets=(("com.evil", 1),))

    with pytest.raises(
        UntrustedArtifactError, match=r"non-standard operator domains \['com.evil'\]"
    ):
        _check(model.SerializeToString())


def test_custom_domain_node_without_opset_import_is_rejected() -> None:
    nodes = [
        helper.make_node("Gemm", ["input", "w"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["output"], domain="com.microsoft"),
    ]

    with pytest.raises(UntrustedArtifactError, match=r"domain 'com\.microsoft'"):
        _check(_model(_graph(nodes=nodes)).SerializeToString())


def test_local_functions_are_rejected() -> None:
    model = _model(_graph())
    model.functions.append(
        helper.make_function(
            "",
            "MyGemm",
            ["x"],
            ["y"],
            [helper.make_node("Relu", ["x"], ["y"])],
            [helper.make_opsetid("", 18)],
        )
    )

    with pytest.raises(UntrustedArtifactError, match="local functions"):
        _check(model.SerializeToString())


def test_training_information_is_rejected() -> None:
    model = _model(_graph())
    model.training_info.add()

    with pytest.raises(UntrustedArtifactError, match="training information"):
        _check(model.SerializeToString())


def test_input_width_must_match_the_card() -> None:
    data = _model(_graph(n_in=4)).SerializeToString()

    with pytest.raises(UntrustedArtifactError, match="does not match the card's schema width 5"):
        _check(data)


def test_two_outputs_are_rejected() -> None:
    graph = _graph()
    graph.output.append(helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, N_IN]))

    with pytest.raises(UntrustedArtifactError, match="one input and one output"):
        _check(_model(graph).SerializeToString())


def test_describe_foreign_payload_leaves_onnx_alone() -> None:
    assert describe_foreign_payload(_model(_graph()).SerializeToString()) is None


def test_session_uses_cpu_and_one_thread() -> None:
    runner = OnnxRunner(_model(_graph()).SerializeToString(), n_inputs=N_IN, n_outputs=N_OUT)

    session = runner._session
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert session.get_session_options().intra_op_num_threads == 1
    assert runner.run(np.ones((3, N_IN), np.float32)).shape == (3, N_OUT)


@pytest.fixture
def signed_weights(
    schema: FeatureSchema, onnx_artifact: Artifact, signing_key: Ed25519PrivateKey
) -> Callable[[bytes], Artifact]:
    """Sign arbitrary weights as if a trusted publisher had gone rogue."""

    def sign(weights: bytes) -> Artifact:
        card = onnx_artifact.card
        return make_artifact(
            weights,
            format="onnx",
            publisher=card.publisher,
            schema=schema,
            classes=card.classes,
            privacy=card.privacy,
            signing_key=signing_key,
        )

    return sign


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (PICKLE_PROTOCOL_4, "pickle"),
        (np.random.default_rng(1).bytes(2048), "not a valid ONNX model"),
        (_model(_graph(initializers=[_external("w")])).SerializeToString(), "etc/passwd"),
        (
            _model(
                _graph(nodes=[helper.make_node("Evil", ["input", "w"], ["output"], domain="x.y")]),
                extra_opsets=(("x.y", 1),),
            ).SerializeToString(),
            "non-standard operator domains",
        ),
    ],
    ids=["pickle", "random-bytes", "external-data", "custom-domain"],
)
def test_signed_but_unsafe_weights_are_refused_by_the_loader(
    signed_weights: Callable[[bytes], Artifact],
    trusted: dict[str, Ed25519PublicKey],
    weights: bytes,
    message: str,
) -> None:
    artifact = signed_weights(weights)

    with pytest.raises(UntrustedArtifactError, match=message):
        PublishedModel.load(artifact.card, artifact.weights, trusted)


def _bomb(kind: str) -> bytes:
    """Tiny graphs that would hang or exhaust memory when loaded or run."""
    gemm = helper.make_node("Gemm", ["input", "w"], ["h"], transB=1)
    if kind == "ConstantOfShape":
        shape = numpy_helper.from_array(np.array([16384, 16384], np.int64), "shape")
        nodes = [
            gemm,
            helper.make_node("ConstantOfShape", ["shape"], ["big"]),
            helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
            helper.make_node("Add", ["h", "s"], ["output"]),
        ]
        return _model(_graph(nodes, [_weight(), shape])).SerializeToString()
    if kind == "Expand":
        one = numpy_helper.from_array(np.ones((1, 1), np.float32), "one")
        shape = numpy_helper.from_array(np.array([16384, 16384], np.int64), "shape")
        nodes = [
            gemm,
            helper.make_node("Expand", ["one", "shape"], ["big"]),
            helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
            helper.make_node("Add", ["h", "s"], ["output"]),
        ]
        return _model(_graph(nodes, [_weight(), one, shape])).SerializeToString()
    # Loop: 10¹² iterations of an identity body
    body = helper.make_graph(
        [helper.make_node("Identity", ["carried_in"], ["carried_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("carried_in", TensorProto.FLOAT, [None, N_OUT]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("carried_out", TensorProto.FLOAT, [None, N_OUT]),
        ],
    )  # fmt: skip
    trips = numpy_helper.from_array(np.array(10**12, np.int64), "trips")
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [gemm, helper.make_node("Loop", ["trips", "cond", "h"], ["output"], body=body)]
    return _model(_graph(nodes, [_weight(), trips, cond])).SerializeToString()


def _weight() -> TensorProto:
    return numpy_helper.from_array(np.ones((N_OUT, N_IN), np.float32), "w")


@pytest.mark.parametrize("kind", ["ConstantOfShape", "Expand", "Loop"])
def test_memory_and_loop_bombs_are_refused_before_anything_runs(kind: str) -> None:
    data = _bomb(kind)
    assert len(data) < 2_000  # a kilobyte or so of graph
    with pytest.raises(UntrustedArtifactError, match=kind):
        _check(data)


def test_the_runtime_does_not_fold_constants_at_load() -> None:
    # A constant subgraph (here a harmless one) is evaluated only when the model runs.
    c = numpy_helper.from_array(np.ones((1, N_OUT), np.float32), "c")
    nodes = [
        helper.make_node("Gemm", ["input", "w"], ["h"], transB=1),
        helper.make_node("Mul", ["c", "c"], ["cc"]),
        helper.make_node("Add", ["h", "cc"], ["output"]),
    ]
    data = _model(_graph(nodes, [_weight(), c])).SerializeToString()
    _check(data)
    runner = OnnxRunner(data, n_inputs=N_IN, n_outputs=N_OUT)
    np.testing.assert_allclose(runner.run(np.zeros((2, N_IN), np.float32)), np.ones((2, N_OUT)))
