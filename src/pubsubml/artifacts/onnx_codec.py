"""ONNX: the universal weights format, with the safety checks an untrusted graph needs.

Any model type travels as ONNX and runs in ONNX Runtime without the publisher's code
(pubsub-ml.txt §4: subscribed models are black boxes).  Every graph outputs probabilities
(classification) or predictions (regression) from one float32 input of the schema's encoded width.

Exporters: :func:`mlp_to_onnx` writes a fully connected network directly as Gemm + activation
nodes (exact, deterministic bytes, no tracing); :func:`torch_to_onnx` uses ``torch.onnx.export``
for any other network; :func:`sklearn_to_onnx` uses skl2onnx for scikit-learn models.

Loader: :func:`check_onnx` rejects what a stranger could abuse, namely tensors stored as external
data (a path such as ``../../etc/passwd`` would be read from the subscriber's disk), operators from
domains other than the standard ``""``/``ai.onnx``/``ai.onnx.ml`` (custom kernels), model-local
functions, training blocks, oversized payloads and inputs that do not match the card; then
:class:`OnnxRunner` runs the graph on the CPU provider only, with one intra-op thread by default
and no custom op library.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.utils import Extractor

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.codecs import DecodeOptions, reject_foreign_payload
from pubsubml.errors import UntrustedArtifactError

__all__ = [
    "ALLOWED_DOMAINS",
    "OnnxRunner",
    "check_onnx",
    "load_onnx",
    "mlp_to_onnx",
    "sklearn_to_onnx",
    "torch_to_onnx",
]

ALLOWED_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})
_OPSET = 18
_ACTIVATION_OPS = {"tanh": "Tanh", "relu": "Relu", "sigmoid": "Sigmoid"}


# ---- exporters ---------------------------------------------------------------------------
def mlp_to_onnx(
    layers: Sequence[tuple[np.ndarray, np.ndarray]], *, activation: str, output_activation: str
) -> bytes:
    """ONNX graph of a fully connected network.

    Parameters
    ----------
    layers : sequence of (weight, bias)
        Weight of shape (out, in) and bias of shape (out,) per linear layer, as in ``nn.Linear``.
    activation : {"tanh", "relu", "sigmoid"}
        After every hidden layer.
    output_activation : {"softmax", "identity"}

    Returns
    -------
    bytes
        Serialized ``ModelProto``: input ``input`` (batch, in), output ``output`` (batch, out).
    """
    nodes: list[onnx.NodeProto] = []
    initializers: list[TensorProto] = []
    current = "input"
    for i, (weight, bias) in enumerate(layers):
        initializers.append(numpy_helper.from_array(np.asarray(weight, np.float32), f"{i}.weight"))
        initializers.append(numpy_helper.from_array(np.asarray(bias, np.float32), f"{i}.bias"))
        nodes.append(
            helper.make_node(
                "Gemm", [current, f"{i}.weight", f"{i}.bias"], [f"linear_{i}"], transB=1
            )
        )
        current = f"linear_{i}"
        if i < len(layers) - 1:
            nodes.append(helper.make_node(_ACTIVATION_OPS[activation], [current], [f"act_{i}"]))
            current = f"act_{i}"
    if output_activation == "softmax":
        nodes.append(helper.make_node("Softmax", [current], ["output"], axis=-1))
    else:
        nodes.append(helper.make_node("Identity", [current], ["output"]))
    n_in = int(np.shape(layers[0][0])[1])
    n_out = int(np.shape(layers[-1][0])[0])
    graph = helper.make_graph(
        nodes,
        "pubsubml_mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", n_in])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", n_out])],
        initializer=initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", _OPSET)], producer_name="pubsubml"
    )
    model.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", _OPSET)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def torch_to_onnx(module: Any, n_inputs: int, *, softmax: bool) -> bytes:
    """Export any ``torch.nn.Module`` with ``torch.onnx.export`` (the default, dynamo exporter).

    Parameters
    ----------
    module : torch.nn.Module
        Maps a float32 (batch, n_inputs) tensor to (batch, n_outputs) logits or predictions.
    n_inputs : int
    softmax : bool
        Append a softmax so the graph outputs probabilities (classifiers).

    Returns
    -------
    bytes
        Serialized ``ModelProto`` with one input and one output.
    """
    import torch  # only exporters of networks need torch

    wrapped = torch.nn.Sequential(module, torch.nn.Softmax(dim=-1)) if softmax else module
    modes = {m: m.training for m in wrapped.modules()}
    wrapped.eval()
    try:
        with warnings.catch_warnings():
            # torch's own tracing internals warn about their deprecated pytree API
            warnings.filterwarnings("ignore", message=".*LeafSpec", category=FutureWarning)
            program = torch.onnx.export(
                wrapped,
                (torch.zeros(2, n_inputs),),
                dynamo=True,
                input_names=["input"],
                output_names=["output"],
                dynamic_shapes=({0: torch.export.Dim("batch")},),
                optimize=True,
                verbose=False,
            )
    finally:
        for m, mode in modes.items():
            m.training = mode
    if program is None or program.model_proto is None:
        raise TypeError(f"torch.onnx.export could not export {type(module).__name__}")
    proto: onnx.ModelProto = program.model_proto
    return proto.SerializeToString()


def sklearn_to_onnx(
    model: Any,
    n_inputs: int,
    *,
    output_positions: Sequence[int] | None = None,
    n_outputs: int | None = None,
) -> bytes:
    """Convert a fitted scikit-learn model with skl2onnx, keeping one output.

    Classifiers keep the ``probabilities`` output (a plain tensor: ``zipmap`` off), regressors
    their prediction.  The graph is converted in float64 where skl2onnx can (as scikit-learn
    computes), between a cast of the float32 input and a cast of the output to float32.

    Parameters
    ----------
    model : fitted scikit-learn estimator or Pipeline
    n_inputs : int
        Width of the encoded input.
    output_positions : sequence of int, optional
        Column ``j`` of the model's probabilities becomes output column ``output_positions[j]``
        of ``n_outputs`` (the others are 0): for a classifier fitted on a subset of the
        declared classes.
    n_outputs : int, optional
        Required with ``output_positions``.

    Returns
    -------
    bytes
        Serialized ``ModelProto``: input ``input`` (batch, n_inputs) float32, output ``output``.

    Raises
    ------
    TypeError
        skl2onnx has no converter for ``model``.
    """
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType
    from sklearn.base import is_classifier
    from sklearn.pipeline import Pipeline

    if output_positions is not None and n_outputs is None:
        raise ValueError("output_positions needs n_outputs")
    final = model.steps[-1][1] if isinstance(model, Pipeline) else model
    classifier = is_classifier(final)
    options = {id(final): {"zipmap": False}} if classifier else None
    proto = None
    errors = []
    for tensor_type in (DoubleTensorType, FloatTensorType):
        try:
            proto = convert_sklearn(
                model,
                initial_types=[("converted_input", tensor_type([None, n_inputs]))],
                options=options,
            )
            break
        except Exception as exc:  # skl2onnx raises many types for unsupported models
            errors.append(f"{tensor_type.__name__}: {exc}")
    if proto is None:
        raise TypeError(f"skl2onnx cannot convert {type(model).__name__}: {'; '.join(errors)}")
    names = [o.name for o in proto.graph.output]
    if classifier:
        if "probabilities" not in names:
            raise TypeError(
                f"converted {type(model).__name__} has no probabilities output: {names}"
            )
        keep = "probabilities"
    else:
        if len(names) != 1:
            raise TypeError(f"converted regressor has {len(names)} outputs, expected 1: {names}")
        keep = names[0]
    pruned = Extractor(proto).extract_model(["converted_input"], [keep])
    _wrap_float32(pruned.graph, n_inputs, list(output_positions or []), n_outputs)
    pruned.graph.name = "pubsubml_sklearn"  # the converter's name holds a random uuid
    pruned.producer_name = "pubsubml"
    onnx.checker.check_model(pruned)
    return pruned.SerializeToString()


def _wrap_float32(
    graph: onnx.GraphProto, n_inputs: int, positions: list[int], n_outputs: int | None
) -> None:
    """Give a converted graph the float32 interface ``input`` → ``output``, in place.

    ``output = cast(converted) @ P`` with P[j, positions[j]] = 1 when ``positions`` is given.
    """
    converted = graph.output[0].name
    nodes = [helper.make_node("Cast", ["input"], ["converted_input"], to=TensorProto.FLOAT)]
    if graph.input[0].type.tensor_type.elem_type == TensorProto.DOUBLE:
        nodes[0] = helper.make_node("Cast", ["input"], ["converted_input"], to=TensorProto.DOUBLE)
    nodes.extend(graph.node)
    nodes.append(helper.make_node("Cast", [converted], ["output_float"], to=TensorProto.FLOAT))
    width = n_outputs
    if positions:
        assert n_outputs is not None
        scatter = np.zeros((len(positions), n_outputs), dtype=np.float32)
        scatter[np.arange(len(positions)), positions] = 1.0
        graph.initializer.append(numpy_helper.from_array(scatter, "output_scatter"))
        nodes.append(helper.make_node("MatMul", ["output_float", "output_scatter"], ["output"]))
    else:
        nodes.append(helper.make_node("Identity", ["output_float"], ["output"]))
        dims = graph.output[0].type.tensor_type.shape.dim
        width = dims[1].dim_value if len(dims) == 2 and dims[1].HasField("dim_value") else None
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.input[:]
    graph.input.append(helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, n_inputs]))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("output", TensorProto.FLOAT, [None, width]))


# ---- safety checks -----------------------------------------------------------------------
def _tensors_of(attr: onnx.AttributeProto) -> Iterator[TensorProto]:
    if attr.HasField("t"):
        yield attr.t
    yield from attr.tensors
    for sparse in ([attr.sparse_tensor] if attr.HasField("sparse_tensor") else []) + list(
        attr.sparse_tensors
    ):
        yield sparse.values
        yield sparse.indices


def _check_tensor(tensor: TensorProto, where: str) -> None:
    if tensor.data_location == TensorProto.EXTERNAL or len(tensor.external_data) > 0:
        location = next((e.value for e in tensor.external_data if e.key == "location"), "?")
        raise UntrustedArtifactError(
            f"ONNX tensor {tensor.name!r} ({where}) refers to external data at {location!r}; "
            "external data is never read"
        )


def _check_graph(root: onnx.GraphProto) -> None:
    """Walk the graph and every subgraph without recursion (nesting depth is attacker-chosen)."""
    stack: list[tuple[onnx.GraphProto, str]] = [(root, "main graph")]
    while stack:
        graph, where = stack.pop()
        for t in graph.initializer:
            _check_tensor(t, f"initializer of {where}")
        for st in graph.sparse_initializer:
            _check_tensor(st.values, f"sparse initializer of {where}")
            _check_tensor(st.indices, f"sparse initializer of {where}")
        for node in graph.node:
            if node.domain not in ALLOWED_DOMAINS:
                raise UntrustedArtifactError(
                    f"ONNX node {node.name or node.op_type!r} ({where}) uses operator domain "
                    f"{node.domain!r}; only standard domains {sorted(ALLOWED_DOMAINS)} are allowed"
                )
            for attr in node.attribute:
                for t in _tensors_of(attr):
                    _check_tensor(t, f"attribute {attr.name!r} of node {node.op_type} in {where}")
                subgraphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
                for g in subgraphs:
                    stack.append((g, f"subgraph {g.name!r} of node {node.op_type}"))


def _dims(value: onnx.ValueInfoProto) -> list[int | None]:
    tensor_type = value.type.tensor_type
    if not value.type.HasField("tensor_type") or tensor_type.elem_type != TensorProto.FLOAT:
        raise UntrustedArtifactError(f"ONNX value {value.name!r} is not a float32 tensor")
    return [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]


def _check_io(graph: onnx.GraphProto, n_inputs: int, n_outputs: int) -> None:
    init_names = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in init_names]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise UntrustedArtifactError(
            f"an ONNX model must have one input and one output, got {len(inputs)} and "
            f"{len(graph.output)}"
        )
    dims = _dims(inputs[0])
    if len(dims) != 2 or dims[1] != n_inputs:
        raise UntrustedArtifactError(
            f"ONNX input shape {dims} does not match the card's schema width {n_inputs}"
        )
    out_dims = _dims(graph.output[0])
    if len(out_dims) != 2 or out_dims[1] not in (None, n_outputs):
        raise UntrustedArtifactError(
            f"ONNX output shape {out_dims} does not match the card's {n_outputs} outputs"
        )


def check_onnx(data: bytes, *, n_inputs: int, n_outputs: int, max_bytes: int) -> onnx.ModelProto:
    """Parse untrusted bytes as ONNX and run every safety check.

    Parameters
    ----------
    data : bytes
    n_inputs : int
        Width the card's schema encodes to; the graph input must be (batch, n_inputs) float32.
    n_outputs : int
        Number of outputs the card declares.
    max_bytes : int

    Returns
    -------
    onnx.ModelProto

    Raises
    ------
    UntrustedArtifactError
        Not ONNX (a pickle or other payload is named), too large, external data, a non-standard
        operator domain in a node or an opset import, local functions, training information, an
        invalid graph, or inputs/outputs that disagree with the card.
    """
    reject_foreign_payload(data, expected="an ONNX model", max_bytes=max_bytes)
    model = onnx.ModelProto()
    try:
        model.ParseFromString(bytes(data))
    except Exception as exc:  # protobuf DecodeError and friends
        raise UntrustedArtifactError(f"weights are not a valid ONNX model: {exc}") from None
    if not model.HasField("graph") or not model.graph.node:
        raise UntrustedArtifactError("weights are not a valid ONNX model (no graph)")
    bad = sorted({o.domain for o in model.opset_import} - ALLOWED_DOMAINS)
    if bad:
        raise UntrustedArtifactError(f"ONNX model imports non-standard operator domains {bad}")
    if model.functions:
        raise UntrustedArtifactError(
            f"ONNX model defines {len(model.functions)} local functions; they are not accepted"
        )
    if model.training_info:
        raise UntrustedArtifactError("ONNX model carries training information; not accepted")
    _check_graph(model.graph)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx.checker.ValidationError and C++ errors
        raise UntrustedArtifactError(f"invalid ONNX model: {exc}") from None
    _check_io(model.graph, n_inputs, n_outputs)
    return model


# ---- runtime -----------------------------------------------------------------------------
class OnnxRunner:
    """An ONNX Runtime session on the CPU provider, without custom op libraries.

    One intra-op thread by default, sequential execution, no memory arena (many models are
    loaded at once), and the ONNX format only (never ORT's own flatbuffer format).

    Parameters
    ----------
    data : bytes
        A model that passed :func:`check_onnx`.
    n_inputs, n_outputs : int
    intra_op_threads : int, default=1
    """

    def __init__(self, data: bytes, *, n_inputs: int, n_outputs: int, intra_op_threads: int = 1):
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # No per-session memory arena: with many sessions loaded at once each arena would keep
        # its peak activations (benchmarks/many_models.py: less memory and faster runs).
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3
        options.add_session_config_entry("session.load_model_format", "ONNX")
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self._session = ort.InferenceSession(
                data, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own exception types
            raise UntrustedArtifactError(f"ONNX Runtime rejected the model: {exc}") from None
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name
        self._n_inputs = n_inputs
        self._n_outputs = n_outputs

    @property
    def n_inputs(self) -> int:
        """Width of the encoded input."""
        return self._n_inputs

    @property
    def n_outputs(self) -> int:
        """Number of outputs."""
        return self._n_outputs

    def run(self, Z: np.ndarray) -> np.ndarray:
        """Outputs (n, n_outputs) for the encoded float32 input ``Z`` (n, n_inputs).

        Raises
        ------
        UntrustedArtifactError
            The graph returned an output of another shape than the card declares.
        """
        (out,) = self._session.run(
            [self._output], {self._input: np.ascontiguousarray(Z, np.float32)}
        )
        result = np.asarray(out)
        if result.ndim == 1 and self._n_outputs == 1:
            result = result[:, None]
        if result.shape != (Z.shape[0], self._n_outputs):
            raise UntrustedArtifactError(
                f"ONNX model returned shape {result.shape}, expected {(Z.shape[0], self._n_outputs)}"
            )
        return result


def load_onnx(card: ModelCard, data: bytes, options: DecodeOptions) -> OnnxRunner:
    """Check ``data`` against ``card`` (:func:`check_onnx`) and open a session.

    Raises
    ------
    UntrustedArtifactError
        Any failed check.
    """
    n_inputs, n_outputs = card.input_schema.n_encoded, len(card.output)
    check_onnx(data, n_inputs=n_inputs, n_outputs=n_outputs, max_bytes=options.max_bytes)
    return OnnxRunner(
        data, n_inputs=n_inputs, n_outputs=n_outputs, intra_op_threads=options.intra_op_threads
    )
