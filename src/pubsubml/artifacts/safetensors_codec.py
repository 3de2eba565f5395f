"""safetensors: the fast path for pubsubml's own fully connected networks.

The weights file holds only float32 tensors ``{i}.weight`` (out, in) and ``{i}.bias`` (out,); the
architecture (layer sizes, activation, output activation) is in the signed card.  The loader checks
every tensor name, dtype and shape against the card before decoding, then runs a numpy forward
pass (no torch needed).  Networks of the same architecture stack into an :class:`MLPStack`, which
runs many published models on the same input with one batched matmul per layer (the subscriber's
m(x), pubsub-ml.txt §4 Step 3, Eqn 2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import safetensors.numpy
from scipy.special import expit

from pubsubml.artifacts.card import MLPArchitecture, ModelCard
from pubsubml.artifacts.codecs import DecodeOptions, reject_foreign_payload
from pubsubml.errors import UntrustedArtifactError

__all__ = ["MLPRunner", "MLPStack", "check_safetensors", "load_safetensors", "mlp_to_safetensors"]

_MAX_HEADER_BYTES = 1 << 20

Layers = list[tuple[np.ndarray, np.ndarray]]


def mlp_to_safetensors(layers: Sequence[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """Serialize (weight (out, in), bias (out,)) pairs as float32 safetensors.

    Examples
    --------
    >>> data = mlp_to_safetensors([(np.ones((2, 3)), np.zeros(2))])
    >>> arch = MLPArchitecture(layer_sizes=[3, 2], activation="tanh", output_activation="softmax")
    >>> [w.shape for w, _ in check_safetensors(data, arch, max_bytes=1 << 20)]
    [(2, 3)]
    """
    tensors: dict[str, np.ndarray] = {}
    for i, (weight, bias) in enumerate(layers):
        tensors[f"{i}.weight"] = np.ascontiguousarray(weight, dtype=np.float32)
        tensors[f"{i}.bias"] = np.ascontiguousarray(bias, dtype=np.float32)
    return safetensors.numpy.save(tensors)


def _read_header(data: bytes) -> dict[str, Any]:
    if len(data) < 10:
        raise UntrustedArtifactError("weights are too short to be a safetensors file")
    n = int.from_bytes(data[:8], "little")
    if n > min(len(data) - 8, _MAX_HEADER_BYTES) or data[8:9] != b"{":
        raise UntrustedArtifactError(
            "weights are not a safetensors file (bad header length or no JSON header)"
        )
    try:
        header = json.loads(data[8 : 8 + n])
    except (ValueError, UnicodeDecodeError) as exc:
        raise UntrustedArtifactError(f"safetensors header is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise UntrustedArtifactError("safetensors header is not a JSON object")
    header.pop("__metadata__", None)  # free-form text; never used
    return header


def check_safetensors(data: bytes, architecture: MLPArchitecture, *, max_bytes: int) -> Layers:
    """Decode untrusted safetensors bytes into the layers ``architecture`` declares.

    Returns
    -------
    list of (weight, bias)
        float32 arrays of shapes (out, in) and (out,).

    Raises
    ------
    UntrustedArtifactError
        Not a safetensors file (a pickle or other payload is named), too large, missing or
        unexpected tensors, a dtype other than float32, shapes that disagree with the
        architecture, or non-finite weights.
    """
    reject_foreign_payload(data, expected="a safetensors file", max_bytes=max_bytes)
    header = _read_header(bytes(data))
    expected = architecture.tensor_shapes()
    missing = sorted(set(expected) - set(header))
    unexpected = sorted(set(header) - set(expected))
    if missing or unexpected:
        raise UntrustedArtifactError(
            f"safetensors tensors disagree with the card's architecture: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    for name, shape in expected.items():
        info = header[name]
        if not isinstance(info, dict) or info.get("dtype") != "F32":
            dtype = info.get("dtype") if isinstance(info, dict) else info
            raise UntrustedArtifactError(f"tensor {name!r} has dtype {dtype!r}, expected F32")
        if info.get("shape") != list(shape):
            raise UntrustedArtifactError(
                f"tensor {name!r} has shape {info.get('shape')}, the card's architecture "
                f"{architecture.layer_sizes} needs {list(shape)}"
            )
    try:
        tensors = safetensors.numpy.load(bytes(data))
    except Exception as exc:  # SafetensorError and friends
        raise UntrustedArtifactError(f"invalid safetensors file: {exc}") from None
    layers: Layers = []
    for i in range(architecture.n_layers):
        pair = (tensors[f"{i}.weight"], tensors[f"{i}.bias"])
        for name, arr, shape in zip(
            (f"{i}.weight", f"{i}.bias"),
            pair,
            (expected[f"{i}.weight"], expected[f"{i}.bias"]),
            strict=True,
        ):
            if arr.dtype != np.float32 or arr.shape != shape:
                raise UntrustedArtifactError(f"tensor {name!r} decoded as {arr.dtype} {arr.shape}")
            if not np.all(np.isfinite(arr)):
                raise UntrustedArtifactError(f"tensor {name!r} contains NaN or infinite values")
        layers.append(pair)
    return layers


def _activate(H: np.ndarray, activation: str) -> None:
    if activation == "tanh":
        np.tanh(H, out=H)
    elif activation == "relu":
        np.maximum(H, 0.0, out=H)
    else:
        expit(H, out=H)


def _forward(
    Z: np.ndarray,
    weights_t: Sequence[np.ndarray],
    biases: Sequence[np.ndarray],
    architecture: MLPArchitecture,
) -> np.ndarray:
    """Forward pass; ``weights_t[i]`` is (in, out) or stacked (m, in, out), broadcasting on Z."""
    H = Z
    last = len(weights_t) - 1
    for i, (wt, b) in enumerate(zip(weights_t, biases, strict=True)):
        H = np.matmul(H, wt)
        H += b
        if i < last:
            _activate(H, architecture.activation)
    if architecture.output_activation == "softmax":
        H -= H.max(axis=-1, keepdims=True)
        np.exp(H, out=H)
        H /= H.sum(axis=-1, keepdims=True)
    return H


class MLPRunner:
    """numpy forward pass of a fully connected network from the card's architecture.

    Parameters
    ----------
    layers : list of (weight (out, in), bias (out,))
    architecture : MLPArchitecture
    """

    def __init__(
        self, layers: Sequence[tuple[np.ndarray, np.ndarray]], architecture: MLPArchitecture
    ):
        self.architecture = architecture
        self.weights_t = [np.ascontiguousarray(w.T) for w, _ in layers]
        self.biases = [np.asarray(b, dtype=np.float32) for _, b in layers]

    @property
    def n_inputs(self) -> int:
        """Width of the encoded input."""
        return self.architecture.layer_sizes[0]

    @property
    def n_outputs(self) -> int:
        """Number of outputs."""
        return self.architecture.layer_sizes[-1]

    def run(self, Z: np.ndarray) -> np.ndarray:
        """Outputs (n, n_outputs), float32, for ``Z`` of shape (n, n_inputs)."""
        return _forward(np.asarray(Z, np.float32), self.weights_t, self.biases, self.architecture)


class MLPStack:
    """Several networks of one architecture, run together with one batched matmul per layer.

    Parameters
    ----------
    runners : sequence of MLPRunner
        All with the same architecture.

    Raises
    ------
    ValueError
        Empty, or architectures differ.
    """

    def __init__(self, runners: Sequence[MLPRunner]):
        if not runners:
            raise ValueError("an MLPStack needs at least one network")
        arch = runners[0].architecture
        if any(r.architecture != arch for r in runners):
            raise ValueError("all networks of an MLPStack must share one architecture")
        self.architecture = arch
        self.weights_t = [np.stack([r.weights_t[i] for r in runners]) for i in range(arch.n_layers)]
        self.biases = [
            np.stack([r.biases[i] for r in runners])[:, None, :] for i in range(arch.n_layers)
        ]

    def __len__(self) -> int:
        return int(self.weights_t[0].shape[0])

    def run(self, Z: np.ndarray) -> np.ndarray:
        """Outputs of every network.

        Parameters
        ----------
        Z : ndarray of shape (n, n_inputs) shared by all networks, or (m, n, n_inputs)

        Returns
        -------
        ndarray of shape (m, n, n_outputs), float32
        """
        return _forward(np.asarray(Z, np.float32), self.weights_t, self.biases, self.architecture)


def load_safetensors(card: ModelCard, data: bytes, options: DecodeOptions) -> MLPRunner:
    """Check ``data`` against ``card``'s architecture and build the numpy runner.

    Raises
    ------
    UntrustedArtifactError
        Any failed check of :func:`check_safetensors`, or a card without architecture.
    """
    if card.architecture is None:
        raise UntrustedArtifactError("a safetensors model needs the architecture in its card")
    layers = check_safetensors(data, card.architecture, max_bytes=options.max_bytes)
    return MLPRunner(layers, card.architecture)
