"""Exporters to ONNX: fully connected networks, any torch network, scikit-learn models.

Every exported graph has one float32 input ``input`` of the schema's encoded width and one output
``output``: probabilities (classification) or predictions (regression), so subscribers treat all
published models alike (pubsub-ml.txt §4: the models M_i are black boxes).

:func:`mlp_to_onnx` writes a fully connected network directly as Gemm + activation nodes (exact,
deterministic bytes, no tracing); :func:`torch_to_onnx` uses ``torch.onnx.export`` (its default
dynamo exporter) for any other network; :func:`sklearn_to_onnx` uses skl2onnx, except for
scikit-learn's trees and forests (the DP random forest of pubsub-ml.txt §3.2 among them), which
:func:`~pubsubml.artifacts.onnx_trees.tree_ensemble_to_onnx` writes directly from the fitted
trees' arrays.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.utils import Extractor

from pubsubml.artifacts.onnx_graph import OPSET, add_output_scatter
from pubsubml.artifacts.onnx_trees import is_tree_ensemble, tree_ensemble_to_onnx

__all__ = ["mlp_to_onnx", "sklearn_to_onnx", "torch_to_onnx"]

_ACTIVATION_OPS = {"tanh": "Tanh", "relu": "Relu", "sigmoid": "Sigmoid"}


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
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="pubsubml"
    )
    model.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", OPSET)])
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

    Notes
    -----
    scikit-learn's random forests, extra trees and decision trees, classifiers and regressors
    (exactly these classes, one output) go to :func:`~pubsubml.artifacts.onnx_trees.tree_ensemble_to_onnx` instead of skl2onnx.
    """
    if output_positions is not None and n_outputs is None:
        raise ValueError("output_positions needs n_outputs")
    if is_tree_ensemble(model):
        return tree_ensemble_to_onnx(
            model, n_inputs, output_positions=output_positions, n_outputs=n_outputs
        )
    from sklearn.base import is_classifier
    from sklearn.pipeline import Pipeline

    final = model.steps[-1][1] if isinstance(model, Pipeline) else model
    classifier = is_classifier(final)
    options = {id(final): {"zipmap": False}} if classifier else None
    proto = _convert(model, n_inputs, options)
    keep = _kept_output(proto, model, classifier)
    pruned = Extractor(proto).extract_model(["converted_input"], [keep])
    _wrap_float32(pruned.graph, n_inputs, list(output_positions or []), n_outputs)
    pruned.graph.name = "pubsubml_sklearn"  # the converter's name holds a random uuid
    pruned.producer_name = "pubsubml"
    onnx.checker.check_model(pruned)
    return pruned.SerializeToString()


def _convert(model: Any, n_inputs: int, options: dict[int, Any] | None) -> onnx.ModelProto:
    """skl2onnx's graph of ``model`` on a double input, or a float one where double fails."""
    from skl2onnx import convert_sklearn  # loads in about 0.2 s: only where it is needed
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    errors = []
    for tensor_type in (DoubleTensorType, FloatTensorType):
        try:
            proto: onnx.ModelProto = convert_sklearn(
                model,
                initial_types=[("converted_input", tensor_type([None, n_inputs]))],
                options=options,
            )
            return proto
        except Exception as exc:  # skl2onnx raises many types for unsupported models
            errors.append(f"{tensor_type.__name__}: {exc}")
    raise TypeError(f"skl2onnx cannot convert {type(model).__name__}: {'; '.join(errors)}")


def _kept_output(proto: onnx.ModelProto, model: Any, classifier: bool) -> str:
    """The converted graph's output to keep: a classifier's probabilities, a regressor's one."""
    names = [o.name for o in proto.graph.output]
    if classifier:
        if "probabilities" not in names:
            raise TypeError(
                f"converted {type(model).__name__} has no probabilities output: {names}"
            )
        return "probabilities"
    if len(names) != 1:
        raise TypeError(f"converted regressor has {len(names)} outputs, expected 1: {names}")
    return names[0]


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
        add_output_scatter(graph, positions, n_outputs)
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
