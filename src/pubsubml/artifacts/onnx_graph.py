"""Building ONNX graphs in place: the opsets, large attributes, the output scatter.

What the exporters of :mod:`~pubsubml.artifacts.onnx_export` and
:mod:`~pubsubml.artifacts.onnx_trees` share.  Large attributes are appended to a node's own
message, never built separately and copied (a forest's node holds 10⁵–10⁶ values).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

__all__ = ["ML_OPSET", "OPSET", "add_doubles", "add_ints", "add_output_scatter"]

#: The standard ONNX opset of every exported graph.
OPSET = 18
#: ``ai.onnx.ml`` opset of the tree ensembles: version 3 stores thresholds and leaf weights as
#: double tensors (``TreeEnsembleClassifier`` is deprecated from version 5 on).
ML_OPSET = 3


def add_ints(node: onnx.NodeProto, name: str, values: np.ndarray) -> None:
    """Append an INTS attribute to ``node`` in place (no copy of a large message)."""
    attr = node.attribute.add()
    attr.name, attr.type = name, onnx.AttributeProto.INTS
    attr.ints.extend(np.asarray(values, dtype=np.int64).tolist())


def add_doubles(node: onnx.NodeProto, name: str, values: np.ndarray) -> None:
    """Append a 1-D double TENSOR attribute to ``node`` in place (little-endian raw data)."""
    attr = node.attribute.add()
    attr.name, attr.type = name, onnx.AttributeProto.TENSOR
    attr.t.name, attr.t.data_type = name, TensorProto.DOUBLE
    attr.t.dims.append(len(values))
    attr.t.raw_data = np.ascontiguousarray(values, dtype="<f8").tobytes()


def add_output_scatter(graph: onnx.GraphProto, positions: Sequence[int], n_outputs: int) -> None:
    """Add the initializer ``output_scatter``: P of shape (len(positions), n_outputs) with
    P[j, positions[j]] = 1, so that ``x @ P`` puts column ``j`` of ``x`` at ``positions[j]``."""
    scatter = np.zeros((len(positions), n_outputs), dtype=np.float32)
    scatter[np.arange(len(positions)), positions] = 1.0
    graph.initializer.append(numpy_helper.from_array(scatter, "output_scatter"))
