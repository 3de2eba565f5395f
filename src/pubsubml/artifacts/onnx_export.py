"""Exporters to ONNX: fully connected networks, any torch network, scikit-learn models.

Every exported graph has one float32 input ``input`` of the schema's encoded width and one output
``output``: probabilities (classification) or predictions (regression), so subscribers treat all
published models alike (pubsub-ml.txt §4: the models M_i are black boxes).

:func:`mlp_to_onnx` writes a fully connected network directly as Gemm + activation nodes (exact,
deterministic bytes, no tracing); :func:`torch_to_onnx` uses ``torch.onnx.export`` (its default
dynamo exporter) for any other network; :func:`sklearn_to_onnx` uses skl2onnx, except for
scikit-learn's tree and forest classifiers (the DP random forest of pubsub-ml.txt §3.2 among
them), which :func:`tree_ensemble_to_onnx` writes directly from the fitted trees' arrays: one
``TreeEnsembleClassifier`` node, thresholds and leaf probabilities in double precision, built
with numpy instead of skl2onnx's per-node Python loop (and its per-threshold float search), so a
forest of 100 full trees of depth 10 (204,700 nodes) converts in well under a second instead of
several (``benchmarks/forest_export.py``; figures in ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.utils import Extractor

__all__ = ["mlp_to_onnx", "sklearn_to_onnx", "torch_to_onnx", "tree_ensemble_to_onnx"]

_OPSET = 18
#: ``ai.onnx.ml`` opset of the tree ensembles: version 3 stores thresholds and leaf weights as
#: double tensors (``TreeEnsembleClassifier`` is deprecated from version 5 on).
_ML_OPSET = 3
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

    Notes
    -----
    scikit-learn's random forests, extra trees and decision trees, classifiers and regressors
    (exactly these classes, one output) go to :func:`tree_ensemble_to_onnx` instead of skl2onnx.
    """
    if output_positions is not None and n_outputs is None:
        raise ValueError("output_positions needs n_outputs")
    if _is_tree_classifier(model) or _is_tree_regressor(model):
        return tree_ensemble_to_onnx(
            model, n_inputs, output_positions=output_positions, n_outputs=n_outputs
        )
    from skl2onnx import convert_sklearn  # loads in about 0.2 s: only where it is needed
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType
    from sklearn.base import is_classifier
    from sklearn.pipeline import Pipeline

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


def _tree_classes() -> tuple[type, ...]:
    from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier, ExtraTreeClassifier

    return (
        RandomForestClassifier,
        ExtraTreesClassifier,
        DecisionTreeClassifier,
        ExtraTreeClassifier,
    )


def _tree_regressors() -> tuple[type, ...]:
    from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor
    from sklearn.tree import DecisionTreeRegressor, ExtraTreeRegressor

    return (RandomForestRegressor, ExtraTreesRegressor, DecisionTreeRegressor, ExtraTreeRegressor)


def _is_tree_classifier(model: Any) -> bool:
    """A fitted scikit-learn tree or forest classifier of one output (exact classes only: a
    subclass could predict otherwise)."""
    return type(model) in _tree_classes() and getattr(model, "n_outputs_", None) == 1


def _is_tree_regressor(model: Any) -> bool:
    """A fitted scikit-learn tree or forest regressor of one output (exact classes only)."""
    return type(model) in _tree_regressors() and getattr(model, "n_outputs_", None) == 1


def _add_ints(node: onnx.NodeProto, name: str, values: np.ndarray) -> None:
    """Append an INTS attribute to ``node`` in place (no copy of a large message)."""
    attr = node.attribute.add()
    attr.name, attr.type = name, onnx.AttributeProto.INTS
    attr.ints.extend(np.asarray(values, dtype=np.int64).tolist())


def _add_doubles(node: onnx.NodeProto, name: str, values: np.ndarray) -> None:
    """Append a 1-D double TENSOR attribute to ``node`` in place (little-endian raw data)."""
    attr = node.attribute.add()
    attr.name, attr.type = name, onnx.AttributeProto.TENSOR
    attr.t.name, attr.t.data_type = name, TensorProto.DOUBLE
    attr.t.dims.append(len(values))
    attr.t.raw_data = np.ascontiguousarray(values, dtype="<f8").tobytes()


