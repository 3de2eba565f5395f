"""The web dashboard: server-rendered pages under ``/ui``.

:func:`create_dashboard` builds a small FastAPI application that
:func:`~pubsubml.registry.app.create_app` mounts at ``/ui``, sharing the registry's state.  It has
its own session middleware (:mod:`pubsubml.registry.ui.session`) and its own error pages: any
refusal is an HTML page with the API's status code (401, 403, 404, 422), never a JSON body and
never a 500.  Pages are Jinja2 templates shipped in the package; charts are inline SVG; there
is no JavaScript.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Form, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pubsubml.errors import AuthenticationError, PubsubmlError
from pubsubml.registry.api.deps import RegistryState, StateDep
from pubsubml.registry.auth import Principal
from pubsubml.registry.error_codes import ERROR_CODES
from pubsubml.registry.ui.formatting import epsilon_html, sigma_html
from pubsubml.registry.ui.pages import (
    ModelFilters,
    graph_page,
    ledger_page,
    model_page,
    models_page,
    sites_page,
    subscriptions_page,
)
from pubsubml.registry.ui.session import (
    CSRF_FIELD,
    MAX_TOKEN_LENGTH,
    LoginRequired,
    TokenSealer,
    check_csrf,
    csrf_token,
    end_session,
    pop_notice,
    resolve_token,
    session_options,
    session_principal,
    start_session,
)

__all__ = ["SECURITY_HEADERS", "LastResortErrors", "SecurityHeaders", "create_dashboard", "router"]

#: Headers of every dashboard answer: no script may run, nothing is fetched from elsewhere, the
#: pages cannot be framed, and nothing is cached.
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

log = logging.getLogger("pubsubml.registry")

_TITLES = {401: "Not logged in", 403: "Forbidden", 404: "Not found", 422: "Invalid request"}

_templates = Environment(
    loader=PackageLoader("pubsubml.registry.ui", "templates"),
    autoescape=select_autoescape(default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
# ε to 4 decimals and σ to 3 significant digits, the exact value on hover.
_templates.filters["epsilon"] = epsilon_html
_templates.filters["sigma"] = sigma_html

router = APIRouter()


class SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class LastResortErrors:
    """ASGI middleware: an exception no handler turned into a page becomes a plain 500 page
    (logged), instead of reaching the registry app, whose handlers answer JSON."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def send_tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracking)
        except Exception as exc:
            log.error("dashboard error", exc_info=exc)
            if started:
                raise
            html = _templates.get_template("error.html").render(
                base=str(scope.get("root_path", "")).rstrip("/"),
                principal=None,
                status=500,
                title="Internal error",
                detail=f"internal error ({type(exc).__name__}); nothing was changed",
            )
            await HTMLResponse(html, status_code=500)(scope, receive, send)


