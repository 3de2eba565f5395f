"""Ed25519 signing of model cards and key handling."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pubsubml.artifacts import (
    Artifact,
    PrivacyRecord,
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
from pubsubml.errors import SignatureError
from pubsubml.privacy.events import DPEvent


def test_signed_card_verifies(
    onnx_artifact: Artifact, trusted: dict[str, Ed25519PublicKey]
) -> None:
    verify_card(onnx_artifact.card, trusted)


def test_lowered_epsilon_breaks_the_signature(
    onnx_artifact: Artifact,
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    card = onnx_artifact.card
    event = DPEvent(mechanism="approx_dp", epsilon=2.0, delta=0.0)
    record = PrivacyRecord.from_events([event], epsilon=2.0, delta=0.0, accountant="pure")
    dp_card = sign_card(card.replace(privacy=record), signing_key)
    lowered = PrivacyRecord.from_events(
        [event.model_copy(update={"epsilon": 0.5})], epsilon=0.5, delta=0.0, accountant="pure"
    )

    tampered = dp_card.replace(privacy=lowered)

    verify_card(dp_card, trusted)
    with pytest.raises(SignatureError, match="does not match its content"):
        verify_card(tampered, trusted)


def test_unknown_signer_is_rejected(onnx_artifact: Artifact) -> None:
    stranger = generate_signing_key().public_key()

    with pytest.raises(SignatureError, match="not among the trusted keys"):
        verify_card(onnx_artifact.card, {key_id(stranger): stranger})


def test_card_resigned_by_a_stranger_is_rejected(
    onnx_artifact: Artifact, trusted: dict[str, Ed25519PublicKey]
) -> None:
    forged = sign_card(onnx_artifact.card, generate_signing_key())

    with pytest.raises(SignatureError, match="not among the trusted keys"):
        verify_card(forged, trusted)


def test_trusted_key_filed_under_another_id_is_rejected(
    onnx_artifact: Artifact, signing_key: Ed25519PrivateKey
) -> None:
    other = generate_signing_key().public_key()

    with pytest.raises(SignatureError, match="another fingerprint"):
        verify_card(onnx_artifact.card, {key_id(signing_key.public_key()): other})


def test_missing_signature_is_rejected(
    onnx_artifact: Artifact, trusted: dict[str, Ed25519PublicKey]
) -> None:
    with pytest.raises(SignatureError, match="not signed"):
        verify_card(onnx_artifact.card.replace(signature=None), trusted)


def test_signature_of_other_key_id_field_is_rejected(
    onnx_artifact: Artifact, signing_key: Ed25519PrivateKey
) -> None:
    other = generate_signing_key().public_key()
    relabelled = onnx_artifact.card.replace(signer_key_id=key_id(other))

    with pytest.raises(SignatureError, match="does not match its content"):
        verify_card(relabelled, {key_id(other): other})


def test_public_key_encodings_round_trip() -> None:
    public = generate_signing_key().public_key()

    assert key_id(public_key_from_bytes(public_key_to_bytes(public))) == key_id(public)
    assert key_id(public_key_from_base64(public_key_to_base64(public))) == key_id(public)
    with pytest.raises(SignatureError, match="32 raw bytes"):
        public_key_from_bytes(b"short")
    with pytest.raises(SignatureError, match="base64"):
        public_key_from_base64("%%%")


def test_private_key_file_is_owner_only_and_never_overwritten(tmp_path: Path) -> None:
    key = generate_signing_key()
    path = tmp_path / "site.pem"

    save_private_key(key, path)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert key_id(load_private_key(path).public_key()) == key_id(key.public_key())
    with pytest.raises(FileExistsError):
        save_private_key(generate_signing_key(), path)


def test_private_key_with_password(tmp_path: Path) -> None:
    key = generate_signing_key()
    path = save_private_key(key, tmp_path / "k.pem", password=b"secret")

    with pytest.raises(SignatureError, match="readable private key"):
        load_private_key(path, password=b"wrong")
    assert key_id(load_private_key(path, password=b"secret").public_key()) == key_id(
        key.public_key()
    )


def test_group_readable_private_key_is_refused(tmp_path: Path) -> None:
    path = save_private_key(generate_signing_key(), tmp_path / "k.pem")
    os.chmod(path, 0o644)

    with pytest.raises(PermissionError, match="chmod 600"):
        load_private_key(path)


def test_sign_card_needs_an_ed25519_key(onnx_artifact: Artifact) -> None:
    with pytest.raises(TypeError, match="Ed25519PrivateKey"):
        sign_card(onnx_artifact.card, "not a key")  # type: ignore[arg-type]
