"""Tests of pubsubml.artifacts.onnx_graph: attributes built in place and the output scatter."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from pubsubml.artifacts.onnx_graph import add_doubles, add_ints, add_output_scatter


def test_attributes_are_appended_with_their_values() -> None:
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["y"], domain="ai.onnx.ml")

    add_ints(node, "nodes_nodeids", np.array([0, 1, 2]))
    add_doubles(node, "nodes_values_as_tensor", np.array([0.5, 1.0 / 3.0]))

    ints, doubles = node.attribute
    assert ints.name == "nodes_nodeids" and ints.type == onnx.AttributeProto.INTS
    assert list(ints.ints) == [0, 1, 2]
    assert doubles.type == onnx.AttributeProto.TENSOR
    np.testing.assert_array_equal(numpy_helper.to_array(doubles.t), [0.5, 1.0 / 3.0])


def test_output_scatter_puts_each_column_at_its_position() -> None:
    graph = onnx.GraphProto()

    add_output_scatter(graph, [2, 0], 3)

    (init,) = graph.initializer
    assert init.name == "output_scatter"
    P = numpy_helper.to_array(init)
    np.testing.assert_array_equal(np.array([[1.0, 2.0]], dtype=np.float32) @ P, [[2.0, 0.0, 1.0]])
