"""Tests of pubsubml.artifacts.codecs: naming and refusing foreign weight payloads."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import lzma
import pickle
from typing import Any

import pytest

from pubsubml.artifacts.codecs import (
    DecodeOptions,
    describe_foreign_payload,
    reject_foreign_payload,
)
from pubsubml.errors import UntrustedArtifactError

_CONTAINER = {"weights": [1, 2, 3], "bias": (0, 1)}


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_binary_pickles_are_named_with_their_protocol(protocol: int) -> None:
    data = pickle.dumps(_CONTAINER, protocol=protocol)

    assert describe_foreign_payload(data) == f"a Python pickle (protocol {protocol})"


@pytest.mark.parametrize("protocol", [0, 1])
@pytest.mark.parametrize("obj", [_CONTAINER, [1, 2], (1, "a"), None, 7], ids=repr)
def test_text_era_pickles_are_named(protocol: int, obj: object) -> None:
    data = pickle.dumps(obj, protocol=protocol)

    assert describe_foreign_payload(data) == "a Python pickle"


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (gzip.compress(b"weights"), "gzip-compressed data"),
        (lzma.compress(b"weights"), "xz-compressed data"),
        (bz2.compress(b"weights"), "bzip2-compressed data"),
        (b"\x89HDF\r\n\x1a\n" + b"\x00" * 32, "an HDF5 file"),
    ],
    ids=["gzip", "xz", "bzip2", "hdf5"],
)
def test_compressed_and_container_formats_are_named(data: bytes, name: str) -> None:
    assert describe_foreign_payload(data) == name


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b".",
        b"\x80\x06K\x01.",  # an unknown pickle protocol
        b"\x80\x04K\x01",  # a pickle header without its STOP opcode
        b"(weights without a stop",
        b"\x08\x07\x12\x04onnx",
    ],
)
def test_other_bytes_are_not_named(data: bytes) -> None:
    assert describe_foreign_payload(data) is None


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_acceptable_payloads_pass_at_the_size_limit(kind: type) -> None:
    data = kind(b"\x08\x07" + b"\x00" * 14)

    reject_foreign_payload(data, expected="an ONNX model", max_bytes=16)


@pytest.mark.parametrize("value", ["\x08\x07text", [8, 7], None, 42])
def test_non_bytes_are_refused_with_their_type(value: Any) -> None:
    with pytest.raises(UntrustedArtifactError, match=f"got {type(value).__name__}"):
        reject_foreign_payload(value, expected="an ONNX model", max_bytes=1 << 20)


def test_one_byte_over_the_limit_is_refused() -> None:
    with pytest.raises(UntrustedArtifactError, match="17 bytes, the limit is 16"):
        reject_foreign_payload(b"\x08" * 17, expected="an ONNX model", max_bytes=16)


def test_empty_payload_is_refused() -> None:
    with pytest.raises(UntrustedArtifactError, match="empty"):
        reject_foreign_payload(memoryview(b""), expected="an ONNX model", max_bytes=16)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_foreign_payload_is_refused_with_what_was_expected(kind: type) -> None:
    data = kind(pickle.dumps([1, 2], protocol=4))

    with pytest.raises(
        UntrustedArtifactError,
        match=r"a Python pickle \(protocol 4\), not a safetensors file; such payloads are never",
    ):
        reject_foreign_payload(data, expected="a safetensors file", max_bytes=1 << 20)


def test_decode_options_are_immutable() -> None:
    options = DecodeOptions(max_bytes=10, intra_op_threads=2)

    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_bytes = 1 << 40  # type: ignore[misc]
    assert dataclasses.replace(options, intra_op_threads=1) == DecodeOptions(max_bytes=10)
