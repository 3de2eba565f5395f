"""Ed25519 signatures over model cards.

A publisher signs the canonical JSON of its card (:meth:`ModelCard.signing_payload`, which covers the
weights digest), so a subscriber that trusts the publisher's public key knows the card and the
weights are the ones the publisher released (DESIGN.md, "Published models are untrusted input").
Keys are identified by the SHA-256 fingerprint of their raw 32 bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pubsubml.artifacts.card import ModelCard
from pubsubml.errors import SignatureError

__all__ = [
    "generate_signing_key",
    "key_id",
    "load_private_key",
    "public_key_from_base64",
    "public_key_from_bytes",
    "public_key_to_base64",
    "public_key_to_bytes",
    "save_private_key",
    "sign_card",
    "verify_card",
]


def generate_signing_key() -> Ed25519PrivateKey:
    """A fresh Ed25519 private key.

    Examples
    --------
    >>> len(public_key_to_bytes(generate_signing_key().public_key()))
    32
    """
    return Ed25519PrivateKey.generate()


def public_key_to_bytes(public_key: Ed25519PublicKey) -> bytes:
    """The raw 32-byte encoding of ``public_key``."""
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_from_bytes(data: bytes) -> Ed25519PublicKey:
    """Parse a raw 32-byte Ed25519 public key.

    Raises
    ------
    SignatureError
        ``data`` is not 32 bytes.
    """
    if not isinstance(data, bytes | bytearray) or len(data) != 32:
        raise SignatureError("an Ed25519 public key is exactly 32 raw bytes")
    return Ed25519PublicKey.from_public_bytes(bytes(data))


def public_key_to_base64(public_key: Ed25519PublicKey) -> str:
    """Standard base64 of the raw public key (44 characters)."""
    return base64.b64encode(public_key_to_bytes(public_key)).decode("ascii")


def public_key_from_base64(text: str) -> Ed25519PublicKey:
    """Parse :func:`public_key_to_base64` output.

    Raises
    ------
    SignatureError
        Not valid base64, or not 32 bytes once decoded.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise SignatureError(f"public key is not valid base64: {exc}") from None
    return public_key_from_bytes(raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """Fingerprint of a public key: lowercase hex SHA-256 of its raw bytes (64 characters).

    Examples
    --------
    >>> len(key_id(generate_signing_key().public_key()))
    64
    """
    return hashlib.sha256(public_key_to_bytes(public_key)).hexdigest()


def sign_card(card: ModelCard, private_key: Ed25519PrivateKey) -> ModelCard:
    """Return ``card`` signed by ``private_key`` (``signer_key_id`` and ``signature`` set).

    The signature covers every field but ``signature`` itself, ``signer_key_id`` included.

    Raises
    ------
    TypeError
        ``private_key`` is not an Ed25519 private key.
    """
    if not isinstance(private_key, Ed25519PrivateKey):
        raise TypeError(f"expected an Ed25519PrivateKey, got {type(private_key).__name__}")
    unsigned = card.replace(signer_key_id=key_id(private_key.public_key()), signature=None)
    signature = private_key.sign(unsigned.signing_payload())
    return unsigned.replace(signature=base64.b64encode(signature).decode("ascii"))


def verify_card(card: ModelCard, trusted_keys: Mapping[str, Ed25519PublicKey]) -> None:
    """Check that ``card`` carries a valid signature by one of ``trusted_keys``.

    Parameters
    ----------
    card : ModelCard
    trusted_keys : mapping of key id to Ed25519PublicKey
        The keys the caller trusts, keyed by :func:`key_id`.

    Raises
    ------
    SignatureError
        The card is unsigned, its signer is not trusted, the trusted key is filed under another
        key's id, or the signature does not match the card.
    """
    if card.signature is None or card.signer_key_id is None:
        raise SignatureError(f"model card {card.model_id} is not signed")
    public_key = trusted_keys.get(card.signer_key_id)
    if public_key is None:
        raise SignatureError(
            f"model card {card.model_id} is signed by key {card.signer_key_id[:16]}…, "
            "which is not among the trusted keys"
        )
    if key_id(public_key) != card.signer_key_id:
        raise SignatureError(
            f"the trusted key filed under {card.signer_key_id[:16]}… has another fingerprint"
        )
    signature = base64.b64decode(card.signature, validate=True)
    try:
        public_key.verify(signature, card.signing_payload())
    except InvalidSignature:
        raise SignatureError(
            f"signature of model card {card.model_id} does not match its content "
            "(the card was altered or signed by another key)"
        ) from None


def save_private_key(
    private_key: Ed25519PrivateKey, path: str | os.PathLike[str], *, password: bytes | None = None
) -> Path:
    """Write ``private_key`` as PKCS#8 PEM to a new file readable by its owner only (mode 0600).

    Raises
    ------
    FileExistsError
        ``path`` exists (a key is never overwritten).
    """
    encryption: serialization.KeySerializationEncryption = (
        serialization.NoEncryption()
        if password is None
        else serialization.BestAvailableEncryption(password)
    )
    pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    target = Path(path)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(target, 0o600)  # in case the umask removed owner bits
    return target


def load_private_key(
    path: str | os.PathLike[str], *, password: bytes | None = None
) -> Ed25519PrivateKey:
    """Read a key written by :func:`save_private_key`.

    Raises
    ------
    PermissionError
        The file is readable or writable by group or others.
    SignatureError
        The file does not hold an Ed25519 private key.
    """
    target = Path(path)
    mode = target.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PermissionError(
            f"private key {target} is accessible by group or others (mode {oct(mode & 0o777)}); "
            "run chmod 600 on it"
        )
    try:
        key = serialization.load_pem_private_key(target.read_bytes(), password=password)
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"{target} does not hold a readable private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"{target} holds a {type(key).__name__}, not an Ed25519 key")
    return key
