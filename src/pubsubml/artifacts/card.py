"""The model card: the signed JSON description of a published model.

A :class:`ModelCard` says what a published model M^p computes (its ordered input features with their
public bounds and defaults, its task, classes and outputs), how it was made private (a
:class:`PrivacyRecord` of the DP events that actually ran), how its weights are stored (format,
architecture, SHA-256 digest) and who vouches for it (an Ed25519 signature over the canonical JSON
of the card).  Cards arrive from strangers, so every field is validated strictly, with size limits
on every string and list (pubsub-ml.txt §3.2: models are published and subscribed by metadata).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from pubsubml.artifacts.privacy_record import PrivacyRecord
from pubsubml.errors import UntrustedArtifactError
from pubsubml.schema import FeatureSchema

__all__ = [
    "MAX_CARD_BYTES",
    "MLPArchitecture",
    "ModelCard",
    "PrivacyRecord",
    "canonical_json",
    "derive_model_id",
]

MAX_CARD_BYTES = 1 << 20  # 1 MiB of JSON is far more than any honest card needs.
MAX_NAME = 128
MAX_TEXT = 1024
MAX_FEATURES = 4096
MAX_ENCODED = 65536
MAX_CATEGORIES = 4096
MAX_CLASSES = 1024
MAX_LAYERS = 64
MAX_UNITS = 65536

_PUBLISHER_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$")
_HEX64_RE = re.compile(r"^[0-9a-f]{64}$")
_MODEL_ID_RE = re.compile(r"^[0-9a-f]{32}$")
_B64_SIG_RE = re.compile(r"^[A-Za-z0-9+/]{86}==$")  # 64 bytes in standard base64
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")

Label = str | int | float


def derive_model_id(publisher: str, weights_sha256: str) -> str:
    """The model id: a digest of the publisher and the weights digest (32 hex characters).

    Publishing the same weights twice under the same publisher gives the same id, so publishing is
    idempotent.

    Examples
    --------
    >>> derive_model_id("site-a", "0" * 64) == derive_model_id("site-a", "0" * 64)
    True
    >>> len(derive_model_id("site-a", "0" * 64))
    32
    """
    text = f"pubsubml-model-id\x00{publisher}\x00{weights_sha256}".encode()
    return hashlib.sha256(text).hexdigest()[:32]


def canonical_json(data: Any) -> bytes:
    """Canonical JSON: sorted keys, no whitespace, UTF-8, no NaN/Infinity literals.

    Examples
    --------
    >>> canonical_json({"b": 1, "a": [1.5, "é"]})
    b'{"a":[1.5,"\\xc3\\xa9"],"b":1}'
    """
    text = json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def _check_text(value: str, what: str, limit: int = MAX_NAME) -> str:
    if not value or len(value) > limit:
        raise ValueError(f"{what} must have 1 to {limit} characters, got {len(value)}")
    if _CONTROL_RE.search(value):
        raise ValueError(f"{what} {value[:40]!r} contains control characters")
    return value


class MLPArchitecture(BaseModel):
    """Architecture of a fully connected network stored as safetensors.

    Parameters
    ----------
    layer_sizes : list of int
        ``[n_inputs, hidden_1, ..., n_outputs]``: layer ``i`` maps ``layer_sizes[i]`` to
        ``layer_sizes[i + 1]`` units with a weight of shape (out, in) and a bias of shape (out,).
    activation : {"tanh", "relu", "sigmoid"}
        Activation after every hidden layer.
    output_activation : {"softmax", "identity"}
        ``softmax`` for classifiers (outputs are probabilities), ``identity`` for regressors.

    Examples
    --------
    >>> MLPArchitecture(layer_sizes=[10, 100, 50, 2], activation="tanh",
    ...                 output_activation="softmax").n_layers
    3
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    layer_sizes: list[int] = Field(min_length=2, max_length=MAX_LAYERS + 1)
    activation: Literal["tanh", "relu", "sigmoid"]
    output_activation: Literal["softmax", "identity"]

    @field_validator("layer_sizes")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        bad = [s for s in v if not 1 <= s <= MAX_UNITS]
        if bad:
            raise ValueError(f"layer sizes must be in [1, {MAX_UNITS}], got {bad[:5]}")
        return v

    @property
    def n_layers(self) -> int:
        """Number of linear layers."""
        return len(self.layer_sizes) - 1

    def tensor_shapes(self) -> dict[str, tuple[int, ...]]:
        """Expected safetensors names and shapes: ``{i}.weight`` (out, in), ``{i}.bias`` (out,)."""
        shapes: dict[str, tuple[int, ...]] = {}
        for i, (n_in, n_out) in enumerate(
            zip(self.layer_sizes[:-1], self.layer_sizes[1:], strict=True)
        ):
            shapes[f"{i}.weight"] = (n_out, n_in)
            shapes[f"{i}.bias"] = (n_out,)
        return shapes


