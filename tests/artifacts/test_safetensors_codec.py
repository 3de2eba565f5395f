"""Safety checks and numpy forward pass of the safetensors fast path."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import safetensors.numpy

from pubsubml.artifacts import MLPArchitecture
from pubsubml.artifacts.safetensors_codec import (
    MLPRunner,
    MLPStack,
    check_safetensors,
    mlp_to_safetensors,
)
from pubsubml.errors import UntrustedArtifactError

ARCH = MLPArchitecture(layer_sizes=[5, 4, 2], activation="tanh", output_activation="softmax")
LIMIT = 1 << 20


def _layers(
    seed: int = 0, sizes: tuple[int, ...] = (5, 4, 2)
) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (rng.normal(size=(o, i)).astype(np.float32), rng.normal(size=o).astype(np.float32))
        for i, o in itertools.pairwise(sizes)
    ]


def _tensors(layers: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    out = {}
    for i, (w, b) in enumerate(layers):
        out[f"{i}.weight"], out[f"{i}.bias"] = w, b
    return out


def test_round_trip_is_exact() -> None:
    layers = _layers()

    decoded = check_safetensors(mlp_to_safetensors(layers), ARCH, max_bytes=LIMIT)

    for (w, b), (w2, b2) in zip(layers, decoded, strict=True):
        np.testing.assert_array_equal(w, w2)
        np.testing.assert_array_equal(b, b2)


def test_wrong_dtype_is_rejected() -> None:
    tensors = _tensors(_layers())
    tensors["0.weight"] = tensors["0.weight"].astype(np.float64)

    with pytest.raises(UntrustedArtifactError, match=r"'0\.weight' has dtype 'F64', expected F32"):
        check_safetensors(safetensors.numpy.save(tensors), ARCH, max_bytes=LIMIT)


def test_shape_inconsistent_with_the_architecture_is_rejected() -> None:
    data = mlp_to_safetensors(_layers(sizes=(5, 3, 2)))

    with pytest.raises(UntrustedArtifactError, match=r"'0.weight' has shape \[3, 5\]"):
        check_safetensors(data, ARCH, max_bytes=LIMIT)


def test_missing_and_unexpected_tensors_are_rejected() -> None:
    tensors = _tensors(_layers())
    del tensors["1.bias"]
    tensors["payload"] = np.zeros(3, np.float32)

    with pytest.raises(
        UntrustedArtifactError, match=r"missing \['1.bias'\], unexpected \['payload'\]"
    ):
        check_safetensors(safetensors.numpy.save(tensors), ARCH, max_bytes=LIMIT)


def test_non_finite_weights_are_rejected() -> None:
    layers = _layers()
    layers[1][0][0, 0] = np.nan

    with pytest.raises(UntrustedArtifactError, match="NaN or infinite"):
        check_safetensors(mlp_to_safetensors(layers), ARCH, max_bytes=LIMIT)


def test_pickle_and_garbage_are_rejected() -> None:
    with pytest.raises(UntrustedArtifactError, match="a Python pickle"):
        check_safetensors(b"cos\nsystem\n(S'echo pwned'\ntR.", ARCH, max_bytes=LIMIT)
    with pytest.raises(UntrustedArtifactError, match="not a safetensors file"):
        check_safetensors(np.random.default_rng(0).bytes(512), ARCH, max_bytes=LIMIT)


def test_header_length_beyond_the_file_is_rejected() -> None:
    header = json.dumps({"0.weight": {"dtype": "F32", "shape": [4, 5], "data_offsets": [0, 80]}})
    data = (10_000).to_bytes(8, "little") + header.encode()

    with pytest.raises(UntrustedArtifactError, match="bad header length"):
        check_safetensors(data, ARCH, max_bytes=LIMIT)


def test_offsets_beyond_the_buffer_are_rejected() -> None:
    tensors = _tensors(_layers())
    data = safetensors.numpy.save(tensors)

    with pytest.raises(UntrustedArtifactError, match="invalid safetensors"):
        check_safetensors(data[:-8], ARCH, max_bytes=LIMIT)


@pytest.mark.parametrize("activation", ["tanh", "relu", "sigmoid"])
def test_forward_pass_matches_an_independent_float64_reference(activation: str) -> None:
    arch = MLPArchitecture(
        layer_sizes=[5, 4, 3], activation=activation, output_activation="softmax"
    )
    layers = _layers(sizes=(5, 4, 3))
    Z = np.random.default_rng(1).random((7, 5)).astype(np.float32)
    act = {
        "tanh": np.tanh,
        "relu": lambda h: np.maximum(h, 0),
        "sigmoid": lambda h: 1 / (1 + np.exp(-h)),
    }
    h = Z.astype(np.float64)
    h = act[activation](h @ layers[0][0].T.astype(np.float64) + layers[0][1])
    logits = h @ layers[1][0].T.astype(np.float64) + layers[1][1]
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)

    out = MLPRunner(layers, arch).run(Z)

    np.testing.assert_allclose(out, expected, atol=1e-6)


def test_stack_equals_individual_runs_for_shared_and_per_model_inputs() -> None:
    runners = [MLPRunner(_layers(seed), ARCH) for seed in range(4)]
    Z = np.random.default_rng(2).random((6, 5)).astype(np.float32)
    Zs = np.random.default_rng(3).random((4, 6, 5)).astype(np.float32)

    shared = MLPStack(runners).run(Z)
    separate = MLPStack(runners).run(Zs)

    for k, runner in enumerate(runners):
        np.testing.assert_allclose(shared[k], runner.run(Z), atol=1e-6)
        np.testing.assert_allclose(separate[k], runner.run(Zs[k]), atol=1e-6)


def test_stack_refuses_mixed_architectures() -> None:
    other = MLPArchitecture(layer_sizes=[5, 4, 2], activation="relu", output_activation="softmax")

    with pytest.raises(ValueError, match="share one architecture"):
        MLPStack([MLPRunner(_layers(), ARCH), MLPRunner(_layers(), other)])
