"""ONNX export of scikit-learn's trees and forests, written directly from the fitted arrays.

:func:`tree_ensemble_to_onnx` writes one ``TreeEnsembleClassifier`` (or ``TreeEnsembleRegressor``)
node from the trees' arrays with numpy: thresholds and leaf values in double precision, instead
of skl2onnx's per-node Python loop (and its per-threshold float search), so a forest of 100 full
trees of depth 10 (204,700 nodes) converts in well under a second instead of several
(``benchmarks/forest_export.py``; figures in ``benchmarks/RESULTS.md``).
:func:`~pubsubml.artifacts.onnx_export.sklearn_to_onnx` sends these models here.

References
----------
pubsub-ml.txt §3.2 (DP random forests [36] among the publishers' model types).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from pubsubml.artifacts.onnx_graph import (
    ML_OPSET,
    OPSET,
    add_doubles,
    add_ints,
    add_output_scatter,
)

__all__ = ["is_tree_ensemble", "tree_ensemble_to_onnx"]


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


def is_tree_ensemble(model: Any) -> bool:
    """Whether :func:`tree_ensemble_to_onnx` writes ``model`` (a fitted one-output scikit-learn
    tree or forest, classifier or regressor, of exactly those classes)."""
    return _is_tree_classifier(model) or _is_tree_regressor(model)


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
    regressor = _checked_kind(model, output_positions, n_outputs)
    trees = list(getattr(model, "estimators_", [model]))
    n_classes = 1 if regressor else len(model.classes_)
    a = _node_arrays(trees, n_classes, n_inputs, regressor)
    # The graph is built in place: a node of 10⁵–10⁶ attribute values is never copied.
    proto = onnx.ModelProto(producer_name="pubsubml")
    graph = proto.graph
    graph.name = "pubsubml_trees"
    graph.node.append(
        helper.make_node("Cast", ["input"], ["converted_input"], to=TensorProto.DOUBLE)
    )
    _add_ensemble(graph, a, n_classes, regressor)
    _add_interface(graph, n_inputs, n_classes, output_positions, n_outputs)
    proto.opset_import.extend(
        [helper.make_opsetid("", OPSET), helper.make_opsetid("ai.onnx.ml", ML_OPSET)]
    )
    proto.ir_version = helper.find_min_ir_version_for(list(proto.opset_import))
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


def _add_interface(
    graph: onnx.GraphProto,
    n_inputs: int,
    n_classes: int,
    output_positions: Sequence[int] | None,
    n_outputs: int | None,
) -> None:
    """``probabilities`` → ``output`` (scattered to ``output_positions`` when given), and the
    graph's float32 input and output declarations."""
    width = n_classes
    if output_positions:
        assert n_outputs is not None
        add_output_scatter(graph, list(output_positions), n_outputs)
        graph.node.append(
            helper.make_node("MatMul", ["probabilities", "output_scatter"], ["output"])
        )
        width = n_outputs
    else:
        graph.node.append(helper.make_node("Identity", ["probabilities"], ["output"]))
    graph.input.append(helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, n_inputs]))
    graph.output.append(helper.make_tensor_value_info("output", TensorProto.FLOAT, [None, width]))


def _checked_kind(
    model: Any, output_positions: Sequence[int] | None, n_outputs: int | None
) -> bool:
    """Whether ``model`` is a regressor (else a classifier); raises on anything else."""
    regressor = _is_tree_regressor(model)
    if not (regressor and hasattr(model, "n_outputs_")) and not (
        _is_tree_classifier(model) and hasattr(model, "classes_")
    ):
        raise TypeError(
            f"expected a fitted one-output scikit-learn tree or forest, got {type(model).__name__}"
        )
    if output_positions is not None and n_outputs is None:
        raise ValueError("output_positions needs n_outputs")
    return regressor


def _node_arrays(
    trees: list[Any], n_classes: int, n_inputs: int, regressor: bool
) -> dict[str, np.ndarray]:
    """The ensemble's attributes as flat arrays over all trees (:data:`_TREE_ARRAYS`)."""
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
        values = _leaf_values(tree, leaf, n_classes, regressor) / len(trees)
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
    return {k: np.concatenate(v) for k, v in columns.items()}


def _leaf_values(tree: Any, leaf: np.ndarray, n_classes: int, regressor: bool) -> np.ndarray:
    """Every leaf's value (regressor) or class distribution (classifier), shape (leaves, k)."""
    values = np.asarray(tree.value[:, 0, :n_classes], dtype=np.float64)[leaf]
    if not regressor:  # a leaf's class distribution (scikit-learn >= 1.4 stores fractions)
        totals = values.sum(axis=1, keepdims=True)
        values = values / np.where(totals == 0.0, 1.0, totals)
    return values


def _add_ensemble(
    graph: onnx.GraphProto, a: dict[str, np.ndarray], n_classes: int, regressor: bool
) -> None:
    """Append the ``TreeEnsembleClassifier``/``Regressor`` node, ``converted_input`` →
    ``probabilities``, with the arrays ``a`` as its attributes."""
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
    add_ints(ensemble, "nodes_treeids", a["tree"])
    add_ints(ensemble, "nodes_nodeids", a["node"])
    add_ints(ensemble, "nodes_featureids", a["feature"])
    modes = ensemble.attribute.add()
    modes.name, modes.type = "nodes_modes", onnx.AttributeProto.STRINGS
    modes.strings.extend(np.where(a["leaf"], b"LEAF", b"BRANCH_LEQ").tolist())
    add_doubles(ensemble, "nodes_values_as_tensor", a["threshold"])
    add_ints(ensemble, "nodes_truenodeids", a["true"])
    add_ints(ensemble, "nodes_falsenodeids", a["false"])
    prefix = "target" if regressor else "class"
    add_ints(ensemble, f"{prefix}_treeids", a["class_tree"])
    add_ints(ensemble, f"{prefix}_nodeids", a["class_node"])
    add_ints(ensemble, f"{prefix}_ids", a["class_id"])
    add_doubles(ensemble, f"{prefix}_weights_as_tensor", a["class_weight"])


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
