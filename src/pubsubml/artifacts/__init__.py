"""The model-exchange format: signed model cards, safe weights, verified published models.

Published models come from strangers (DESIGN.md, "Published models are untrusted input"): weights
travel as ONNX (any model type) or safetensors (pubsubml's own networks), never as pickles; every
card carries the SHA-256 digest of its weights and the publisher's Ed25519 signature; a subscriber
loads a model only through :meth:`PublishedModel.load`, which verifies both and runs the format's
safety checks (pubsub-ml.txt §3.2, §4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.artifacts.card import MLPArchitecture, ModelCard, derive_model_id
    from pubsubml.artifacts.export import Artifact, export_model, load_artifact, make_artifact
    from pubsubml.artifacts.privacy_record import PrivacyRecord, check_privacy_record
    from pubsubml.artifacts.published import PublishedModel, predict_many
    from pubsubml.artifacts.signing import (
        generate_signing_key,
        key_id,
        load_private_key,
        public_key_from_base64,
        public_key_from_bytes,
        public_key_to_base64,
        public_key_to_bytes,
        save_private_key,
        sign_card,
        verify_card,
    )

__all__ = [
    "Artifact",
    "MLPArchitecture",
    "ModelCard",
    "PrivacyRecord",
    "PublishedModel",
    "check_privacy_record",
    "derive_model_id",
    "export_model",
    "generate_signing_key",
    "key_id",
    "load_artifact",
    "load_private_key",
    "make_artifact",
    "predict_many",
    "public_key_from_base64",
    "public_key_from_bytes",
    "public_key_to_base64",
    "public_key_to_bytes",
    "save_private_key",
    "sign_card",
    "verify_card",
]

__getattr__, __dir__ = attach(__name__, __file__)
