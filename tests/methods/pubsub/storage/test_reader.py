"""Tests of pubsubml.methods.pubsub.storage.reader: a stored customized model is read back only
when every file, digest, signature and graph checks out."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from methods.pubsub.storage.conftest import _edit_manifest, _flip
from pubsubml.artifacts import generate_signing_key, key_id
from pubsubml.errors import DigestMismatchError, SignatureError, UntrustedArtifactError
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.storage import (
    MANIFEST_FILE,
    load_customizer,
)

pytestmark = pytest.mark.usefixtures("one_thread")


# ---- tampering and folders that are not stored models --------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "fusion.safetensors",
        "models/0/weights.safetensors",
        "models/1/weights.onnx",
        "models/0/card.json",
        "own/weights.onnx",
        "own/card.json",
    ],
)
def test_a_changed_byte_is_a_digest_mismatch(name: str, copied: Path) -> None:
    _flip(copied / name)

    with pytest.raises(DigestMismatchError, match="changed since the model was stored"):
        load_customizer(copied)


def test_changed_weights_with_an_updated_manifest_still_fail_the_signed_digest(
    copied: Path,
) -> None:
    name = "models/1/weights.onnx"
    _flip(copied / name)
    digest = hashlib.sha256((copied / name).read_bytes()).hexdigest()
    _edit_manifest(copied, lambda m: m["files"].__setitem__(name, digest))

    with pytest.raises(DigestMismatchError, match="the signed card says"):
        load_customizer(copied)


@pytest.mark.parametrize("name", ["models/0/card.json", "own/card.json"])
def test_an_edited_card_with_an_updated_manifest_fails_its_signature(
    name: str, copied: Path
) -> None:
    card = json.loads((copied / name).read_text(encoding="utf-8"))
    card["created_at"] = "2001-01-01T00:00:00Z"
    (copied / name).write_text(json.dumps(card), encoding="utf-8")
    digest = hashlib.sha256((copied / name).read_bytes()).hexdigest()
    _edit_manifest(copied, lambda m: m["files"].__setitem__(name, digest))

    with pytest.raises(SignatureError):
        load_customizer(copied)


def test_another_version_is_refused(copied: Path) -> None:
    _edit_manifest(copied, lambda m: m.__setitem__("version", 2))

    with pytest.raises(UntrustedArtifactError, match="version 2") as caught:
        load_customizer(copied)

    assert type(caught.value) is UntrustedArtifactError


@pytest.mark.parametrize("name", ["models/0/card.json", "fusion.safetensors", MANIFEST_FILE])
def test_a_symbolic_link_is_refused_even_to_the_same_bytes(
    name: str, copied: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes((copied / name).read_bytes())
    (copied / name).unlink()
    os.symlink(outside, copied / name)

    with pytest.raises(UntrustedArtifactError) as caught:
        load_customizer(copied)

    assert type(caught.value) is UntrustedArtifactError


@pytest.mark.parametrize("name", ["own/weights.onnx", "models/1/card.json", "fusion.safetensors"])
def test_a_missing_file_is_refused(name: str, copied: Path) -> None:
    (copied / name).unlink()

    with pytest.raises(UntrustedArtifactError, match="missing") as caught:
        load_customizer(copied)

    assert type(caught.value) is UntrustedArtifactError


@pytest.mark.parametrize("name", ["../outside.txt", "models/../../outside.txt", "/etc/hostname"])
def test_a_listed_path_outside_the_folder_is_refused(
    name: str, copied: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"outside")
    digest = hashlib.sha256(b"outside").hexdigest()
    _edit_manifest(copied, lambda m: m["files"].__setitem__(name, digest))

    with pytest.raises(UntrustedArtifactError, match="not a path inside the folder"):
        load_customizer(copied)


@pytest.mark.parametrize("outside", ["relative", "absolute"])
def test_a_model_folder_outside_the_stored_folder_is_refused(
    outside: str, copied: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("card.json", "weights.safetensors"):
        (elsewhere / name).write_bytes((copied / "models" / "0" / name).read_bytes())
    path = "../elsewhere" if outside == "relative" else str(elsewhere)
    _edit_manifest(copied, lambda m: m["models"][0].__setitem__("dir", path))

    with pytest.raises(UntrustedArtifactError):
        load_customizer(copied)


def test_folders_that_hold_no_stored_model_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / MANIFEST_FILE).write_text(json.dumps({"format": "something-else", "version": 1}))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / MANIFEST_FILE).write_bytes(b"{not json")
    a_file = tmp_path / "file"
    a_file.write_bytes(b"")

    with pytest.raises(FileNotFoundError):
        load_customizer(tmp_path / "absent")
    with pytest.raises(FileNotFoundError):
        load_customizer(a_file)
    with pytest.raises(UntrustedArtifactError, match="missing"):
        load_customizer(empty)
    with pytest.raises(UntrustedArtifactError, match="does not hold a stored customized model"):
        load_customizer(other)
    with pytest.raises(UntrustedArtifactError, match="not valid JSON"):
        load_customizer(broken)


def test_subscribed_models_are_verified_against_the_given_keys(
    world: dict[str, Any], stored: dict[str, tuple[Customizer, Path]]
) -> None:
    folder = stored["stacked"][1]
    other = generate_signing_key().public_key()

    with pytest.raises(SignatureError, match="not among the trusted keys"):
        load_customizer(folder, trusted_keys={key_id(other): other})
    loaded = load_customizer(folder, trusted_keys=world["keys"])

    assert loaded.selected_ids_ == stored["stacked"][0].selected_ids_


def test_no_trusted_key_fails_the_subscribed_models_signatures(
    stored: dict[str, tuple[Customizer, Path]],
) -> None:
    no_keys: dict[str, Ed25519PublicKey] = {}

    with pytest.raises(SignatureError):
        load_customizer(stored["stacked"][1], trusted_keys=no_keys)
