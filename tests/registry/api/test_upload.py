"""Tests of pubsubml.registry.api.upload: parsing a publish request's multipart body under a
size limit."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from starlette.requests import Request

from pubsubml.artifacts.card import MAX_CARD_BYTES
from pubsubml.errors import DataValidationError, PayloadTooLargeError
from pubsubml.registry.api.upload import PublishForm, read_publish_form

BOUNDARY = "XyZ-boundary"
CTYPE = f"multipart/form-data; boundary={BOUNDARY}"

Part = tuple[str, bytes]


def _body(parts: Sequence[Part], *, boundary: str = BOUNDARY) -> bytes:
    out = b""
    for name, data in parts:
        filename = '; filename="w"' if name == "weights" else ""
        out += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"{filename}\r\n\r\n'
            ).encode()
            + data
            + b"\r\n"
        )
    return out + f"--{boundary}--\r\n".encode()


def _read(
    body: bytes,
    limit: int = 1 << 20,
    *,
    content_type: str = CTYPE,
    content_length: str | None = "auto",
    chunk: int = 7,
) -> tuple[PublishForm, int]:
    """Parse ``body`` sent in ``chunk``-byte pieces; also returns how many pieces were read."""
    headers = [(b"content-type", content_type.encode())]
    if content_length == "auto":
        headers.append((b"content-length", str(len(body)).encode()))
    elif content_length is not None:
        headers.append((b"content-length", content_length.encode()))
    pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)] or [b""]
    sent = 0

    async def receive() -> dict[str, object]:
        nonlocal sent
        if sent >= len(pieces):
            return {"type": "http.disconnect"}
        sent += 1
        return {"type": "http.request", "body": pieces[sent - 1], "more_body": sent < len(pieces)}

    scope = {"type": "http", "method": "POST", "path": "/v1/models", "headers": headers}
    form = asyncio.run(read_publish_form(Request(scope, receive), limit))
    return form, sent


def _read_error(body: bytes, limit: int = 1 << 20, **kwargs: object) -> tuple[Exception, int]:
    sent = 0
    try:
        _, sent = _read(body, limit, **kwargs)  # type: ignore[arg-type]
    except (DataValidationError, PayloadTooLargeError) as exc:
        return exc, sent
    raise AssertionError("no error")


def test_card_and_weights_are_returned_byte_for_byte() -> None:
    weights = bytes(range(256)) * 3 + b"\r\n--" + BOUNDARY[:-1].encode()  # boundary-like bytes
    body = _body([("card", b'{"a": 1}'), ("weights", weights)])

    form, _ = _read(body)

    assert form == PublishForm(card=b'{"a": 1}', weights=weights, visible_to=None)


def test_the_order_of_the_parts_does_not_matter() -> None:
    form, _ = _read(_body([("weights", b"w"), ("card", b"c")]))

    assert (form.card, form.weights) == (b"c", b"w")


def test_visible_to_joins_parts_and_comma_separated_names() -> None:
    parts = [
        ("visible_to", b" b , c,,"),
        ("card", b"{}"),
        ("visible_to", b"d"),
        ("weights", b"w"),
        ("visible_to", b" , "),
    ]

    form, _ = _read(_body(parts))

    assert form.visible_to == ["b", "c", "d"]


def test_an_empty_visible_to_part_means_nobody_else() -> None:
    form, _ = _read(_body([("card", b"{}"), ("weights", b"w"), ("visible_to", b"")]))

    assert form.visible_to == []


def test_a_body_of_exactly_the_limit_is_accepted() -> None:
    body = _body([("card", b"{}"), ("weights", b"w" * 100)])

    form, _ = _read(body, limit=len(body))

    assert form.weights == b"w" * 100


def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    body = _body([("card", b"{}"), ("weights", b"w" * 100)])

    exc, sent = _read_error(body, limit=len(body) - 1)

    assert isinstance(exc, PayloadTooLargeError)
    assert f"declares {len(body)} bytes" in str(exc) and sent == 0


@pytest.mark.parametrize("declared", [None, "10", "not-a-number"])
def test_the_streamed_length_is_enforced_whatever_the_header_says(declared: str | None) -> None:
    body = _body([("card", b"{}"), ("weights", b"w" * 1000)])

    exc, _ = _read_error(body, limit=200, content_length=declared)

    assert isinstance(exc, PayloadTooLargeError) and "while streaming" in str(exc)


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "multipart/form-data", "multipart/mixed; boundary=XyZ-boundary", ""],
)
def test_anything_but_multipart_form_data_with_a_boundary_is_refused(content_type: str) -> None:
    body = _body([("card", b"{}"), ("weights", b"w")])

    exc, _ = _read_error(body, content_type=content_type)

    assert isinstance(exc, DataValidationError) and "multipart/form-data" in str(exc)


@pytest.mark.parametrize("name", ["card", "weights"])
def test_a_part_sent_twice_is_refused(name: str) -> None:
    body = _body([("card", b"{}"), ("weights", b"w"), (name, b"again")])

    exc, _ = _read_error(body)

    assert isinstance(exc, DataValidationError) and f"{name!r} was sent twice" in str(exc)


def test_too_many_parts_are_refused() -> None:
    parts = [("card", b"{}"), ("weights", b"w"), *[("visible_to", b"b")] * 63]

    exc, _ = _read_error(_body(parts))

    assert isinstance(exc, DataValidationError) and "too many form parts" in str(exc)
    assert _read(_body(parts[:-1]))[0].visible_to == ["b"] * 62


def test_an_oversized_card_is_refused_while_streaming() -> None:
    card = b"{" + b" " * MAX_CARD_BYTES + b"}"
    body = _body([("card", card), ("weights", b"w")])

    exc, sent = _read_error(body, limit=4 << 20, chunk=64 * 1024)

    assert isinstance(exc, DataValidationError) and "'card' exceeds" in str(exc)
    assert sent < len(body) // (64 * 1024)


def test_an_oversized_visible_to_part_is_refused() -> None:
    names = b",".join(b"site%d" % i for i in range(10_000))
    assert len(names) > 64 * 1024

    exc, _ = _read_error(_body([("card", b"{}"), ("weights", b"w"), ("visible_to", names)]))

    assert isinstance(exc, DataValidationError) and "'visible_to' exceeds" in str(exc)


def test_weights_are_limited_only_by_the_body_limit() -> None:
    weights = b"\x00" * (MAX_CARD_BYTES + 1)

    form, _ = _read(_body([("card", b"{}"), ("weights", weights)]), limit=4 << 20, chunk=1 << 16)

    assert len(form.weights) == MAX_CARD_BYTES + 1


def test_a_part_without_a_name_is_refused() -> None:
    body = (
        f"--{BOUNDARY}\r\nContent-Disposition: form-data\r\n\r\nx\r\n--{BOUNDARY}--\r\n"
    ).encode()

    exc, _ = _read_error(body)

    assert isinstance(exc, DataValidationError) and "unexpected form part ''" in str(exc)


@pytest.mark.parametrize(
    "body",
    [b"this is not a multipart body at all", f"--{BOUNDARY}\r\nno-colon\r\n\r\n".encode()],
)
def test_a_malformed_body_is_refused(body: bytes) -> None:
    exc, _ = _read_error(body)

    assert isinstance(exc, DataValidationError)
    assert str(exc).startswith("malformed multipart body: ")


def test_an_empty_body_lacks_both_parts() -> None:
    exc, _ = _read_error(b"")

    assert isinstance(exc, DataValidationError)
    assert "['card', 'weights']" in str(exc)
