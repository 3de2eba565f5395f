"""Tests of pubsubml.artifacts.onnx_trees: scikit-learn trees and forests written as ONNX."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sklearn.base import clone
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression
from sklearn.tree import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreeClassifier,
    ExtraTreeRegressor,
)

from pubsubml.artifacts import export_model
from pubsubml.artifacts.onnx_export import sklearn_to_onnx
from pubsubml.artifacts.onnx_trees import is_tree_ensemble, tree_ensemble_to_onnx
from pubsubml.learners import DPRandomForestClassifier, to_sklearn_base
from pubsubml.schema import FeatureSchema

N_IN = 4


def _run(data: bytes, Z: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (out,) = session.run(["output"], {"input": Z.astype(np.float32)})
    return np.asarray(out)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Encoded inputs, binary labels and a linear target."""
    rng = np.random.default_rng(0)
    Z = rng.random((60, N_IN)).astype(np.float32)
    y = (Z[:, 0] + Z[:, 1] > 1.0).astype(int)
    t = Z @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.25
    return Z, y, t


# ---- tree_ensemble_to_onnx ------------------------------------------------------------------
def _on_the_thresholds(model: Any, Z: np.ndarray) -> np.ndarray:
    """``Z`` plus rows whose every value is a split threshold in float32, and the float32 values
    just above and below (where ``≤`` against a rounded threshold would go the wrong way)."""
    trees = getattr(model, "estimators_", [model])
    thresholds = np.concatenate([t.tree_.threshold[t.tree_.children_left >= 0] for t in trees])
    rng = np.random.default_rng(1)
    picked = rng.choice(thresholds, size=(200, Z.shape[1])).astype(np.float32)
    rows = [Z, picked, np.nextafter(picked, np.float32(2)), np.nextafter(picked, np.float32(-1))]
    return np.concatenate(rows).astype(np.float32)


def _labels(Z: np.ndarray, k: int) -> np.ndarray:
    return np.minimum((Z[:, 0] + Z[:, 1]) * k / 2, k - 1).astype(int)


TREE_MODELS: dict[str, Callable[[np.ndarray], Any]] = {
    "forest_binary": lambda Z: RandomForestClassifier(n_estimators=20, random_state=0).fit(
        Z, _labels(Z, 2)
    ),
    "forest_strings": lambda Z: RandomForestClassifier(
        n_estimators=7, max_depth=4, random_state=0
    ).fit(Z, np.array(["lo", "mid", "hi"])[_labels(Z, 3)]),
    "extra_trees": lambda Z: ExtraTreesClassifier(n_estimators=9, random_state=0).fit(
        Z, _labels(Z, 4)
    ),
    "tree": lambda Z: DecisionTreeClassifier(random_state=0).fit(Z, _labels(Z, 3)),
    "extra_tree": lambda Z: ExtraTreeClassifier(random_state=0).fit(Z, _labels(Z, 2)),
    "dp_forest": lambda Z: to_sklearn_base(
        DPRandomForestClassifier(
            classes=[0, 1, 2], bounds=(0, 1), n_estimators=10, max_depth=6, random_state=0
        )
        .fit(Z, _labels(Z, 3))
        .estimator_
    ),
}


