"""The registry client's wire format: error answers, multipart uploads, cards inside JSON.

The registry answers an error with a JSON body ``{"error": code, "detail": ...}``; the client
raises the :mod:`pubsubml.errors` class the server raised for that code
(:data:`~pubsubml.registry.error_codes.ERROR_CODES`).  A published model is uploaded as a multipart
body streamed in chunks (its card, who may see it, its weights), and a card received inside a JSON
document is strictly re-validated, since a subscriber trusts nothing it receives (pubsub-ml.txt
§3.2; published models are untrusted input).
"""

from __future__ import annotations

import functools
import json
import secrets
import ssl
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx

from pubsubml.artifacts.card import ModelCard
from pubsubml.errors import PubsubmlError, RegistryError
from pubsubml.registry.error_codes import ERROR_CODES

__all__ = ["Progress", "default_tls_context"]

Progress = Callable[[int], None]
_CHUNK = 256 * 1024
_RETRYABLE = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)


@functools.cache
def default_tls_context() -> ssl.SSLContext:
    """httpx's default certificate verification, built once per process.

    The same context ``httpx.Client()`` builds for itself (certifi's CA bundle, or
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` as read at the first call): building one loads the
    whole CA bundle, about 25 ms, which every new client paid even for plain-HTTP registries.
    httpx accepts a shared context through ``verify=`` ("SSL", httpx's documentation).

    Examples
    --------
    >>> ctx = default_tls_context()
    >>> ctx is default_tls_context(), ctx.check_hostname, ctx.verify_mode == ssl.CERT_REQUIRED
    (True, True, True)
    """
    return httpx.create_ssl_context()


_CODE_TO_ERROR: dict[str, type[PubsubmlError]] = {}
for _cls, _status, _code in ERROR_CODES:
    _CODE_TO_ERROR.setdefault(_code, _cls)


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
        code, detail = str(body.get("error", "")), str(body.get("detail", response.text))
    except (ValueError, AttributeError):
        code, detail = "", response.text[:500]
    cls = _CODE_TO_ERROR.get(code, RegistryError)
    raise cls(f"HTTP {response.status_code}: {detail}")


def _multipart(
    card_json: bytes, weights: bytes, visible_to: Sequence[str] | None, progress: Progress | None
) -> tuple[str, int, Callable[[], Iterator[bytes]]]:
    """A multipart body as a re-startable chunk generator, with its content type and length."""
    boundary = "pubsubml-" + secrets.token_hex(16)
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="card"\r\n'
        f"Content-Type: application/json\r\n\r\n"
    ).encode() + card_json
    if visible_to is not None:
        head += (
            f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="visible_to"\r\n\r\n'
            + ",".join(visible_to)
        ).encode()
    head += (
        f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="weights"; '
        f'filename="weights"\r\nContent-Type: application/octet-stream\r\n\r\n'
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def chunks() -> Iterator[bytes]:
        yield head
        for start in range(0, len(weights), _CHUNK):
            piece = weights[start : start + _CHUNK]
            yield piece
            if progress is not None:
                progress(len(piece))
        yield tail

    return f"multipart/form-data; boundary={boundary}", len(head) + len(weights) + len(tail), chunks


def _card(obj: Any) -> ModelCard:
    """Strictly re-validate a card received inside a JSON document."""
    return ModelCard.from_json(json.dumps(obj))


def _plain(label: Any) -> Any:
    return label.item() if hasattr(label, "item") else label
