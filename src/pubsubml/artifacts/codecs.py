"""What every weights codec shares: payload sniffing, size limits, the runner interface, dispatch.

A published model's weights are bytes from a stranger.  Before a codec parses them,
:func:`reject_foreign_payload` names the usual dangerous impostors (a Python pickle, a zip archive
as written by ``torch.save``, a NumPy file) so the error says what was sent.  A codec
(:mod:`~pubsubml.artifacts.onnx_codec`, :mod:`~pubsubml.artifacts.safetensors_codec`) turns checked
bytes into a :class:`Runner`: a pure function from the encoded input matrix to the model outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pubsubml.errors import UntrustedArtifactError

__all__ = [
    "DEFAULT_MAX_WEIGHTS_BYTES",
    "DecodeOptions",
    "Runner",
    "describe_foreign_payload",
    "reject_foreign_payload",
]

DEFAULT_MAX_WEIGHTS_BYTES = 256 << 20  # 256 MiB

_MAGICS: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a zip archive (as written by torch.save or numpy.savez; may hold a pickle)"),
    (b"\x93NUMPY", "a NumPy .npy file"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"BZh", "bzip2-compressed data"),
)


# First opcodes of protocol 0/1 pickles: MARK, GLOBAL, EMPTY_LIST, EMPTY_DICT, BININT1, INT,
# STRING, UNICODE, NONE, BINUNICODE, EMPTY_TUPLE.  Only used to name a rejected payload.
_PROTOCOL0_FIRST = frozenset(b"(c]}KISVN)X")


def _is_pickle(data: bytes) -> bool:
    """True when ``data`` looks like a pickle: its header and its STOP opcode.

    Only the bytes are inspected (nothing is parsed or executed); the answer serves to name a
    payload that is refused anyway.
    """
    if len(data) < 2 or data[-1:] != b".":
        return False
    if data[0] == 0x80:  # PROTO opcode, protocols 2 to 5
        return 2 <= data[1] <= 5
    return data[0] in _PROTOCOL0_FIRST


def describe_foreign_payload(data: bytes) -> str | None:
    """Name ``data`` when it is a known non-weights format, else ``None``.

    Examples
    --------
    >>> describe_foreign_payload(b"\\x80\\x04K\\x01.")
    'a Python pickle (protocol 4)'
    >>> describe_foreign_payload(b"PK\\x03\\x04rest")[:13]
    'a zip archive'
    >>> describe_foreign_payload(b"\\x08\\x07") is None
    True
    """
    if _is_pickle(data):
        if data[:1] == b"\x80" and len(data) > 1:
            return f"a Python pickle (protocol {data[1]})"
        return "a Python pickle"
    for magic, name in _MAGICS:
        if data.startswith(magic):
            return name
    return None


def reject_foreign_payload(data: bytes, *, expected: str, max_bytes: int) -> None:
    """Raise unless ``data`` is bytes of acceptable size that are not a known foreign payload.

    Raises
    ------
    UntrustedArtifactError
        ``data`` is not bytes, is empty or larger than ``max_bytes``, or is a pickle, zip, …
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise UntrustedArtifactError(f"weights must be bytes, got {type(data).__name__}")
    size = len(data)
    if size == 0:
        raise UntrustedArtifactError("weights are empty")
    if size > max_bytes:
        raise UntrustedArtifactError(f"weights are {size} bytes, the limit is {max_bytes}")
    foreign = describe_foreign_payload(bytes(data))
    if foreign is not None:
        raise UntrustedArtifactError(
            f"weights are {foreign}, not {expected}; such payloads are never loaded"
        )


class Runner(Protocol):
    """A loaded model: encoded float32 inputs (n, n_inputs) → outputs (n, n_outputs)."""

    @property
    def n_inputs(self) -> int:
        """Width of the encoded input."""
        ...

    @property
    def n_outputs(self) -> int:
        """Number of outputs (classes, or 1 for regression)."""
        ...

    def run(self, Z: np.ndarray) -> np.ndarray:
        """Outputs of shape (n, n_outputs) for ``Z`` of shape (n, n_inputs), float32."""
        ...


@dataclass(frozen=True)
class DecodeOptions:
    """Limits and runtime settings for decoding weights.

    Attributes
    ----------
    max_bytes : int
        Largest accepted weights payload.
    intra_op_threads : int
        Threads per ONNX Runtime session (1 by default: many models are loaded at once).
    """

    max_bytes: int = DEFAULT_MAX_WEIGHTS_BYTES
    intra_op_threads: int = 1
