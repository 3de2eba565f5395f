"""The learner of Algorithm 1 as a FastAPI application served by uvicorn on 127.0.0.1.

The learner is the only server; data owners (:mod:`~pubsubml.methods.async_dp.peers_client`) are
clients that post to it when their own Poisson clock fires.  FastAPI checks every message against
its strict model (:mod:`~pubsubml.methods.async_dp.peers_protocol`) before the learner acts on it.
A request that fails a check (not JSON, another field, a wrong type, NaN or ∞, a gradient of the
wrong length, an unknown owner or ticket, a body over 64 KiB) gets a 4xx JSON reply
``{"status": "error", "detail": ...}`` and changes nothing: an open query stays open.  Every message
the learner receives as JSON is appended to an audit file, rejected ones included.

The handlers are ``async`` and never await, so they run one at a time on uvicorn's event loop: the
learner's state needs no lock, and the audit file lists messages in the order the learner acted on
them.

Styles (§3): ``request`` — the learner serves the first owner that asks while it is idle;
``broadcast`` — the learner opens a query round every ``broadcast_interval_s`` seconds once idle,
and the first owner whose clock fires while a round is open answers it.

References
----------
async-dp-cost-of-privacy.txt §3 (communication styles, Poisson clocks, Algorithm 1 lines 3–8).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import uvicorn
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pubsubml.errors import DataValidationError, PubsubmlError
from pubsubml.methods.async_dp.learner import AsyncDPLearner
from pubsubml.methods.async_dp.peers_protocol import (
    LOOPBACK,
    MAX_BODY_BYTES,
    AnswerMessage,
    RefuseMessage,
    RegisterMessage,
    RequestMessage,
)

__all__ = ["LearnerState", "create_learner_app", "serve_learner"]


class LearnerState:
    """The learner's side: Algorithm 1 state plus the lease of the owner being served.

    Parameters
    ----------
    cfg : dict
        ``n_owners``, ``n_features``, ``horizon``, ``reg``, ``theta_max``, ``rho``, ``style``,
        ``clock_unit_s``, ``broadcast_interval_s``, ``lease_s`` and ``audit_path`` (as written by
        :func:`~pubsubml.methods.async_dp.peers.run_async_dp_processes`).

    Notes
    -----
    Only one owner is served at a time (§3: "the learner only communicates with that data owner
    until the update is over"): a query opens a lease (owner, ticket, θ̂_k, expiry) and the
    owner's answer or refusal closes it; a lease older than ``lease_s`` seconds is dropped, so an
    owner that vanished mid-update does not block the others.  A message that does not fit the
    state (unknown owner, no open query for its ticket, a gradient of the wrong length) raises
    :class:`~pubsubml.errors.DataValidationError` and changes nothing.
    """

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.sizes: dict[int, int] = {}
        self.learner: AsyncDPLearner | None = None
        self.lease: tuple[int, int, np.ndarray, float] | None = None  # owner, ticket, θ̂, expiry
        self.round_open = False
        self.tickets = 0
        self.start = 0.0
        self.history: list[tuple[int, float]] = []
        self.done = asyncio.Event()
        self.audit = Path(cfg["audit_path"]).open("a")

    def record(self, path: str, body: Any) -> None:
        """Append one received message to the audit file."""
        self.audit.write(json.dumps({"path": path, "body": body}) + "\n")
        self.audit.flush()

    def _check_owner(self, owner: int) -> None:
        if not 0 <= owner < self.cfg["n_owners"]:
            raise DataValidationError(f"unknown owner {owner!r}")

    def register(self, owner: int, n_records: int) -> dict[str, Any]:
        """Store n_i; once every owner has registered, start Algorithm 1 (θ_L = θ_i = 0)."""
        self._check_owner(owner)
        self.sizes[owner] = n_records
        if self.learner is None and len(self.sizes) == self.cfg["n_owners"]:
            self.learner = AsyncDPLearner(
                n_records=[self.sizes[i] for i in range(self.cfg["n_owners"])],
                n_features=self.cfg["n_features"],
                horizon=self.cfg["horizon"],
                reg=self.cfg["reg"],
                theta_max=self.cfg["theta_max"],
                rho=self.cfg["rho"],
            )
            self.start = time.monotonic()
        return {"status": "ok"}

    def _running(self, owner: int) -> AsyncDPLearner | dict[str, Any]:
        """The learner if it takes queries now, else the reply that says why not."""
        self._check_owner(owner)
        if self.done.is_set():
            return {"status": "done"}
        if self.learner is None:
            return {"status": "wait"}
        if self.lease is not None and time.monotonic() > self.lease[3]:
            self.lease = None  # the owner vanished mid-update: free the learner
        return self.learner

    def request(self, owner: int) -> dict[str, Any]:
        """Open a query θ̂_k (Eq. 6) for ``owner`` if the learner is idle (and a round is open)."""
        learner = self._running(owner)
        if not isinstance(learner, AsyncDPLearner):
            return learner
        if self.lease is not None or (self.cfg["style"] == "broadcast" and not self.round_open):
            return {"status": "wait"}
        self.round_open = False
        self.tickets += 1
        theta_hat = learner.query(owner)
        self.lease = (owner, self.tickets, theta_hat, time.monotonic() + self.cfg["lease_s"])
        return {"status": "query", "ticket": self.tickets, "theta": theta_hat.tolist()}

    def _open_query(self, owner: int, ticket: int) -> np.ndarray:
        if self.lease is None or (owner, ticket) != self.lease[:2]:
            raise DataValidationError("no open query for this owner and ticket")
        return self.lease[2]

    def answer(self, owner: int, ticket: int, gradient: list[float]) -> dict[str, Any]:
        """Apply Eq. 5 and Eq. 7 with the owner's noisy gradient and close its query."""
        learner = self._running(owner)
        if not isinstance(learner, AsyncDPLearner):
            return learner
        theta_hat = self._open_query(owner, ticket)
        if len(gradient) != learner.n_features:
            raise DataValidationError(
                f"gradient must have length {learner.n_features}, got {len(gradient)}"
            )
        learner.update(owner, theta_hat, np.asarray(gradient, dtype=np.float64))
        self.lease = None
        self.history.append((owner, (time.monotonic() - self.start) / self.cfg["clock_unit_s"]))
        if learner.iteration >= self.cfg["horizon"]:
            self.done.set()
        return {"status": "ok"}

    def refuse(self, owner: int, ticket: int) -> dict[str, Any]:
        """Close the owner's query without an update."""
        learner = self._running(owner)
        if not isinstance(learner, AsyncDPLearner):
            return learner
        self._open_query(owner, ticket)
        self.lease = None
        return {"status": "ok"}

    async def open_rounds(self) -> None:
        """Broadcast style: open a query round every interval while idle, until done."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.done.wait(), self.cfg["broadcast_interval_s"])
                return
            if self.learner is not None and self.lease is None:
                self.round_open = True

    def result(self) -> dict[str, Any]:
        """Close the audit file; θ_L, k and the (i_k, t_k) of every update, as JSON values."""
        self.audit.close()
        learner = self.learner
        return {
            "theta_learner": None if learner is None else learner.theta_learner.tolist(),
            "iterations": 0 if learner is None else learner.iteration,
            "owners": [o for o, _ in self.history],
            "times": [t for _, t in self.history],
        }


def _error(status_code: int, detail: str) -> JSONResponse:
    return JSONResponse({"status": "error", "detail": detail}, status_code=status_code)


class _BodyLimit:
    """Answer 413 in JSON to a request whose body is over ``max_body_size`` bytes, before the app
    sees any of it.

    A declared ``Content-Length`` over the limit is refused before a byte is read; a chunked body
    is read into memory as it arrives (at most the limit plus one chunk) and refused as soon as
    its bytes pass the limit; a body within the limit is handed to the app as one message.
    """

    def __init__(self, app: ASGIApp, max_body_size: int) -> None:
        self.app = app
        self.max_body_size = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_size:
            detail = f"body of {declared} bytes is over {self.max_body_size}"
            await _error(413, detail)(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_size:
                detail = f"Content Too Large: body is over {self.max_body_size} bytes"
                await _error(413, detail)(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body, sent = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _describe(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"][1:]) or "body"
        if error["type"] == "json_invalid":
            where = f"body is not JSON (character {where})"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _add_error_handlers(app: FastAPI, state: LearnerState) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_message(request: Request, exc: RequestValidationError) -> JSONResponse:
        if not isinstance(exc.body, str | bytes):  # parsed JSON that broke the message's model
            state.record(request.url.path, exc.body)
        return _error(400, _describe(exc))

    @app.exception_handler(PubsubmlError)
    async def refused_message(request: Request, exc: PubsubmlError) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))  # unknown path, wrong method, too large


def create_learner_app(state: LearnerState) -> FastAPI:
    """The learner's four POST routes, its error replies and its body limit.

    Parameters
    ----------
    state : LearnerState

    Returns
    -------
    FastAPI
        No OpenAPI or docs routes: the learner answers its four messages and nothing else.
    """
    app = FastAPI(title="async-dp learner", openapi_url=None, docs_url=None, redoc_url=None)
    routes = APIRouter()

    @routes.post(RegisterMessage.path)
    async def register(message: RegisterMessage) -> dict[str, Any]:
        state.record(message.path, message.model_dump())
        return state.register(message.owner, message.n_records)

    @routes.post(RequestMessage.path)
    async def request(message: RequestMessage) -> dict[str, Any]:
        state.record(message.path, message.model_dump())
        return state.request(message.owner)

    @routes.post(AnswerMessage.path)
    async def answer(message: AnswerMessage) -> dict[str, Any]:
        state.record(message.path, message.model_dump())
        return state.answer(message.owner, message.ticket, message.gradient)

    @routes.post(RefuseMessage.path)
    async def refuse(message: RefuseMessage) -> dict[str, Any]:
        state.record(message.path, message.model_dump())
        return state.refuse(message.owner, message.ticket)

    app.include_router(routes)
    app.add_middleware(_BodyLimit, max_body_size=MAX_BODY_BYTES)
    _add_error_handlers(app, state)
    return app


def _loopback_listener() -> socket.socket:
    """A TCP socket listening on an ephemeral port of 127.0.0.1, so the port is known up front.

    Created with ``IPPROTO_TCP`` rather than 0: asyncio turns Nagle's algorithm off (TCP_NODELAY)
    only on connections of such sockets, and with it on, each small reply waits ~40 ms for the
    client's delayed ACK.
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.bind((LOOPBACK, 0))
        listener.listen()
    except OSError:
        listener.close()
        raise
    return listener


async def _serve_until_done(
    cfg: dict[str, Any], on_listening: Callable[[int], None]
) -> dict[str, Any]:
    state = LearnerState(cfg)
    config = uvicorn.Config(
        create_learner_app(state),
        log_config=None,  # leave the process's logging as it is; warnings still reach stderr
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    listener = _loopback_listener()
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    while not server.started:
        if serving.done():
            serving.result()  # raises what stopped the server
            raise DataValidationError("the learner's server stopped while starting")
        await asyncio.sleep(0.01)
    on_listening(listener.getsockname()[1])
    rounds = asyncio.create_task(state.open_rounds()) if cfg["style"] == "broadcast" else None
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(state.done.wait(), cfg["deadline_s"])
    await asyncio.sleep(cfg["grace_s"])  # let owners hear "done"
    server.should_exit = True
    await serving
    if rounds is not None:
        rounds.cancel()
    return state.result()


def serve_learner(cfg: dict[str, Any], on_listening: Callable[[int], None]) -> dict[str, Any]:
    """Serve the learner on 127.0.0.1 until T updates are made or ``deadline_s`` has passed.

    Parameters
    ----------
    cfg : dict
        :class:`LearnerState`'s keys plus ``deadline_s`` and ``grace_s`` (seconds to keep answering
        "done" once T updates are made).
    on_listening : callable
        Called with the ephemeral port once the server accepts connections.

    Returns
    -------
    dict
        ``theta_learner`` (θ_L, or None if not every owner registered), ``iterations`` (k),
        ``owners`` (i_k in the order the updates were made) and ``times`` (t_k in clock units).
    """
    return asyncio.run(_serve_until_done(cfg, on_listening))