class ModelCard(BaseModel):
    """The signed description of one published model (see the module docstring).

    Parameters
    ----------
    card_version : 1
        Version of this format.
    model_id : str
        :func:`derive_model_id` of ``publisher`` and ``weights_sha256``.
    publisher : str
        Site name: a letter then letters, digits, ``_`` or ``-`` (at most 64 characters).
    task : {"classification", "regression"}
    classes : list or None
        Class labels in output order (classification), ``None`` for regression.
    input_schema : FeatureSchema
        The model's ordered input features with their public bounds and defaults.
    output : list of str
        Names of the outputs (one per class, or one for regression).
    privacy : PrivacyRecord
    created_at : datetime
        Creation time, timezone-aware UTC.
    format : {"onnx", "safetensors"}
    architecture : MLPArchitecture or None
        Required for safetensors, ``None`` for ONNX.
    defaulted_features : list of str or None
        The ``input_schema`` features the publisher did not hold: the model was trained with them
        constant at their public defaults (an explicit extension to the consortium's schema,
        pubsub-ml.txt §4 Step 3).  Channels match only the other ones (:attr:`trained_features`).
        ``None`` (left out of the JSON) when the model saw every input feature.
    weights_sha256 : str
        Lowercase hex SHA-256 of the weights bytes.
    signer_key_id : str or None
        Fingerprint of the signer's Ed25519 public key (``signing.key_id``).
    signature : str or None
        Base64 Ed25519 signature of :meth:`signing_payload`.

    Raises
    ------
    pydantic.ValidationError
        Any malformed or inconsistent field, with the reason.

    References
    ----------
    pubsub-ml.txt §3.2 (publish/subscribe on feature metadata; channels match ``input_schema``),
    §4 Step 3 (public defaults for feature extension).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    card_version: Literal[1] = 1
    model_id: str
    publisher: str
    task: Literal["classification", "regression"]
    classes: list[Label] | None = Field(default=None, max_length=MAX_CLASSES)
    input_schema: FeatureSchema
    output: list[str] = Field(min_length=1, max_length=MAX_CLASSES)
    privacy: PrivacyRecord
    created_at: datetime
    format: Literal["onnx", "safetensors"]
    architecture: MLPArchitecture | None = None
    defaulted_features: list[str] | None = Field(
        default=None, max_length=MAX_FEATURES, exclude_if=lambda v: v is None
    )
    weights_sha256: str
    signer_key_id: str | None = None
    signature: str | None = None

    @field_validator("publisher")
    @classmethod
    def _publisher(cls, v: str) -> str:
        if not _PUBLISHER_RE.match(v):
            raise ValueError(
                f"invalid publisher {v[:80]!r}: use a letter then letters, digits, '_' or '-' "
                "(at most 64 characters)"
            )
        return v

    @field_validator("weights_sha256", "signer_key_id")
    @classmethod
    def _hex64(cls, v: str | None) -> str | None:
        if v is not None and not _HEX64_RE.match(v):
            raise ValueError("must be 64 lowercase hexadecimal characters (a SHA-256 digest)")
        return v

    @field_validator("model_id")
    @classmethod
    def _model_id(cls, v: str) -> str:
        if not _MODEL_ID_RE.match(v):
            raise ValueError("model_id must be 32 lowercase hexadecimal characters")
        return v

    @field_validator("signature")
    @classmethod
    def _signature(cls, v: str | None) -> str | None:
        if v is not None and not _B64_SIG_RE.match(v):
            raise ValueError("signature must be the standard base64 of a 64-byte Ed25519 signature")
        return v

    @field_validator("created_at")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        if v.tzinfo is None or v.utcoffset() != timedelta(0):
            raise ValueError("created_at must be a timezone-aware UTC time (e.g. '...Z')")
        return v

    @field_validator("output")
    @classmethod
    def _outputs(cls, v: list[str]) -> list[str]:
        for name in v:
            _check_text(name, "output name", MAX_NAME + 32)  # room for "proba[<class label>]"
        if len(set(v)) != len(v):
            raise ValueError("output names must be unique")
        return v

    @field_validator("input_schema")
    @classmethod
    def _schema_limits(cls, v: FeatureSchema) -> FeatureSchema:
        if len(v) > MAX_FEATURES or v.n_encoded > MAX_ENCODED:
            raise ValueError(
                f"input schema too large: {len(v)} features / {v.n_encoded} encoded columns "
                f"(limits {MAX_FEATURES} / {MAX_ENCODED})"
            )
        for f in v:
            if len(f.description) > MAX_TEXT:
                raise ValueError(f"description of {f.name!r} exceeds {MAX_TEXT} characters")
            cats = f.categories or ()
            if len(cats) > MAX_CATEGORIES:
                raise ValueError(f"feature {f.name!r} has more than {MAX_CATEGORIES} categories")
            for c in (*cats, f.default):
                if isinstance(c, str):
                    _check_text(c, f"category of {f.name!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ModelCard:
        if self.model_id != derive_model_id(self.publisher, self.weights_sha256):
            raise ValueError("model_id does not match the publisher and weights_sha256")
        if self.task == "classification":
            if self.classes is None or len(self.classes) < 2:
                raise ValueError("a classification card needs at least two classes")
            for c in self.classes:
                if isinstance(c, str):
                    _check_text(c, "class label")
                elif isinstance(c, float) and not math.isfinite(c):
                    raise ValueError("class labels must be finite")
            if len(set(self.classes)) != len(self.classes):
                raise ValueError(f"class labels are not unique: {self.classes[:10]}")
            if len(self.output) != len(self.classes):
                raise ValueError(
                    f"a classifier has one output per class: {len(self.classes)} classes, "
                    f"{len(self.output)} outputs"
                )
        else:
            if self.classes is not None:
                raise ValueError("a regression card has classes = null")
            if len(self.output) != 1:
                raise ValueError(f"a regression card has one output, got {len(self.output)}")
        self._check_architecture()
        if self.defaulted_features is not None:
            names = set(self.input_schema.names)
            unknown = [f for f in self.defaulted_features if f not in names]
            if unknown or not self.defaulted_features:
                raise ValueError(
                    f"defaulted_features must be a non-empty list of input features, got "
                    f"{self.defaulted_features[:10]}"
                )
            if len(set(self.defaulted_features)) == len(names):
                raise ValueError("a model needs at least one feature it was trained on")
        if self.signature is not None and self.signer_key_id is None:
            raise ValueError("a signed card must name its signer_key_id")
        return self

    def _check_architecture(self) -> None:
        arch = self.architecture
        if self.format == "onnx":
            if arch is not None:
                raise ValueError(
                    "an ONNX card has architecture = null (the graph describes itself)"
                )
            return
        if arch is None:
            raise ValueError("a safetensors card needs its architecture")
        if arch.layer_sizes[0] != self.input_schema.n_encoded:
            raise ValueError(
                f"architecture input width {arch.layer_sizes[0]} differs from the schema's "
                f"encoded width {self.input_schema.n_encoded}"
            )
        if arch.layer_sizes[-1] != len(self.output):
            raise ValueError(
                f"architecture output width {arch.layer_sizes[-1]} differs from the "
                f"{len(self.output)} declared outputs"
            )
        want = "softmax" if self.task == "classification" else "identity"
        if arch.output_activation != want:
            raise ValueError(f"a {self.task} network needs output_activation {want!r}")

    # ---- serialization ------------------------------------------------------------------
    def signing_payload(self) -> bytes:
        """Canonical JSON of the card without its ``signature`` field: the bytes that are signed."""
        return canonical_json(self.model_dump(mode="json", exclude={"signature"}))

    def to_json(self) -> str:
        """Canonical JSON text of the whole card (signature included)."""
        return canonical_json(self.model_dump(mode="json")).decode("utf-8")

    @classmethod
    def from_json(cls, text: str | bytes, *, max_bytes: int = MAX_CARD_BYTES) -> ModelCard:
        """Parse and strictly validate a card received from anyone.

        Raises
        ------
        UntrustedArtifactError
            The text is larger than ``max_bytes``.
        pydantic.ValidationError
            Malformed JSON or any invalid field.
        """
        size = len(text.encode("utf-8")) if isinstance(text, str) else len(text)
        if size > max_bytes:
            raise UntrustedArtifactError(f"model card is {size} bytes, the limit is {max_bytes}")
        return cls.model_validate_json(text, strict=True)

    def replace(self, **changes: Any) -> ModelCard:
        """A validated copy with ``changes`` applied (``model_copy`` would skip validation)."""
        data = self.model_dump()
        data.update(changes)
        return type(self).model_validate(data)

    @property
    def input_features(self) -> list[str]:
        """Names of the input features, in the model's order."""
        return self.input_schema.names

    @property
    def trained_features(self) -> list[str]:
        """The input features the publisher held (channels match these), in the model's order."""
        defaulted = set(self.defaulted_features or ())
        return [n for n in self.input_schema.names if n not in defaulted]
