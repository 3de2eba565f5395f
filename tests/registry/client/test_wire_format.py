"""Tests of pubsubml.registry.client.wire_format: error answers, multipart bodies, received cards."""

from __future__ import annotations

import json
import ssl
from email import message_from_bytes
from email.message import Message
from typing import Any

import httpx
import numpy as np
import pytest
from pydantic import ValidationError

from pubsubml.errors import PubsubmlError, RegistryError
from pubsubml.registry.api.errors import ERROR_CODES, error_response
from pubsubml.registry.client import RegistryClient
from pubsubml.registry.client.wire_format import (
    _CHUNK,
    _card,
    _multipart,
    _plain,
    _raise_for,
    default_tls_context,
)


@pytest.mark.parametrize(("cls", "status", "code"), ERROR_CODES, ids=[c for _, _, c in ERROR_CODES])
def test_each_error_answer_raises_the_servers_class(
    cls: type[PubsubmlError], status: int, code: str
) -> None:
    answer = error_response(status, code, "what went wrong")
    response = httpx.Response(answer.status_code, content=bytes(answer.body))
    with pytest.raises(cls) as info:
        _raise_for(response)
    assert type(info.value) is cls
    assert str(info.value) == f"HTTP {status}: what went wrong"


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (httpx.Response(418, json={"error": "teapot", "detail": "short"}), "HTTP 418: short"),
        (httpx.Response(500, text="Internal Server Error"), "HTTP 500: Internal Server Error"),
        (httpx.Response(502, json=["not", "an", "object"]), 'HTTP 502: ["not","an","object"]'),
        (httpx.Response(404, json={"error": "not_found"}), 'HTTP 404: {"error":"not_found"}'),
        (httpx.Response(503, text="x" * 600), "HTTP 503: " + "x" * 500),
    ],
)
def test_other_error_answers_raise_registry_error(response: httpx.Response, message: str) -> None:
    with pytest.raises(RegistryError) as info:
        _raise_for(response)
    if response.status_code != 404:
        assert type(info.value) is RegistryError
    assert str(info.value) == message


@pytest.mark.parametrize("status", [200, 201, 204, 304, 399])
def test_success_answers_raise_nothing(status: int) -> None:
    _raise_for(httpx.Response(status, json={"error": "not_found", "detail": "ignored"}))


def _parse(ctype: str, body: bytes) -> dict[str, Message]:
    message = message_from_bytes(f"Content-Type: {ctype}\r\n\r\n".encode() + body)
    assert message.is_multipart() and not message.defects
    return {
        part.get_param("name", header="content-disposition"): part for part in message.get_payload()
    }  # type: ignore[union-attr,misc]


def test_the_multipart_body_carries_card_visibility_and_weights() -> None:
    card = b'{"model_id": "m"}'
    weights = bytes(range(256)) * (2 * _CHUNK // 256 + 3)  # three chunks, the last one short
    ctype, length, chunks = _multipart(card, weights, ["b", "c"], None)
    pieces = list(chunks())
    body = b"".join(pieces)
    assert len(body) == length
    assert pieces[1:-1] == [weights[i : i + _CHUNK] for i in range(0, len(weights), _CHUNK)]
    parts = _parse(ctype, body)
    assert list(parts) == ["card", "visible_to", "weights"]
    assert parts["card"].get_payload(decode=True) == card
    assert parts["card"].get_content_type() == "application/json"
    assert parts["visible_to"].get_payload() == "b,c"
    assert parts["weights"].get_payload(decode=True) == weights
    assert parts["weights"].get_filename() == "weights"


def test_the_body_can_be_sent_again_and_reports_progress() -> None:
    seen: list[int] = []
    weights = b"\x01" * (_CHUNK + 10)
    ctype, length, chunks = _multipart(b"{}", weights, None, seen.append)
    first = b"".join(chunks())
    assert len(first) == length and seen == [_CHUNK, 10]
    assert b"".join(chunks()) == first  # a retry sends the same bytes
    assert seen == [_CHUNK, 10, _CHUNK, 10]
    assert list(_parse(ctype, first)) == ["card", "weights"]
    other_ctype, _, _ = _multipart(b"{}", weights, None, None)
    assert other_ctype != ctype  # a fresh boundary each time
    empty_ctype, empty_length, empty = _multipart(b"{}", b"", [], None)
    body = b"".join(empty())
    assert len(body) == empty_length
    parts = _parse(empty_ctype, body)
    assert parts["visible_to"].get_payload() == "" and parts["weights"].get_payload() == ""


def test_a_received_card_is_strictly_revalidated(artifacts: Any) -> None:
    card = artifacts("a", seed=800).card
    data = json.loads(card.to_json())
    assert _card(data) == card
    for changes in ({"unexpected": 1}, {"publisher": "../x"}, {"weights_sha256": "00"}):
        with pytest.raises(ValidationError):
            _card({**data, **changes})
    with pytest.raises(ValidationError):
        _card({**data, "privacy": {**data["privacy"], "epsilon": str(data["privacy"]["epsilon"])}})


def test_labels_are_sent_as_plain_json_values() -> None:
    labels = [_plain(x) for x in (np.int64(3), np.float32(0.5), np.str_("yes"), 2, "no")]
    assert labels == [3, 0.5, "yes", 2, "no"]
    assert [type(x) for x in labels] == [int, float, str, int, str]
    assert json.dumps(labels) == '[3, 0.5, "yes", 2, "no"]'


def test_clients_share_one_verifying_tls_context() -> None:
    ctx = default_tls_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.get_ca_certs() or ctx.cert_store_stats()["x509_ca"] > 0  # a CA bundle is loaded
    clients = [RegistryClient("https://127.0.0.1:9", "psm_x", retries=0) for _ in range(2)]
    try:
        pools = [c._http._transport._pool for c in clients]  # type: ignore[attr-defined]
        assert all(pool._ssl_context is ctx for pool in pools)
    finally:
        for c in clients:
            c.close()
