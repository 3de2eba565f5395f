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


# Hidden activations through exp, which numpy vectorizes on every x86-64 CPU (its float32 tanh
# is vectorized only with AVX-512): the layer feeding the activation is pre-scaled by ``scale`` so
# that s = 1 / (1 + exp(u)) with u = scale·h; then sigmoid(h) = s and tanh(h) = 1 - 2s.
_PRE_SCALE = {"tanh": 2.0, "sigmoid": -1.0, "relu": 1.0}


def _activate(U: np.ndarray, activation: str) -> None:
    """Apply the hidden activation in place to the pre-scaled pre-activation ``U``."""
    if activation == "relu":
        np.maximum(U, 0.0, out=U)
        return
    with np.errstate(over="ignore"):  # exp overflows to inf for large u: s = 0, as it should
        np.exp(U, out=U)
    U += 1.0
    np.reciprocal(U, out=U)
    if activation == "tanh":
        U *= -2.0
        U += 1.0


def _logits(
    Z: np.ndarray, weights_t: Sequence[np.ndarray], biases: Sequence[np.ndarray], activation: str
) -> np.ndarray:
    """Output layer before its activation; ``weights_t[i]`` is (in, out) or stacked (m, in, out)."""
    H = Z
    last = len(weights_t) - 1
    for i, (wt, b) in enumerate(zip(weights_t, biases, strict=True)):
        H = np.matmul(H, wt)
        H += b
        if i < last:
            _activate(H, activation)
    return H


def _finish(H: np.ndarray, output_activation: str) -> np.ndarray:
    """Apply the output activation in place over the last axis (softmax or identity)."""
    if output_activation != "softmax":
        return H
    k = H.shape[-1]
    columns = [H[..., j] for j in range(k)] if k <= 8 else []  # few classes: avoid tiny reductions
    if columns:
        peak = columns[0].copy()
        for column in columns[1:]:
            np.maximum(peak, column, out=peak)
    else:
        peak = H.max(axis=-1)
    H -= peak[..., None]
    np.exp(H, out=H)
    if columns:
        total = columns[0].copy()
        for column in columns[1:]:
            total += column
    else:
        total = H.sum(axis=-1)
    H /= total[..., None]
    return H


class MLPRunner:
    """numpy forward pass of a fully connected network from the card's architecture.

    ``weights_t`` and ``biases`` hold the layers transposed to (in, out), the hidden ones
    pre-scaled for the exp-based activations (see ``_activate``).

    Parameters
    ----------
    layers : list of (weight (out, in), bias (out,))
    architecture : MLPArchitecture
    """

    def __init__(
        self, layers: Sequence[tuple[np.ndarray, np.ndarray]], architecture: MLPArchitecture
    ):
        self.architecture = architecture
        scale = np.float32(_PRE_SCALE[architecture.activation])
        last = len(layers) - 1
        # Transposed to (in, out); hidden layers pre-scaled (an exact power-of-two scaling).
        self.weights_t = [
            np.ascontiguousarray(w.T * (scale if i < last else np.float32(1.0)))
            for i, (w, _) in enumerate(layers)
        ]
        self.biases = [
            np.asarray(b, dtype=np.float32) * (scale if i < last else np.float32(1.0))
            for i, (_, b) in enumerate(layers)
        ]

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
        arch = self.architecture
        logits = _logits(np.asarray(Z, np.float32), self.weights_t, self.biases, arch.activation)
        return _finish(logits, arch.output_activation)


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

    References
    ----------
    pubsub-ml.txt §4, Eqn 2 (m(x) over many subscribed models), §7.2 Table 4 (the networks).
    """

    def __init__(self, runners: Sequence[MLPRunner]):
        if not runners:
            raise ValueError("an MLPStack needs at least one network")
        arch = runners[0].architecture
        if any(r.architecture is not arch and r.architecture != arch for r in runners):
            raise ValueError("all networks of an MLPStack must share one architecture")
        self.architecture = arch
        self.weights_t = [np.stack([r.weights_t[i] for r in runners]) for i in range(arch.n_layers)]
        self.biases = [
            np.stack([r.biases[i] for r in runners])[:, None, :] for i in range(arch.n_layers)
        ]

    def part(self, start: int, stop: int) -> MLPStack:
        """Networks ``start`` … ``stop - 1`` as a stack of their own, sharing this one's arrays.

        Examples
        --------
        >>> from pubsubml.artifacts.card import MLPArchitecture
        >>> arch = MLPArchitecture(layer_sizes=[2, 3, 2], activation="tanh",
        ...                        output_activation="softmax")
        >>> rng = np.random.default_rng(0)
        >>> nets = [MLPRunner([(rng.normal(size=(3, 2)).astype(np.float32), np.zeros(3, np.float32)),
        ...                    (rng.normal(size=(2, 3)).astype(np.float32), np.zeros(2, np.float32))],
        ...                   arch) for _ in range(3)]
        >>> Z = rng.normal(size=(4, 2)).astype(np.float32)
        >>> bool(np.array_equal(MLPStack(nets).part(1, 3).run(Z), MLPStack(nets[1:]).run(Z)))
        True
        """
        view = object.__new__(MLPStack)
        view.architecture = self.architecture
        view.weights_t = [w[start:stop] for w in self.weights_t]
        view.biases = [b[start:stop] for b in self.biases]
        return view

    def __len__(self) -> int:
        return int(self.weights_t[0].shape[0])

    def run(self, Z: np.ndarray, *, block_rows: int | None = None) -> np.ndarray:
        """Outputs of every network.

        Parameters
        ----------
        Z : ndarray of shape (n, n_inputs) shared by all networks, or (m, n, n_inputs)
        block_rows : int, optional
            Rows per block: smaller blocks keep the activations in the CPU cache.  All rows at
            once by default.

        Returns
        -------
        ndarray of shape (m, n, n_outputs), float32
        """
        Z = np.asarray(Z, np.float32)
        arch = self.architecture
        n = Z.shape[-2]
        step = n if block_rows is None else max(1, block_rows)
        if step >= n:
            logits = _logits(Z, self.weights_t, self.biases, arch.activation)
        else:
            logits = np.empty((len(self), n, arch.layer_sizes[-1]), dtype=np.float32)
            for start in range(0, n, step):
                block = Z[..., start : start + step, :]
                logits[:, start : start + step] = _logits(
                    block, self.weights_t, self.biases, arch.activation
                )
        return _finish(logits, arch.output_activation)


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
