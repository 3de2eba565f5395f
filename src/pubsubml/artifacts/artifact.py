"""An artifact: a signed model card and its weights, kept on disk without pickle.

The publisher's release of pubsub-ml.txt Algorithm 3 line 2 is a model card (the model's public
schema, outputs, DP record and weights digest, signed with the publisher's Ed25519 key) and the
weights it describes.  :func:`make_artifact` describes, digests and signs encoded weights;
:meth:`Artifact.save` / :func:`load_artifact` keep an artifact as ``card.json`` +
``weights.onnx`` or ``weights.safetensors``, written atomically and read back with size limits
and without following symbolic links (published models are untrusted input, §3.2).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pubsubml.artifacts.card import (
    MAX_CARD_BYTES,
    Label,
    MLPArchitecture,
    ModelCard,
    derive_model_id,
)
from pubsubml.artifacts.codecs import DEFAULT_MAX_WEIGHTS_BYTES
from pubsubml.artifacts.privacy_record import PrivacyRecord
from pubsubml.artifacts.published import PublishedModel
from pubsubml.artifacts.signing import key_id, sign_card
from pubsubml.errors import UntrustedArtifactError
from pubsubml.schema import FeatureSchema

__all__ = [
    "CARD_FILE",
    "WEIGHTS_FILES",
    "Artifact",
    "load_artifact",
    "make_artifact",
    "read_limited",
]

CARD_FILE = "card.json"
WEIGHTS_FILES: Mapping[str, str] = {"onnx": "weights.onnx", "safetensors": "weights.safetensors"}


@dataclass(frozen=True)
class Artifact:
    """A signed model card and the weights it describes.

    Attributes
    ----------
    card : ModelCard
    weights : bytes
    """

    card: ModelCard
    weights: bytes

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``card.json`` and the weights file into ``directory`` atomically.

        Each file is written to a temporary name, flushed to disk and renamed; the weights go
        first so a present ``card.json`` always has its weights.

        Returns
        -------
        Path
            The directory.
        """
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        _write_atomic(target / WEIGHTS_FILES[self.card.format], self.weights)
        _write_atomic(target / CARD_FILE, self.card.to_json().encode("utf-8"))
        fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return target

    def open(self, trusted_keys: Mapping[str, Ed25519PublicKey], **options: Any) -> PublishedModel:
        """Verify and load this artifact (:meth:`PublishedModel.load`)."""
        return PublishedModel.load(self.card, self.weights, trusted_keys, **options)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_limited(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most ``limit``, without following a symbolic link.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    UntrustedArtifactError
        A link, not a regular file, or larger than ``limit``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP for a symbolic link
        raise UntrustedArtifactError(f"cannot open {path.name} safely: {exc}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise UntrustedArtifactError(f"{path.name} is not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise UntrustedArtifactError(f"{path.name} is larger than the limit of {limit} bytes")
    return data


def load_artifact(
    directory: str | os.PathLike[str],
    *,
    max_card_bytes: int = MAX_CARD_BYTES,
    max_weights_bytes: int = DEFAULT_MAX_WEIGHTS_BYTES,
) -> Artifact:
    """Read an artifact written by :meth:`Artifact.save` (nothing is verified or run yet).

    Raises
    ------
    FileNotFoundError
        ``card.json`` or the weights file is missing.
    UntrustedArtifactError
        A file is too large, a symbolic link or not a regular file.
    pydantic.ValidationError
        ``card.json`` is malformed.
    """
    source = Path(directory)
    card = ModelCard.from_json(read_limited(source / CARD_FILE, max_card_bytes))
    weights = read_limited(source / WEIGHTS_FILES[card.format], max_weights_bytes)
    return Artifact(card=card, weights=weights)


# ---- building cards ----------------------------------------------------------------------
def make_artifact(
    weights: bytes,
    *,
    format: Literal["onnx", "safetensors"],
    publisher: str,
    schema: FeatureSchema,
    classes: Sequence[Label] | None,
    privacy: PrivacyRecord,
    signing_key: Ed25519PrivateKey,
    architecture: MLPArchitecture | None = None,
    created_at: datetime | None = None,
    defaulted_features: Sequence[str] | None = None,
) -> Artifact:
    """Describe, digest and sign already-encoded weights.

    ``classes=None`` makes a regression card; ``defaulted_features`` names the ``schema``
    features the publisher did not hold (constant at their public defaults in training).

    Raises
    ------
    pydantic.ValidationError
        An inconsistent card (e.g. architecture and schema widths differ).
    """
    digest = hashlib.sha256(weights).hexdigest()
    card = ModelCard(
        model_id=derive_model_id(publisher, digest),
        publisher=publisher,
        task="regression" if classes is None else "classification",
        classes=None if classes is None else list(classes),
        input_schema=schema,
        output=["prediction"] if classes is None else [f"proba[{c}]" for c in classes],
        privacy=privacy,
        created_at=created_at or datetime.now(UTC),
        format=format,
        architecture=architecture,
        defaulted_features=list(defaulted_features) if defaulted_features else None,
        weights_sha256=digest,
        signer_key_id=key_id(signing_key.public_key()),
    )
    return Artifact(card=sign_card(card, signing_key), weights=bytes(weights))
