"""Tests of pubsubml.artifacts.onnx_export: fully connected networks and scikit-learn to ONNX."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pubsubml.artifacts.onnx_export import mlp_to_onnx, sklearn_to_onnx

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
