"""ONNX: the universal weights format, and the safety checks an untrusted graph needs.

Any model type travels as ONNX and runs in ONNX Runtime without the publisher's code
(pubsub-ml.txt §4: subscribed models are black boxes); the exporters are in
:mod:`~pubsubml.artifacts.onnx_export` and :mod:`~pubsubml.artifacts.onnx_trees` (also importable
from here).

:func:`check_onnx` rejects what a stranger could abuse, namely tensors stored as external data (a
path such as ``../../etc/passwd`` would be read from the subscriber's disk), operators from domains
other than the standard ``""``/``ai.onnx``/``ai.onnx.ml`` (custom kernels), model-local
functions, training blocks, oversized payloads and inputs or outputs that do not match the card;
control flow (``Loop``, ``Scan``, ``If``: an iteration count of 10¹² hangs every subscriber's
``predict``) and operators that materialise a tensor whose size is data, not the input's
(``ConstantOfShape``, ``Range``; ``Expand``/``Tile`` to a constant size above
:data:`MAX_CONSTANT_ELEMENTS`: a 1.3 KB graph can ask for 2 GB), and graphs of more than
:data:`MAX_GRAPH_NODES` nodes (ONNX Runtime's session set-up grows about quadratically with the
node count: a 250 KB chain of 10⁴ ``Add`` nodes takes 75 s to load, 10³ nodes 0.6 s); then :class:`OnnxRunner` runs the
graph on the CPU provider only, with one intra-op thread by default, no custom op library and no
constant folding at load (nothing is computed before the first ``run``).  The registry and every
subscriber's loader apply the same checks.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, numpy_helper

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.codecs import DecodeOptions, reject_foreign_payload
from pubsubml.artifacts.onnx_export import mlp_to_onnx, sklearn_to_onnx, torch_to_onnx
from pubsubml.artifacts.onnx_trees import tree_ensemble_to_onnx
from pubsubml.errors import UntrustedArtifactError

__all__ = [
    "ALLOWED_DOMAINS",
    "FORBIDDEN_OPS",
    "MAX_CONSTANT_ELEMENTS",
    "MAX_GRAPH_NODES",
    "OnnxRunner",
    "check_onnx",
    "load_onnx",
    "mlp_to_onnx",
    "sklearn_to_onnx",
    "torch_to_onnx",
    "tree_ensemble_to_onnx",
]

ALLOWED_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})
#: Operators refused whatever their inputs: control flow and data-sized tensor makers.
FORBIDDEN_OPS = frozenset({"Loop", "Scan", "If", "SequenceMap", "ConstantOfShape", "Range"})
#: Largest constant target size of an ``Expand`` or ``Tile`` (elements).
MAX_CONSTANT_ELEMENTS = 1 << 24
#: Most nodes a graph may hold, subgraphs included.  The models pubsubml exports take a few to a
#: few hundred (an MLP: about 2 per layer; a tree ensemble: one node per model); loading 2,048
#: chained nodes takes about 2.5 s on one core.
MAX_GRAPH_NODES = 2048


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


def _constant_size(node: onnx.NodeProto, constants: dict[str, TensorProto]) -> int | None:
    """Elements an ``Expand`` asks for, or the repeat factor of a ``Tile``, when constant."""
    if len(node.input) < 2 or node.input[1] not in constants:
        return None
    values = numpy_helper.to_array(constants[node.input[1]]).astype(np.float64).ravel()
    if values.size > 64 or np.any(values < 0):
        return MAX_CONSTANT_ELEMENTS + 1
    return int(np.prod(values)) if values.size else 1


def _check_graph(root: onnx.GraphProto) -> None:
    """Walk the graph and every subgraph without recursion (nesting depth is attacker-chosen)."""
    stack: list[tuple[onnx.GraphProto, str]] = [(root, "main graph")]
    forbidden: str | None = None  # reported after the walk: external data is named first
    n_nodes = 0
    while stack:
        graph, where = stack.pop()
        n_nodes += len(graph.node)
        if n_nodes > MAX_GRAPH_NODES:
            raise UntrustedArtifactError(
                f"the ONNX graph has more than {MAX_GRAPH_NODES} nodes; larger graphs are refused "
                "(loading time grows about quadratically with the node count)"
            )
        constants = {t.name: t for t in graph.initializer}
        for node in graph.node:
            if node.op_type == "Constant":
                for attr in node.attribute:
                    if attr.HasField("t") and node.output:
                        constants[node.output[0]] = attr.t
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
            if node.op_type in FORBIDDEN_OPS and forbidden is None:
                forbidden = f"{node.op_type} ({where})"
            if node.op_type in ("Expand", "Tile"):
                size = _constant_size(node, constants)
                if size is not None and size > MAX_CONSTANT_ELEMENTS:
                    raise UntrustedArtifactError(
                        f"ONNX {node.op_type} ({where}) asks for {size} elements from a constant, "
                        f"above the {MAX_CONSTANT_ELEMENTS} accepted"
                    )
            for attr in node.attribute:
                for t in _tensors_of(attr):
                    _check_tensor(t, f"attribute {attr.name!r} of node {node.op_type} in {where}")
                subgraphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
                for g in subgraphs:
                    stack.append((g, f"subgraph {g.name!r} of node {node.op_type}"))
    if forbidden is not None:
        raise UntrustedArtifactError(
            f"ONNX operator {forbidden} is not accepted: control flow and tensors sized by data "
            "can make a model hang or exhaust memory"
        )


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
            # No constant folding at load: a constant subgraph is computed only when the model
            # runs, on data, never while loading an untrusted model.
            self._session = ort.InferenceSession(
                data,
                sess_options=options,
                providers=["CPUExecutionProvider"],
                disabled_optimizers=["ConstantFolding"],
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
