"""The registry client's wire format: error answers, multipart uploads, cards inside JSON.

The registry answers an error with a JSON body ``{"error": code, "detail": ...}``; the client
raises the :mod:`pubsubml.errors` class the server raised for that code
(:data:`~pubsubml.registry.error_codes.ERROR_CODES`), and
:class:`~pubsubml.errors.RegistryUnreachableError` when no answer came (connection refused,
unknown host, timeout, connection lost).  A published model is uploaded as a multipart
body streamed in chunks (its card, who may see it, its weights), and a card received inside a JSON
document is strictly re-validated, since a subscriber trusts nothing it receives (pubsub-ml.txt
§3.2; published models are untrusted input).
"""

from __future__ import annotations

import functools
import json
import re
import secrets
import ssl
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx

from pubsubml.artifacts.card import ModelCard
from pubsubml.errors import PubsubmlError, RegistryError, RegistryUnreachableError
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


#: Transport errors raised before the request could reach the registry.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)
_ERRNO = re.compile(r"^\[Errno -?\d+\]\s*")


def _reason(exc: httpx.TransportError, timeout: float | None) -> str:
    """A short lower-case reason for a transport error, e.g. ``"connection refused"``."""
    after = "" if timeout is None else f" after {timeout:g} s"
    if isinstance(exc, httpx.ConnectTimeout | httpx.ReadTimeout):
        return f"timed out{after}"
    if isinstance(exc, httpx.WriteTimeout):
        return f"timed out{after} sending the request"
    if isinstance(exc, httpx.PoolTimeout):
        return f"no free connection{after}"
    text = _ERRNO.sub("", " ".join(str(exc).split())) or type(exc).__name__
    return text[:1].lower() + text[1:]


def _unreachable(
    base_url: str, method: str, exc: httpx.TransportError, timeout: float | None
) -> RegistryUnreachableError:
    """The :class:`~pubsubml.errors.RegistryUnreachableError` for a request that got no answer.

    Parameters
    ----------
    base_url : str
        The registry's base URL, named in the message.
    method : str
        The HTTP method: a request other than ``GET`` that may have been sent may have been
        carried out, and the message says so.
    exc : httpx.TransportError
        What httpx raised.
    timeout : float, optional
        The request's timeout in seconds, named when it ran out.

    Returns
    -------
    RegistryUnreachableError
        With a one-line message; ``sent`` is ``False`` when no connection was opened.

    Examples
    --------
    >>> request = httpx.Request("GET", "http://127.0.0.1:9/v1/health")
    >>> refused = httpx.ConnectError("[Errno 111] Connection refused", request=request)
    >>> print(_unreachable("http://127.0.0.1:9", "GET", refused, 30.0))
    cannot reach the registry at http://127.0.0.1:9 (connection refused)
    >>> late = _unreachable("http://127.0.0.1:9", "POST", httpx.ReadTimeout("x"), 30.0)
    >>> late.sent
    True
    >>> print(late)
    the registry at http://127.0.0.1:9 did not answer (timed out after 30 s); the POST request may have been carried out
    """
    reason = _reason(exc, timeout)
    if isinstance(exc, _NOT_SENT):
        return RegistryUnreachableError(
            f"cannot reach the registry at {base_url} ({reason})",
            url=base_url,
            reason=reason,
            sent=False,
        )
    message = f"the registry at {base_url} did not answer ({reason})"
    if method.upper() not in ("GET", "HEAD"):
        message += f"; the {method.upper()} request may have been carried out"
    return RegistryUnreachableError(message, url=base_url, reason=reason, sent=True)


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
