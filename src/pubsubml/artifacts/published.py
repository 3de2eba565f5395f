"""A subscribed model, verified and ready to use as a black box over its declared features.

:meth:`PublishedModel.load` checks, in order: the signature of the card by a trusted key, the
SHA-256 digest of the weights, the privacy record (ε recomputed from the DP events), and the
format's safety checks, then builds the runtime.  Predictions apply feature extension
(pubsub-ml.txt §4 Step 3): features the model needs but ``X`` lacks take the public defaults of the
card's schema, extra columns are ignored, column order never matters.  :func:`predict_many`
computes the outputs of many subscribed models on the same ``X`` (m(x), Eqn 2), stacking
networks of one architecture into one batched matmul per layer.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.codecs import DEFAULT_MAX_WEIGHTS_BYTES, DecodeOptions, Runner
from pubsubml.artifacts.onnx_codec import load_onnx
from pubsubml.artifacts.privacy_record import check_privacy_record
from pubsubml.artifacts.safetensors_codec import MLPRunner, MLPStack, load_safetensors
from pubsubml.artifacts.signing import verify_card
from pubsubml.errors import (
    DigestMismatchError,
    UntrustedArtifactError,
)

__all__ = [
    "PublishedModel",
    "build_runner",
    "predict_many",
]

_DECODERS: Mapping[str, Callable[[ModelCard, bytes, DecodeOptions], Runner]] = {
    "onnx": load_onnx,
    "safetensors": load_safetensors,
}
_CHUNK_BYTES = 1 << 20  # largest activation of one stacked chunk: stays in the CPU cache
_BLOCK_ROWS = 256


def build_runner(card: ModelCard, weights: bytes, options: DecodeOptions | None = None) -> Runner:
    """Run the safety checks of the card's format on ``weights`` and build the runtime.

    Digest and signature are not checked here (see :meth:`PublishedModel.load`).

    Raises
    ------
    UntrustedArtifactError
        The weights fail a safety check or disagree with the card.
    """
    runner = _DECODERS[card.format](card, weights, options or DecodeOptions())
    if runner.n_inputs != card.input_schema.n_encoded or runner.n_outputs != len(card.output):
        raise UntrustedArtifactError(
            f"the model maps {runner.n_inputs} → {runner.n_outputs} columns, its card declares "
            f"{card.input_schema.n_encoded} → {len(card.output)}"
        )
    return runner


class PublishedModel:
    """A verified published model M^p used as a black box (pubsub-ml.txt §4).

    Build with :meth:`load`.

    Parameters
    ----------
    card : ModelCard
    runner : Runner
    weights : bytes, optional
        The verified weights the runner was built from (kept by :meth:`load`), so that the
        model can be stored again as it came (:attr:`weights`).

    References
    ----------
    pubsub-ml.txt §4 (CUSTOMIZE: models used only through their outputs; Step 3, feature
    extension with public default values), §5 Theorem 3 (subscribers spend no privacy).
    """

    def __init__(self, card: ModelCard, runner: Runner, weights: bytes | None = None) -> None:
        self.card = card
        self._runner = runner
        self._weights = weights
        self._classes = None if card.classes is None else np.asarray(card.classes)
        self._features: tuple[str, ...] | None = None
        self._schema_key: str | None = None

    @classmethod
    def load(
        cls,
        card: ModelCard | str | bytes,
        weights: bytes,
        trusted_keys: Mapping[str, Ed25519PublicKey],
        *,
        max_weights_bytes: int = DEFAULT_MAX_WEIGHTS_BYTES,
        intra_op_threads: int = 1,
        check_privacy: bool = True,
    ) -> PublishedModel:
        """Verify and load a published model.

        Parameters
        ----------
        card : ModelCard, or its JSON
        weights : bytes
        trusted_keys : mapping of key id to Ed25519PublicKey
        max_weights_bytes : int, default=256 MiB
        intra_op_threads : int, default=1
            ONNX Runtime threads per model.
        check_privacy : bool, default=True
            Recompute ε from the card's events (:func:`check_privacy_record`).

        Raises
        ------
        SignatureError
            Unsigned card, untrusted signer, or a card altered after signing.
        DigestMismatchError
            The weights are not the ones the card was signed for.
        UntrustedArtifactError
            Oversized or unsafe weights, or a privacy record that understates ε.
        pydantic.ValidationError
            Malformed card JSON.
        """
        parsed = card if isinstance(card, ModelCard) else ModelCard.from_json(card)
        verify_card(parsed, trusted_keys)
        if not isinstance(weights, bytes | bytearray | memoryview):
            raise UntrustedArtifactError(f"weights must be bytes, got {type(weights).__name__}")
        if len(weights) > max_weights_bytes:
            raise UntrustedArtifactError(
                f"weights are {len(weights)} bytes, the limit is {max_weights_bytes}"
            )
        digest = hashlib.sha256(weights).hexdigest()
        if digest != parsed.weights_sha256:
            raise DigestMismatchError(
                f"weights of model {parsed.model_id} have SHA-256 {digest[:16]}…, the signed card "
                f"says {parsed.weights_sha256[:16]}…"
            )
        if check_privacy:
            check_privacy_record(parsed.privacy)
        options = DecodeOptions(max_bytes=max_weights_bytes, intra_op_threads=intra_op_threads)
        data = bytes(weights)
        return cls(parsed, build_runner(parsed, data, options), data)

    # ---- metadata ----------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        """The card's model id."""
        return self.card.model_id

    @property
    def publisher(self) -> str:
        """The publishing site."""
        return self.card.publisher

    @property
    def task(self) -> str:
        """``"classification"`` or ``"regression"``."""
        return self.card.task

    @property
    def input_features(self) -> list[str]:
        """Names of the features the model reads, in its order."""
        if self._features is None:  # the card is frozen: read its schema once
            self._features = tuple(self.card.input_features)
        return list(self._features)

    @property
    def schema_key(self) -> str:
        """The card's input schema as JSON: models with equal keys encode rows alike.

        Computed once (the card is frozen), so grouping many models by how they encode costs a
        string comparison each rather than a comparison of their schemas field by field.
        """
        if self._schema_key is None:
            self._schema_key = self.card.input_schema.model_dump_json()
        return self._schema_key

    @property
    def classes(self) -> np.ndarray | None:
        """Class labels in output order, or ``None`` for regression."""
        return self._classes

    @property
    def epsilon(self) -> float:
        """ε of the publisher's guarantee (``inf`` for a non-private model)."""
        return self.card.privacy.epsilon

    @property
    def delta(self) -> float:
        """δ of the publisher's guarantee."""
        return self.card.privacy.delta

    @property
    def n_outputs(self) -> int:
        """Width of :meth:`predict_outputs`."""
        return len(self.card.output)

    @property
    def weights(self) -> bytes:
        """The verified weights bytes this model was loaded from (with :attr:`card`, the
        artifact to store it again as it came).

        Raises
        ------
        ValueError
            The model was built from a runner alone (not by :meth:`load`).
        """
        if self._weights is None:
            raise ValueError(f"model {self.model_id} was not loaded from weights; nothing to store")
        return self._weights

    def __repr__(self) -> str:
        return (
            f"PublishedModel(model_id={self.model_id!r}, publisher={self.publisher!r}, "
            f"task={self.task!r}, format={self.card.format!r}, epsilon={self.epsilon:g})"
        )

    # ---- prediction --------------------------------------------------------------------
    def missing_features(self, columns: Sequence[str]) -> list[str]:
        """Features of the model absent from ``columns``: they take public defaults."""
        have = set(map(str, columns))
        return [n for n in self.input_features if n not in have]

    def encode(self, X: Any) -> np.ndarray:
        """Feature extension then public-bound encoding (pubsub-ml.txt §4 Step 3).

        Parameters
        ----------
        X : DataFrame, or array-like of shape (n_samples, n_input_features) in schema order

        Returns
        -------
        ndarray of shape (n_samples, n_encoded), float32

        Raises
        ------
        DataValidationError
            NaN, unknown categories, non-numeric values.
        """
        return self.card.input_schema.encode(X, missing="default", extra="ignore")

    def predict_outputs(self, X: Any) -> np.ndarray:
        """Model outputs: probabilities (n, n_classes) or predictions (n, 1)."""
        return self._runner.run(self.encode(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of shape (n_samples, n_classes), columns in :attr:`classes` order.

        Raises
        ------
        TypeError
            The model is a regressor.
        """
        if self.task != "classification":
            raise TypeError(f"model {self.model_id} is a regressor; use predict")
        return self.predict_outputs(X)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels (classification) or values (regression), shape (n_samples,)."""
        out = self.predict_outputs(X)
        if self._classes is None:
            return out[:, 0]
        return self._classes[np.argmax(out, axis=1)]


def predict_many(
    models: Sequence[PublishedModel],
    X: Any,
    *,
    max_chunk_bytes: int = _CHUNK_BYTES,
    block_rows: int = _BLOCK_ROWS,
    blas_threads: int | None = 1,
) -> list[np.ndarray]:
    """Outputs of many published models on the same ``X`` (m(x), pubsub-ml.txt §4 Eqn 2).

    ``X`` is encoded once per distinct input schema (with feature extension); safetensors
    networks sharing an architecture run stacked, one batched matmul per layer, in chunks of
    models and blocks of rows whose largest activation stays under ``max_chunk_bytes`` (so it
    stays in the CPU cache); other models run one by one on the shared encoding.

    Parameters
    ----------
    models : sequence of PublishedModel
    X : DataFrame or array-like
    max_chunk_bytes : int, default=1 MiB
        Largest activation of one stacked chunk.
    block_rows : int, default=256
        Rows per block of a stacked chunk.
    blas_threads : int or None, default=1
        BLAS threads while predicting (as ONNX Runtime sessions use one intra-op thread: many
        models run at once); ``None`` leaves the BLAS setting alone.

    Returns
    -------
    list of ndarray
        ``predict_outputs`` of each model, in order: (n_samples, n_outputs_i).

    References
    ----------
    pubsub-ml.txt §4, Eqn 2: m(x) is the concatenation of these outputs.
    """
    if blas_threads is None:
        return _predict_many(models, X, max_chunk_bytes, block_rows)
    from threadpoolctl import threadpool_limits  # a dependency of scikit-learn

    with threadpool_limits(limits=blas_threads, user_api="blas"):
        return _predict_many(models, X, max_chunk_bytes, block_rows)


def _predict_many(
    models: Sequence[PublishedModel], X: Any, max_chunk_bytes: int, block_rows: int
) -> list[np.ndarray]:
    encoded: dict[str, np.ndarray] = {}

    def encode(model: PublishedModel) -> np.ndarray:
        key = model.schema_key
        if key not in encoded:
            encoded[key] = model.encode(X)
        return encoded[key]

    results: list[np.ndarray | None] = [None] * len(models)
    groups: dict[_ArchKey, list[tuple[int, MLPRunner]]] = {}
    for i, model in enumerate(models):
        runner = model._runner
        if isinstance(runner, MLPRunner):
            arch = runner.architecture
            key: _ArchKey = (tuple(arch.layer_sizes), arch.activation, arch.output_activation)
            groups.setdefault(key, []).append((i, runner))
        else:
            results[i] = runner.run(encode(model))
    for key, members in groups.items():
        rows = min(block_rows, encode(models[members[0][0]]).shape[0])
        chunk = max(1, max_chunk_bytes // max(rows * max(key[0]) * 4, 1))
        stacked = _stacked(key, [r for _, r in members])
        for start in range(0, len(members), chunk):
            part = members[start : start + chunk]
            inputs = [encode(models[i]) for i, _ in part]
            shared = all(z is inputs[0] for z in inputs)
            stack = stacked.part(start, start + len(part))
            out = stack.run(inputs[0] if shared else np.stack(inputs), block_rows=rows)
            for k, (i, _) in enumerate(part):
                results[i] = out[k]
    return [r for r in results if r is not None]


_ArchKey = tuple[tuple[int, ...], str, str]
_STACKS: OrderedDict[_ArchKey, tuple[tuple[MLPRunner, ...], MLPStack]] = OrderedDict()
"""The last stack built per architecture (a few architectures at most), with its networks."""
_STACKS_KEPT = 4
_STACKS_LOCK = threading.Lock()


def _stacked(key: _ArchKey, runners: Sequence[MLPRunner]) -> MLPStack:
    """An :class:`MLPStack` of ``runners``, reused while the same networks come in the same order.

    A subscriber runs the same subscribed networks on its fusion rows, then on every row it
    scores: stacking their weights (a copy of each, and a numpy call per array) is done once, not
    per call.  One stack is kept per architecture (:data:`_STACKS_KEPT` architectures), holding
    its networks so that they are the ones compared by identity; it costs one more copy of those
    networks' weights while kept.
    """
    with _STACKS_LOCK:
        kept = _STACKS.get(key)
    if kept is not None and len(kept[0]) == len(runners):
        if all(a is b for a, b in zip(kept[0], runners, strict=True)):
            return kept[1]
    stack = MLPStack(runners)
    with _STACKS_LOCK:
        _STACKS[key] = (tuple(runners), stack)
        _STACKS.move_to_end(key)
        while len(_STACKS) > _STACKS_KEPT:
            _STACKS.popitem(last=False)
    return stack