@pytest.mark.parametrize("name", list(TREE_MODELS))
def test_tree_ensembles_compute_predict_proba_even_on_the_thresholds(
    name: str, data: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    Z = np.random.default_rng(2).random((300, N_IN)).astype(np.float32)
    model = TREE_MODELS[name](Z)
    rows = _on_the_thresholds(model, data[0])

    graph = tree_ensemble_to_onnx(model, N_IN)

    np.testing.assert_allclose(_run(graph, rows), model.predict_proba(rows), rtol=0, atol=1e-6)
    assert sklearn_to_onnx(model, N_IN) == graph == tree_ensemble_to_onnx(model, N_IN)


def test_forests_are_written_without_skl2onnx(
    monkeypatch: pytest.MonkeyPatch, data: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    import skl2onnx

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("skl2onnx must not convert tree ensembles")

    monkeypatch.setattr(skl2onnx, "convert_sklearn", refuse)
    Z, y, _ = data
    model = RandomForestClassifier(n_estimators=3, random_state=0).fit(Z, y)

    proto = onnx.load_from_string(sklearn_to_onnx(model, N_IN))

    (ensemble,) = [n for n in proto.graph.node if n.domain == "ai.onnx.ml"]
    attributes = {a.name: a for a in ensemble.attribute}
    assert ensemble.op_type == "TreeEnsembleClassifier"
    assert attributes["nodes_values_as_tensor"].t.data_type == onnx.TensorProto.DOUBLE
    assert attributes["class_weights_as_tensor"].t.data_type == onnx.TensorProto.DOUBLE


def test_empty_leaves_add_nothing_and_positions_scatter_the_classes(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    Z = data[0]
    tree = DecisionTreeClassifier(max_depth=3, random_state=0).fit(Z, _labels(Z, 3))
    leaf = int(np.flatnonzero(tree.tree_.children_left < 0)[0])
    tree.tree_.value[leaf] = 0.0  # a leaf without votes (a DP leaf can have none)
    positions = [4, 0, 2]

    out = _run(tree_ensemble_to_onnx(tree, N_IN, output_positions=positions, n_outputs=5), Z)

    expected = np.zeros((len(Z), 5))
    expected[:, positions] = tree.predict_proba(Z)
    assert (tree.apply(Z) == leaf).any() and not expected[tree.apply(Z) == leaf].any()
    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_tree_ensembles_refuse_other_models_and_narrow_inputs(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    Z, y, _ = data
    forest = RandomForestClassifier(n_estimators=2, random_state=0).fit(Z, y)

    with pytest.raises(TypeError, match="tree or forest, got"):
        tree_ensemble_to_onnx(LogisticRegression().fit(Z, y), N_IN)
    with pytest.raises(TypeError, match="tree or forest, got"):
        tree_ensemble_to_onnx(RandomForestClassifier().fit(Z, np.stack([y, y], axis=1)), N_IN)
    with pytest.raises(ValueError, match="the input has 2 columns"):
        tree_ensemble_to_onnx(forest, 2)
    with pytest.raises(ValueError, match="needs n_outputs"):
        tree_ensemble_to_onnx(forest, N_IN, output_positions=[1, 0])


# ---- tree and forest regressors -------------------------------------------------------------
def _target(Z: np.ndarray) -> np.ndarray:
    """A smooth target away from zero, with a step."""
    return 2.0 + np.sin(3 * Z[:, 0]) + Z[:, 1] ** 2 - Z[:, 2] + (Z[:, 3] > 0.5)


TREE_REGRESSORS: dict[str, Callable[[np.ndarray], Any]] = {
    "forest": lambda Z: RandomForestRegressor(n_estimators=15, random_state=0).fit(Z, _target(Z)),
    "extra_trees": lambda Z: ExtraTreesRegressor(n_estimators=9, max_depth=6, random_state=0).fit(
        Z, _target(Z)
    ),
    "tree": lambda Z: DecisionTreeRegressor(random_state=0).fit(Z, _target(Z)),
    "extra_tree": lambda Z: ExtraTreeRegressor(random_state=0).fit(Z, _target(Z)),
}


@pytest.mark.parametrize("name", list(TREE_REGRESSORS))
def test_tree_regressors_compute_predict_even_on_the_thresholds(
    name: str, data: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    Z = np.random.default_rng(3).random((300, N_IN)).astype(np.float32)
    model = TREE_REGRESSORS[name](Z)
    rows = _on_the_thresholds(model, data[0])

    graph = tree_ensemble_to_onnx(model, N_IN)

    out = _run(graph, rows)
    assert out.dtype == np.float32 and out.shape == (len(rows), 1)
    np.testing.assert_allclose(out[:, 0], model.predict(rows), rtol=1e-5, atol=1e-6)
    assert sklearn_to_onnx(model, N_IN) == graph == tree_ensemble_to_onnx(model, N_IN)


def test_forest_regressors_are_written_without_skl2onnx(
    monkeypatch: pytest.MonkeyPatch, data: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    import skl2onnx

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("skl2onnx must not convert tree ensembles")

    monkeypatch.setattr(skl2onnx, "convert_sklearn", refuse)
    Z, _, t = data
    model = RandomForestRegressor(n_estimators=3, random_state=0).fit(Z, t)

    proto = onnx.load_from_string(sklearn_to_onnx(model, N_IN))

    (ensemble,) = [n for n in proto.graph.node if n.domain == "ai.onnx.ml"]
    attributes = {a.name: a for a in ensemble.attribute}
    assert ensemble.op_type == "TreeEnsembleRegressor"
    assert attributes["n_targets"].i == 1
    assert attributes["nodes_values_as_tensor"].t.data_type == onnx.TensorProto.DOUBLE
    assert attributes["target_weights_as_tensor"].t.data_type == onnx.TensorProto.DOUBLE
    np.testing.assert_allclose(
        _run(proto.SerializeToString(), Z)[:, 0], model.predict(Z), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    "model",
    [RandomForestRegressor(n_estimators=2), DecisionTreeRegressor()],
    ids=["forest", "tree"],
)
def test_tree_regressors_of_two_outputs_or_unfitted_are_refused(
    model: Any, data: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    Z, _, t = data

    with pytest.raises(TypeError, match="one-output scikit-learn tree or forest"):
        tree_ensemble_to_onnx(model, N_IN)
    with pytest.raises(TypeError, match="one-output scikit-learn tree or forest"):
        two_outputs = clone(model).set_params(random_state=0).fit(Z, np.stack([t, -t], axis=1))
        tree_ensemble_to_onnx(two_outputs, N_IN)


class _Learner:
    """A fitted learner as pubsubml's are seen by export_model: a scikit-learn ``estimator_``
    on the schema-encoded matrix, and the ``schema_`` it encodes."""

    def __init__(self, estimator: Any, schema: FeatureSchema) -> None:
        self.estimator_ = estimator
        self.schema_ = schema


@pytest.mark.parametrize(
    "wrapped",
    [
        pytest.param(False, id="plain"),
        pytest.param(True, id="learner"),
    ],
)
def test_an_exported_forest_regressor_predicts_like_the_model(
    wrapped: bool,
    schema: FeatureSchema,
    frame: pd.DataFrame,
    X: pd.DataFrame,
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    encoded = schema.encode(frame[schema.names])
    model = RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0).fit(
        encoded, frame["t"]
    )
    estimator = _Learner(model, schema) if wrapped else model

    artifact = export_model(estimator, publisher="a", signing_key=signing_key, schema=schema)

    published = artifact.open(trusted)
    assert artifact.card.format == "onnx" and artifact.card.task == "regression"
    assert published.classes is None
    np.testing.assert_allclose(
        published.predict(X), model.predict(schema.encode(X)), rtol=1e-5, atol=1e-6
    )


def test_is_tree_ensemble_names_exactly_the_one_output_trees_and_forests(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    Z, y, t = data
    assert is_tree_ensemble(RandomForestClassifier(n_estimators=2).fit(Z, y))
    assert is_tree_ensemble(DecisionTreeRegressor().fit(Z, t))
    assert not is_tree_ensemble(LogisticRegression().fit(Z, y))
    assert not is_tree_ensemble(DecisionTreeRegressor().fit(Z, np.stack([t, -t], axis=1)))