def tree_ensemble_to_onnx(
    model: Any,
    n_inputs: int,
    *,
    output_positions: Sequence[int] | None = None,
    n_outputs: int | None = None,
) -> bytes:
    """ONNX graph of a fitted scikit-learn tree or forest, written from its arrays.

    One ``TreeEnsembleClassifier`` (``ai.onnx.ml`` opset 3) on the input cast to double: every
    split is ``x ≤ threshold`` with scikit-learn's double threshold, and every leaf adds its
    class distribution (the leaf's values normalised to sum 1, as ``predict_proba`` does; a leaf
    of zeros adds zeros) divided by the number of trees, so the graph computes the forest's
    ``predict_proba`` — the mean of its trees' — up to the float32 output.  The input is float32,
    so the split decisions are exactly scikit-learn's, which compares float32 features with the
    same double thresholds.  Every leaf carries a weight for every class, so two classes are
    computed like more (no "binary" shortcut).  A regressor is one ``TreeEnsembleRegressor``
    whose leaves add their value divided by the number of trees (the forest's mean), with one
    output column.

    Parameters
    ----------
    model : RandomForest, ExtraTrees, DecisionTree or ExtraTree, Classifier or Regressor
        Fitted, with one output (diffprivlib's forest after
        :func:`~pubsubml.learners.to_sklearn_base`).
    n_inputs : int
        Width of the encoded input; every split feature must be below it.
    output_positions, n_outputs : optional
        As :func:`sklearn_to_onnx`: column ``j`` of the probabilities becomes output column
        ``output_positions[j]`` of ``n_outputs``.

    Returns
    -------
    bytes
        Serialized ``ModelProto``: input ``input`` (batch, n_inputs) float32, output ``output``
        (batch, n_classes) float32 of probabilities in ``model.classes_`` order, or (batch, 1)
        of predictions for a regressor.

    Raises
    ------
    TypeError
        ``model`` is not one of those classes, unfitted, or has several outputs.
    ValueError
        A split on a feature ``≥ n_inputs``, or ``output_positions`` without ``n_outputs``.

    References
    ----------
    pubsub-ml.txt §3.2 (DP random forests [36] among the publishers' model types) and
    Algorithm 3 line 2 (publishing); the ONNX-ML ``TreeEnsembleClassifier`` operator.

    Examples
    --------
    >>> import onnxruntime as ort
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> Z = np.random.default_rng(0).random((50, 3)).astype(np.float32)
    >>> forest = RandomForestClassifier(n_estimators=5, random_state=0).fit(Z, Z[:, 0] > 0.5)
    >>> session = ort.InferenceSession(tree_ensemble_to_onnx(forest, 3))
    >>> bool(np.allclose(session.run(["output"], {"input": Z})[0], forest.predict_proba(Z)))
    True
    """
    regressor = _is_tree_regressor(model)
    if not (regressor and hasattr(model, "n_outputs_")) and not (
        _is_tree_classifier(model) and hasattr(model, "classes_")
    ):
        raise TypeError(
            f"expected a fitted one-output scikit-learn tree or forest, got {type(model).__name__}"
        )
    if output_positions is not None and n_outputs is None:
        raise ValueError("output_positions needs n_outputs")
    trees = list(getattr(model, "estimators_", [model]))
    n_classes = 1 if regressor else len(model.classes_)
    columns: dict[str, list[np.ndarray]] = {k: [] for k in _TREE_ARRAYS}
    for tree_id, estimator in enumerate(trees):
        tree = estimator.tree_
        n = int(tree.node_count)
        node = np.arange(n, dtype=np.int64)
        leaf = tree.children_left < 0
        feature = np.where(leaf, 0, tree.feature).astype(np.int64)
        if feature.size and int(feature.max()) >= n_inputs:
            raise ValueError(
                f"tree {tree_id} splits on feature {int(feature.max())}; the input has "
                f"{n_inputs} columns"
            )
        values = np.asarray(tree.value[:, 0, :n_classes], dtype=np.float64)[leaf]
        if not regressor:  # a leaf's class distribution (scikit-learn >= 1.4 stores fractions)
            totals = values.sum(axis=1, keepdims=True)
            values = values / np.where(totals == 0.0, 1.0, totals)
        values = values / len(trees)
        leaves = node[leaf]
        columns["tree"].append(np.full(n, tree_id, dtype=np.int64))
        columns["node"].append(node)
        columns["feature"].append(feature)
        columns["leaf"].append(leaf)
        columns["threshold"].append(np.where(leaf, 0.0, tree.threshold))
        columns["true"].append(np.where(leaf, 0, tree.children_left).astype(np.int64))
        columns["false"].append(np.where(leaf, 0, tree.children_right).astype(np.int64))
        columns["class_tree"].append(np.full(leaves.size * n_classes, tree_id, dtype=np.int64))
        columns["class_node"].append(np.repeat(leaves, n_classes))
        columns["class_id"].append(np.tile(np.arange(n_classes, dtype=np.int64), leaves.size))
        columns["class_weight"].append(values.ravel())
    a = {k: np.concatenate(v) for k, v in columns.items()}
    # The graph is built in place: a node of 10⁵–10⁶ attribute values is never copied.
    proto = onnx.ModelProto(producer_name="pubsubml")
    graph = proto.graph
    graph.name = "pubsubml_trees"
    graph.node.append(
        helper.make_node("Cast", ["input"], ["converted_input"], to=TensorProto.DOUBLE)
    )
    ensemble = graph.node.add()
    ensemble.domain = "ai.onnx.ml"
    ensemble.input.append("converted_input")
    ensemble.attribute.append(helper.make_attribute("post_transform", "NONE"))
    if regressor:
        ensemble.op_type = "TreeEnsembleRegressor"
        ensemble.output.append("probabilities")  # the predictions: one column
        ensemble.attribute.extend(
            [
                helper.make_attribute("n_targets", 1),
                helper.make_attribute("aggregate_function", "SUM"),
            ]
        )
    else:
        ensemble.op_type = "TreeEnsembleClassifier"
        ensemble.output.extend(["label", "probabilities"])
        ensemble.attribute.append(
            helper.make_attribute("classlabels_int64s", list(range(n_classes)))
        )
    _add_ints(ensemble, "nodes_treeids", a["tree"])
    _add_ints(ensemble, "nodes_nodeids", a["node"])
    _add_ints(ensemble, "nodes_featureids", a["feature"])
    modes = ensemble.attribute.add()
    modes.name, modes.type = "nodes_modes", onnx.AttributeProto.STRINGS
    modes.strings.extend(np.where(a["leaf"], b"LEAF", b"BRANCH_LEQ").tolist())
    _add_doubles(ensemble, "nodes_values_as_tensor", a["threshold"])
    _add_ints(ensemble, "nodes_truenodeids", a["true"])
    _add_ints(ensemble, "nodes_falsenodeids", a["false"])
    prefix = "target" if regressor else "class"
    _add_ints(ensemble, f"{prefix}_treeids", a["class_tree"])
    _add_ints(ensemble, f"{prefix}_nodeids", a["class_node"])
    _add_ints(ensemble, f"{prefix}_ids", a["class_id"])
    _add_doubles(ensemble, f"{prefix}_weights_as_tensor", a["class_weight"])
    width = n_classes
    if output_positions:
        assert n_outputs is not None
        positions = list(output_positions)
        scatter = np.zeros((len(positions), n_outputs), dtype=np.float32)
        scatter[np.arange(len(positions)), positions] = 1.0
        graph.initializer.append(numpy_helper.from_array(scatter, "output_scatter"))
        graph.node.append(
            helper.make_node("MatMul", ["probabilities", "output_scatter"], ["output"])
        )
        width = n_outputs
    else:
        graph.node.append(helper.make_node("Identity", ["probabilities"], ["output"]))
    graph.input.append(helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, n_inputs]))
    graph.output.append(helper.make_tensor_value_info("output", TensorProto.FLOAT, [None, width]))
    proto.opset_import.extend(
        [helper.make_opsetid("", _OPSET), helper.make_opsetid("ai.onnx.ml", _ML_OPSET)]
    )
    proto.ir_version = helper.find_min_ir_version_for(list(proto.opset_import))
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


_TREE_ARRAYS = (
    "tree",
    "node",
    "feature",
    "leaf",
    "threshold",
    "true",
    "false",
    "class_tree",
    "class_node",
    "class_id",
    "class_weight",
)


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
