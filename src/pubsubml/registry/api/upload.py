"""Reading a publish request: a ``multipart/form-data`` body with a size limit while streaming.

Parts: ``card`` (the card's JSON), ``weights`` (the weights bytes) and optionally one or more
``visible_to`` (site names; a part may hold several names separated by commas).  The body is
counted as it arrives and the request fails with HTTP 413 as soon as it exceeds the limit
(immediately if ``Content-Length`` already says so), so an oversized upload is never buffered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import python_multipart
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header
from starlette.requests import Request

from pubsubml.artifacts.card import MAX_CARD_BYTES
from pubsubml.errors import DataValidationError, PayloadTooLargeError

__all__ = ["PublishForm", "read_publish_form"]

_FIELDS = ("card", "weights", "visible_to")
_MAX_PARTS = 64


@dataclass
class PublishForm:
    """The parts of a publish request."""

    card: bytes
    weights: bytes
    visible_to: list[str] | None = None


@dataclass
class _Collector:
    limit_per_field: dict[str, int]
    parts: dict[str, list[bytearray]] = field(default_factory=dict)
    header_name: bytes = b""
    header_value: bytes = b""
    disposition: bytes = b""
    current: bytearray | None = None
    current_name: str = ""
    n_parts: int = 0

    def on_part_begin(self) -> None:
        self.disposition = b""
        self.current = None
        self.n_parts += 1
        if self.n_parts > _MAX_PARTS:
            raise DataValidationError(f"too many form parts (at most {_MAX_PARTS})")

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        if self.header_name.lower() == b"content-disposition":
            self.disposition = self.header_value
        self.header_name = b""
        self.header_value = b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self.disposition)
        name = options.get(b"name", b"").decode("utf-8", "replace")
        if name not in _FIELDS:
            raise DataValidationError(
                f"unexpected form part {name[:40]!r}: send 'card', 'weights' and optionally "
                "'visible_to'"
            )
        if name in self.parts and name != "visible_to":
            raise DataValidationError(f"form part {name!r} was sent twice")
        self.current_name = name
        self.current = bytearray()
        self.parts.setdefault(name, []).append(self.current)

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        assert self.current is not None
        self.current.extend(data[start:end])
        limit = self.limit_per_field.get(self.current_name)
        if limit is not None and len(self.current) > limit:
            raise DataValidationError(f"form part {self.current_name!r} exceeds {limit} bytes")


async def _limited(request: Request, limit: int) -> AsyncIterator[bytes]:
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise PayloadTooLargeError(
                f"the upload exceeds the registry's limit of {limit} bytes; it was refused "
                "while streaming"
            )
        yield chunk


async def read_publish_form(request: Request, limit: int) -> PublishForm:
    """Parse a publish request body of at most ``limit`` bytes.

    Raises
    ------
    PayloadTooLargeError
        The body is (or declares to be) larger than ``limit``.
    DataValidationError
        Not multipart/form-data, malformed multipart, missing or unexpected parts.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(
            f"the upload declares {int(declared)} bytes, the registry's limit is {limit} bytes"
        )
    ctype, params = parse_options_header(request.headers.get("content-type", ""))
    if ctype != b"multipart/form-data" or b"boundary" not in params:
        raise DataValidationError(
            "publish expects multipart/form-data with parts 'card' (JSON) and 'weights' (bytes)"
        )
    collector = _Collector(limit_per_field={"card": MAX_CARD_BYTES, "visible_to": 64 * 1024})
    callbacks = {
        "on_part_begin": collector.on_part_begin,
        "on_part_data": collector.on_part_data,
        "on_header_field": collector.on_header_field,
        "on_header_value": collector.on_header_value,
        "on_header_end": collector.on_header_end,
        "on_headers_finished": collector.on_headers_finished,
    }
    parser = python_multipart.MultipartParser(params[b"boundary"], callbacks)  # type: ignore[arg-type]
    try:
        async for chunk in _limited(request, limit):
            parser.write(chunk)
        parser.finalize()
    except FormParserError as exc:
        raise DataValidationError(f"malformed multipart body: {exc}") from None
    parts = collector.parts
    missing = [n for n in ("card", "weights") if n not in parts]
    if missing:
        raise DataValidationError(f"publish request lacks the form part(s) {missing}")
    visible: list[str] | None = None
    if "visible_to" in parts:
        visible = [
            name.strip()
            for raw in parts["visible_to"]
            for name in bytes(raw).decode("utf-8", "replace").split(",")
            if name.strip()
        ]
    return PublishForm(
        card=bytes(parts["card"][0]), weights=bytes(parts["weights"][0]), visible_to=visible
    )