def _base(request: Request) -> str:
    """The dashboard's path prefix (``/ui`` behind any ``root_path``)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def render(
    request: Request,
    name: str,
    context: dict[str, Any],
    *,
    principal: Principal | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    """The template ``name`` with the common context (path prefix, visitor, CSRF token)."""
    html = _templates.get_template(name).render(
        base=_base(request),
        principal=principal,
        csrf_field=CSRF_FIELD,
        csrf=csrf_token(request.session),
        **context,
    )
    return HTMLResponse(html, status_code=status_code)


def _redirect(request: Request, path: str) -> RedirectResponse:
    return RedirectResponse(_base(request) + path, status_code=303)


async def current_principal(request: Request, state: StateDep) -> Principal:
    """The logged-in visitor (the log-in page when there is none)."""
    sealer: TokenSealer = request.app.state.sealer
    return await session_principal(request.session, state, sealer)


PagePrincipal = Annotated[Principal, Depends(current_principal)]


async def _read(state: RegistryState, build: Callable[[Session], dict[str, Any]]) -> dict[str, Any]:
    """Run ``build`` in a read transaction, off the event loop."""

    def run() -> dict[str, Any]:
        with state.database.read() as session:
            return build(session)

    return await run_in_threadpool(run)


# ---- log-in and log-out -------------------------------------------------------------------
@router.get("/", name="home")
async def home(request: Request, state: StateDep) -> Response:
    """The sites page when logged in, else the log-in page."""
    try:
        await current_principal(request, state)
    except LoginRequired:
        return _redirect(request, "/login")
    return _redirect(request, "/sites")


@router.get("/login", name="login_form")
async def login_form(request: Request) -> HTMLResponse:
    """The log-in form (a token field and the session's CSRF token)."""
    return render(request, "login.html", {"notice": pop_notice(request.session), "error": None})


@router.post("/login", name="login")
async def login(
    request: Request,
    state: StateDep,
    token: Annotated[str, Form(max_length=MAX_TOKEN_LENGTH)] = "",
    csrf_token_: Annotated[str, Form(alias=CSRF_FIELD, max_length=128)] = "",
) -> Response:
    """Check the CSRF token, resolve the token as the API does, start a fresh session."""
    check_csrf(request.session, csrf_token_)
    token = token.strip()
    try:
        principal = await resolve_token(state, token)
    except AuthenticationError as exc:
        context = {"notice": None, "error": str(exc)}
        return render(request, "login.html", context, status_code=401)
    start_session(request.session, request.app.state.sealer, token)
    log.info("dashboard log-in: %s %s", principal.kind, principal.name)
    return _redirect(request, "/sites")


@router.post("/logout", name="logout")
async def logout(
    request: Request,
    csrf_token_: Annotated[str, Form(alias=CSRF_FIELD, max_length=128)] = "",
) -> Response:
    """End the session (CSRF-checked) and go back to the log-in page."""
    check_csrf(request.session, csrf_token_)
    end_session(request.session, "you are logged out")
    return _redirect(request, "/login")


# ---- pages --------------------------------------------------------------------------------
@router.get("/sites", name="sites")
async def sites(request: Request, state: StateDep, principal: PagePrincipal) -> HTMLResponse:
    """Sites with roles, budgets and (where readable) spent ε."""
    context = await _read(state, lambda s: sites_page(s, principal))
    return render(request, "sites.html", context, principal=principal)


@router.get("/models", name="models")
async def models(request: Request, state: StateDep, principal: PagePrincipal) -> HTMLResponse:
    """Models the visitor may see, with the filter form."""
    filters = ModelFilters.parse(list(request.query_params.multi_items()))
    context = await _read(state, lambda s: models_page(s, principal, filters))
    return render(request, "models.html", context, principal=principal)


@router.get("/models/{model_id}", name="model")
async def model(
    request: Request, model_id: str, state: StateDep, principal: PagePrincipal
) -> HTMLResponse:
    """One model's card, DP events and recomputed ε."""
    context = await _read(state, lambda s: model_page(s, principal, model_id))
    return render(request, "model.html", context, principal=principal)


@router.get("/ledger", name="own_ledger")
async def own_ledger(request: Request, principal: PagePrincipal) -> Response:
    """The visitor's own ledger (the sites page for the administrator)."""
    return _redirect(request, "/sites" if principal.is_admin else f"/sites/{principal.name}/ledger")


@router.get("/sites/{name}/ledger", name="ledger")
async def ledger(
    request: Request, name: str, state: StateDep, principal: PagePrincipal
) -> HTMLResponse:
    """A site's ledger over time (the site itself or the administrator)."""
    context = await _read(state, lambda s: ledger_page(s, principal, name))
    return render(request, "ledger.html", context, principal=principal)


@router.get("/subscriptions", name="subscriptions")
async def subscriptions(
    request: Request, state: StateDep, principal: PagePrincipal
) -> HTMLResponse:
    """The visitor's subscriptions and their channels."""
    context = await _read(state, lambda s: subscriptions_page(s, principal))
    return render(request, "subscriptions.html", context, principal=principal)


@router.get("/graph", name="graph")
async def graph(request: Request, state: StateDep, principal: PagePrincipal) -> HTMLResponse:
    """The contribution graph."""
    context = await _read(state, lambda s: graph_page(s, principal))
    return render(request, "graph.html", context, principal=principal)


# ---- errors -------------------------------------------------------------------------------
def _error_page(request: Request, status: int, detail: str) -> HTMLResponse:
    context = {"status": status, "title": _TITLES.get(status, "Error"), "detail": detail}
    return render(request, "error.html", context, status_code=status)


def _registry_error(request: Request, exc: Exception) -> Response:
    for cls, status, _code in ERROR_CODES:
        if isinstance(exc, cls):
            return _error_page(request, status, str(exc))
    log.error("unmapped registry error", exc_info=exc)
    return _error_page(request, 500, f"internal error ({type(exc).__name__})")


def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    parts = [
        f"{'.'.join(str(x) for x in e.get('loc', ())[1:])}: {e.get('msg', '')}"
        for e in exc.errors()[:5]
    ]
    return _error_page(request, 422, "invalid request: " + "; ".join(parts))


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    detail = "no such page" if exc.status_code == 404 else str(exc.detail)
    return _error_page(request, exc.status_code, detail)


def _login_required(request: Request, _exc: Exception) -> Response:
    return _redirect(request, "/login")


def create_dashboard(state: RegistryState) -> FastAPI:
    """The dashboard application, to mount at ``/ui`` of the registry app.

    Parameters
    ----------
    state : RegistryState
        The registry's state (settings, database, caches), shared with the API.

    Returns
    -------
    FastAPI
        Without an OpenAPI document of its own: the API's document stays the contract.
    """
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.state.registry = state
    app.state.sealer = TokenSealer(state.settings.ui_session_secret.get_secret_value())
    app.include_router(router)
    app.add_exception_handler(PubsubmlError, _registry_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(LoginRequired, _login_required)
    app.add_middleware(SessionMiddleware, **session_options(state.settings))
    app.add_middleware(LastResortErrors)
    app.add_middleware(SecurityHeaders)
    return app
