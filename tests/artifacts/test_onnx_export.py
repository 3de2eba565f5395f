"""Tests of pubsubml.artifacts.onnx_export: fully connected networks and scikit-learn to ONNX."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreeClassifier,
    ExtraTreeRegressor,
)

from pubsubml.artifacts import export_model
from pubsubml.artifacts.onnx_export import mlp_to_onnx, sklearn_to_onnx, tree_ensemble_to_onnx
from pubsubml.learners import DPRandomForestClassifier, to_sklearn_base
from pubsubml.schema import FeatureSchema

N_IN = 4


def _run(data: bytes, Z: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (out,) = session.run(["output"], {"input": Z.astype(np.float32)})
    return np.asarray(out)


def _layers(sizes: list[int], seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (
            rng.normal(size=(n_out, n_in)).astype(np.float32),
            rng.normal(size=n_out).astype(np.float32),
        )
        for n_in, n_out in itertools.pairwise(sizes)
    ]


def _forward(
    layers: list[tuple[np.ndarray, np.ndarray]], Z: np.ndarray, activation: str
) -> np.ndarray:
    """float64 reference forward pass (identity output)."""
    act = {"relu": lambda h: np.maximum(h, 0.0), "tanh": np.tanh}[activation]
    H = Z.astype(np.float64)
    for i, (w, b) in enumerate(layers):
        H = H @ w.astype(np.float64).T + b
        if i < len(layers) - 1:
            H = act(H)
    return H


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Encoded inputs, binary labels and a linear target."""
    rng = np.random.default_rng(0)
    Z = rng.random((60, N_IN)).astype(np.float32)
    y = (Z[:, 0] + Z[:, 1] > 1.0).astype(int)
    t = Z @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.25
    return Z, y, t


# ---- mlp_to_onnx ----------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_mlp_regressor_matches_a_float64_forward_pass(
    activation: str, data: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> None:
    Z = data[0]
    layers = _layers([N_IN, 6, 3, 1], seed=1)

    out = _run(mlp_to_onnx(layers, activation=activation, output_activation="identity"), Z)

    assert out.shape == (len(Z), 1)
    np.testing.assert_allclose(out, _forward(layers, Z, activation), rtol=1e-5, atol=1e-5)


def test_mlp_classifier_outputs_the_softmax_of_the_logits(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    Z = data[0]
    layers = _layers([N_IN, 5, 3], seed=2)
    logits = _forward(layers, Z, "tanh")
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)

    out = _run(mlp_to_onnx(layers, activation="tanh", output_activation="softmax"), Z)

    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_mlp_graph_is_deterministic_and_declares_its_interface() -> None:
    layers = _layers([N_IN, 3, 2], seed=3)

    first = mlp_to_onnx(layers, activation="relu", output_activation="softmax")
    second = mlp_to_onnx(layers, activation="relu", output_activation="softmax")

    assert first == second
    graph = onnx.load_from_string(first).graph
    assert [i.name for i in graph.input] == ["input"]
    assert [o.name for o in graph.output] == ["output"]
    dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    assert dims[1] == N_IN
    assert {n.op_type for n in graph.node} == {"Gemm", "Relu", "Softmax"}


def test_single_layer_network_has_no_hidden_activation(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    layers = _layers([N_IN, 1], seed=4)

    data_bytes = mlp_to_onnx(layers, activation="tanh", output_activation="identity")

    assert "Tanh" not in {n.op_type for n in onnx.load_from_string(data_bytes).graph.node}
    np.testing.assert_allclose(
        _run(data_bytes, data[0]), _forward(layers, data[0], "tanh"), rtol=1e-5, atol=1e-5
    )


# ---- sklearn_to_onnx ------------------------------------------------------------------------
def test_regressor_keeps_its_single_prediction(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    Z, _, t = data
    model = LinearRegression().fit(Z, t)

    out = _run(sklearn_to_onnx(model, N_IN), Z)

    assert out.dtype == np.float32 and out.shape == (len(Z), 1)
    np.testing.assert_allclose(out[:, 0], model.predict(Z), rtol=1e-5, atol=1e-5)


def test_pipeline_classifier_outputs_probabilities(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    Z, y, _ = data
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(Z, y)

    out = _run(sklearn_to_onnx(model, N_IN), Z)

    np.testing.assert_allclose(out, model.predict_proba(Z), atol=1e-6)


def test_output_positions_scatter_probabilities_into_the_declared_classes(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    Z = data[0]
    labels = np.where(Z[:, 1] > 0.6, 2, np.where(Z[:, 1] > 0.3, 1, 0))
    model = LogisticRegression().fit(Z, labels)  # three of five declared classes
    positions = [4, 0, 2]

    out = _run(sklearn_to_onnx(model, N_IN, output_positions=positions, n_outputs=5), Z)

    expected = np.zeros((len(Z), 5))
    expected[:, positions] = model.predict_proba(Z)
    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_output_positions_need_the_number_of_outputs(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    Z, y, _ = data

    with pytest.raises(ValueError, match="needs n_outputs"):
        sklearn_to_onnx(LogisticRegression().fit(Z, y), N_IN, output_positions=[0, 1])


class _Unconvertible(ClassifierMixin, BaseEstimator):
    """A classifier skl2onnx has no converter for."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> _Unconvertible:
        self.classes_ = np.unique(y)
        return self


def test_models_without_a_converter_raise_type_error(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    Z, y, _ = data

    with pytest.raises(TypeError, match="cannot convert _Unconvertible"):
        sklearn_to_onnx(_Unconvertible().fit(Z, y), N_IN)


def test_sklearn_conversion_is_deterministic(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    Z, y, _ = data
    model = LogisticRegression().fit(Z, y)

    assert sklearn_to_onnx(model, N_IN) == sklearn_to_onnx(model, N_IN)


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
