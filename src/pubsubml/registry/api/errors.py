"""HTTP answers for errors: every failure is JSON ``{"error": code, "detail": message}``.

The mapping from the :mod:`pubsubml.errors` hierarchy to status codes and codes is one table,
:data:`~pubsubml.registry.error_codes.ERROR_CODES` (re-exported here), which
:class:`~pubsubml.registry.client.RegistryClient` uses to map the codes back to the same exception
classes.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.exc import DataError, StatementError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from pubsubml.errors import PubsubmlError
from pubsubml.registry.error_codes import ERROR_CODES

__all__ = ["ERROR_CODES", "RejectNulBytes", "error_response", "install_error_handlers"]

log = logging.getLogger("pubsubml.registry")


def error_response(status: int, code: str, detail: str, **extra: Any) -> JSONResponse:
    """The JSON error answer."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if code == "busy":
        headers = {"Retry-After": "1"}
    return JSONResponse(
        {"error": code, "detail": detail, **extra}, status_code=status, headers=headers
    )


def _pubsubml_error(_request: Request, exc: Exception) -> JSONResponse:
    for cls, status, code in ERROR_CODES:
        if isinstance(exc, cls):
            return error_response(status, code, str(exc))
    log.exception("unmapped registry error", exc_info=exc)
    return error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")


def _summary(errors: list[Any]) -> str:
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        parts.append(f"{loc}: {e.get('msg', '')}" if loc else str(e.get("msg", "")))
    return "invalid request: " + "; ".join(parts)


def _request_validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError | ValidationError)
    errors = [
        {
            "loc": list(e.get("loc", ())),
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in exc.errors()
    ]
    return error_response(422, "validation_error", _summary(errors), errors=errors)


def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    codes = {404: "not_found", 405: "method_not_allowed", 401: "unauthenticated", 403: "forbidden"}
    return error_response(
        exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail)
    )


def _database_refused_value(_request: Request, exc: Exception) -> JSONResponse:
    """A value the database cannot hold (a NUL byte in text on PostgreSQL, an integer beyond
    BIGINT): bad input, answered 422; the transaction was rolled back, nothing changed."""
    assert isinstance(exc, StatementError)
    if isinstance(exc, DataError) or isinstance(exc.orig, OverflowError | ValueError):
        reason = str(exc.orig).splitlines()[0] if exc.orig is not None else type(exc).__name__
        return error_response(
            422, "validation_error", f"invalid request: the database refused a value ({reason})"
        )
    return _unexpected_error(_request, exc)


class RejectNulBytes:
    """ASGI middleware: a NUL byte in the path or the query string is refused with 422.

    No identifier, feature or cursor of the API may hold one, and PostgreSQL text cannot store
    one: refusing at the edge answers clearly instead of failing deep in a query.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            query = bytes(scope.get("query_string", b"")).lower()
            if "\x00" in str(scope.get("path", "")) or b"%00" in query or b"\x00" in query:
                response = error_response(
                    422, "validation_error", "invalid request: NUL bytes are not allowed"
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _unexpected_error(_request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error", exc_info=exc)
    return error_response(
        500, "internal_error", f"internal error ({type(exc).__name__}); nothing was changed"
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(Exception, _unexpected_error)
    app.add_exception_handler(PubsubmlError, _pubsubml_error)
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    app.add_exception_handler(ValidationError, _request_validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(StatementError, _database_refused_value)
    app.add_middleware(RejectNulBytes)
