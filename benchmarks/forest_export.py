"""Exporting DP random forests to ONNX: :func:`pubsubml.artifacts.export_model` against skl2onnx.

A publisher that trains a DP random forest (pubsub-ml.txt §3.2, reference [36]; diffprivlib's
forest of random trees) publishes it as ONNX (Algorithm 3 line 2).  diffprivlib grows every tree
to its full depth, so a forest of 100 trees of depth 10 has 100 · (2¹¹ − 1) = 204,700 nodes.  The
forests are trained untimed, then, per setting, the script times (median of ``--repeats``):

* ``export_model``: the whole publisher's step — the privacy record with ε recomputed, the ONNX
  conversion, the Ed25519 signature and the self-check that loads the artifact as a subscriber
  would (:meth:`Artifact.open`);
* ``sklearn_to_onnx``: the conversion alone, as ``export_model`` runs it;
* reference: skl2onnx's own ``convert_sklearn`` on the equivalent scikit-learn forest (the same
  trees, :func:`~pubsubml.learners.to_sklearn_base`), with a float input and ``zipmap`` off, the
  way skl2onnx converts a forest by default;
* reference, double: the same with a double input, the conversion ``export_model`` ran before it
  had its own tree-ensemble writer (skl2onnx then searches a float switch point per threshold).

Every graph is run with ONNX Runtime on held-out encoded rows and compared with the forest's
``predict_proba`` (max |Δp|; rows placed exactly on split thresholds included).  The ratio is
the reference's wall time over ``export_model``'s, measured in the same run.  Wall times, with the
process CPU time in parentheses; the machine is shared, so the 1-minute load average is printed
before and after.

Run: ``.venv/bin/python benchmarks/forest_export.py`` (``--trees``, ``--depth``, ``--classes``,
``--features``, ``--rows``, ``--repeats``).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort
import pandas as pd
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from skl2onnx import convert_sklearn
from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

from pubsubml.artifacts import export_model, generate_signing_key
from pubsubml.artifacts.onnx_export import sklearn_to_onnx
from pubsubml.learners import DPRandomForestClassifier, to_sklearn_base
from pubsubml.schema import FeatureSchema


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[Any, float, float]:
    """``fn()``'s last result and the medians of its wall and CPU seconds."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return out, statistics.median(walls), statistics.median(cpus)


def _run(graph: bytes, Z: np.ndarray, output: str) -> np.ndarray:
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    (out,) = session.run([output], {session.get_inputs()[0].name: Z})
    return np.asarray(out, dtype=np.float64)


def _forest(
    n_classes: int, n_features: int, rows: int, trees: int, depth: int, seed: int
) -> tuple[DPRandomForestClassifier, FeatureSchema]:
    schema = FeatureSchema.numeric([f"x{i}" for i in range(n_features)])
    rng = np.random.default_rng(seed)
    values = rng.random((rows, n_features))
    X = pd.DataFrame(values, columns=schema.names)
    y = np.minimum((values[:, 0] + values[:, 1]) * n_classes / 2, n_classes - 1).astype(int)
    forest = DPRandomForestClassifier(
        schema=schema,
        classes=list(range(n_classes)),
        epsilon=1.0,
        n_estimators=trees,
        max_depth=depth,
        random_state=seed,
    )
    return forest.fit(X, y), schema


def _test_rows(model: Any, n_features: int, seed: int) -> np.ndarray:
    """Random encoded rows, plus rows whose every value is a split threshold in float32 and the
    float32 values just above and below it (where a wrong comparison would show)."""
    rng = np.random.default_rng(seed + 1)
    Z: list[np.ndarray] = [rng.random((500, n_features))]
    thresholds = np.concatenate(
        [t.tree_.threshold[t.tree_.feature >= 0] for t in model.estimators_]
    )
    picked = rng.choice(thresholds, size=(300, n_features)).astype(np.float32)
    Z += [picked, np.nextafter(picked, np.float32(2)), np.nextafter(picked, np.float32(-1))]
    return np.clip(np.concatenate(Z), 0.0, 1.0).astype(np.float32)


def _measure(n_classes: int, args: argparse.Namespace, key: Ed25519PrivateKey) -> None:
    """Train one forest (untimed), time the four conversions and print their rows."""
    forest, schema = _forest(
        n_classes, args.features, args.rows, args.trees, args.depth, seed=n_classes
    )
    model = to_sklearn_base(forest.estimator_)
    n_in = schema.n_encoded
    nodes = sum(int(t.tree_.node_count) for t in model.estimators_)
    Z = _test_rows(model, n_in, seed=n_classes)
    expected = forest.predict_proba(pd.DataFrame(Z, columns=schema.names))

    def reference(tensor: Any) -> bytes:
        proto = convert_sklearn(
            model,
            initial_types=[("input", tensor([None, n_in]))],
            options={id(model): {"zipmap": False}},
        )
        return bytes(proto.SerializeToString())

    rows: list[tuple[str, bytes, str, float, float]] = []
    artifact, wall, cpu = _timed(
        lambda: export_model(forest, publisher="p", signing_key=key), args.repeats
    )
    rows.append(("`export_model`", artifact.weights, "output", wall, cpu))
    graph, wall, cpu = _timed(
        lambda: sklearn_to_onnx(model, n_in, n_outputs=n_classes), args.repeats
    )
    rows.append(("`sklearn_to_onnx` (the conversion alone)", graph, "output", wall, cpu))
    graph, wall, cpu = _timed(lambda: reference(FloatTensorType), args.repeats)
    rows.append(
        ("skl2onnx `convert_sklearn`, float (reference)", graph, "probabilities", wall, cpu)
    )
    graph, wall, cpu = _timed(lambda: reference(DoubleTensorType), args.repeats)
    rows.append(("skl2onnx `convert_sklearn`, double", graph, "probabilities", wall, cpu))

    reference_wall = rows[2][3]
    for name, data, output, wall, cpu in rows:
        inputs = Z.astype(np.float64) if "double" in name else Z
        diff = float(np.max(np.abs(_run(data, inputs, output) - expected)))
        print(
            f"| {n_classes} | {nodes:,} | {name} | {wall:.3f} ({cpu:.3f}) "
            f"| {len(data) / 1e6:.2f} | {diff:.1e} | {reference_wall / wall:.2f}x |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--classes", type=int, nargs="+", default=[2, 5])
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}"
    )
    print(f"load average (1 min) before: {os.getloadavg()[0]:.2f}")
    print()
    print(
        "| classes | nodes | method | wall (CPU) s | ONNX MB | max abs diff p "
        "| reference / method (wall) |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    key = generate_signing_key()
    for n_classes in args.classes:
        _measure(n_classes, args, key)
    print()
    print(f"load average (1 min) after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
