"""Sessions of the web dashboard: a signed cookie, the sealed token inside it, CSRF tokens.

A visitor logs in with a site token or the admin token.  The session lives in one cookie signed
by Starlette's :class:`~starlette.middleware.sessions.SessionMiddleware` (itsdangerous, key
``ui_session_secret``), sent ``HttpOnly`` and ``SameSite=Strict`` (``Secure`` when
``ui_cookie_secure``).  The cookie's content is signed, not secret, so the token is kept in it
encrypted (Fernet, with a key derived from the same secret).  Every page resolves the token again
with the API's own :func:`~pubsubml.registry.api.deps.get_principal`: a rotated, revoked or
expired token ends the session, and a page sees exactly what the API would show that token.

Every form that POSTs carries the session's CSRF token; :func:`check_csrf` refuses a form without
the right one (403), before anything else is read.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import MutableMapping
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from fastapi.security import HTTPAuthorizationCredentials

from pubsubml.errors import AuthenticationError, PermissionDeniedError
from pubsubml.registry.api.deps import RegistryState, get_principal
from pubsubml.registry.auth import Principal
from pubsubml.registry.settings import RegistrySettings

__all__ = [
    "CSRF_FIELD",
    "SESSION_COOKIE",
    "CSRFError",
    "LoginRequired",
    "TokenSealer",
    "check_csrf",
    "csrf_token",
    "end_session",
    "session_options",
    "session_principal",
    "start_session",
]

#: Name of the session cookie.
SESSION_COOKIE = "pubsubml_ui"
#: Name of the hidden form field that carries the CSRF token.
CSRF_FIELD = "csrf_token"
#: Longest token a log-in form may send (site tokens have 47 characters).
MAX_TOKEN_LENGTH = 512

_TOKEN_KEY = "token"
_CSRF_KEY = "csrf"
_NOTICE_KEY = "notice"


class CSRFError(PermissionDeniedError):
    """A form arrived without the session's CSRF token (HTTP 403)."""


class LoginRequired(Exception):
    """The page needs a logged-in visitor; answered with a redirect to the log-in page."""


class TokenSealer:
    """Encrypts the bearer token kept in the session cookie.

    Parameters
    ----------
    secret : str
        The dashboard's session secret; the encryption key is derived from it with HKDF-SHA256
        under its own label, so it differs from the key that signs the cookie.

    Examples
    --------
    >>> sealer = TokenSealer("k" * 32)
    >>> sealer.unseal(sealer.seal("psm_abc"), max_age=60)
    'psm_abc'
    >>> sealer.unseal("forged", max_age=60) is None
    True
    """

    def __init__(self, secret: str) -> None:
        key = HKDF(
            algorithm=SHA256(), length=32, salt=None, info=b"pubsubml dashboard token"
        ).derive(secret.encode("utf-8"))
        self._fernet = Fernet(base64.urlsafe_b64encode(key))

    def seal(self, token: str) -> str:
        """The encrypted, authenticated token (URL-safe text)."""
        return self._fernet.encrypt(token.encode("utf-8")).decode("ascii")

    def unseal(self, sealed: str, *, max_age: int, now: int | None = None) -> str | None:
        """The token, or ``None`` when ``sealed`` was altered or is older than ``max_age`` s.

        ``now`` (Unix time) replaces the clock.
        """
        try:
            data = sealed.encode("ascii")
            if now is None:
                return self._fernet.decrypt(data, ttl=max_age).decode("utf-8")
            return self._fernet.decrypt_at_time(data, ttl=max_age, current_time=now).decode("utf-8")
        except (InvalidToken, UnicodeError):
            return None


def session_options(settings: RegistrySettings) -> dict[str, Any]:
    """Keyword arguments of :class:`~starlette.middleware.sessions.SessionMiddleware`.

    The cookie is ``HttpOnly`` (always, by Starlette), ``SameSite=Strict``, ``Secure`` when
    ``settings.ui_cookie_secure``, and expires ``settings.ui_session_max_age`` seconds after
    log-in.
    """
    return {
        "secret_key": settings.ui_session_secret.get_secret_value(),
        "session_cookie": SESSION_COOKIE,
        "max_age": settings.ui_session_max_age,
        "path": "/",
        "same_site": "strict",
        "https_only": settings.ui_cookie_secure,
    }


def csrf_token(session: MutableMapping[str, Any]) -> str:
    """The session's CSRF token, created on first use.

    Examples
    --------
    >>> s = {}
    >>> csrf_token(s) == csrf_token(s) == s["csrf"]
    True
    """
    token = session.get(_CSRF_KEY)
    if not isinstance(token, str) or not token:
        token = secrets.token_urlsafe(32)
        session[_CSRF_KEY] = token
    return token


def check_csrf(session: MutableMapping[str, Any], submitted: str | None) -> None:
    """Refuse a form whose CSRF token is not the session's (compared in constant time).

    Raises
    ------
    CSRFError
        No session token, or a missing or different submitted token.
    """
    expected = session.get(_CSRF_KEY)
    if not isinstance(expected, str) or not expected or not submitted:
        raise CSRFError("the form is missing its CSRF token; reload the page and try again")
    if not hmac.compare_digest(expected.encode("utf-8"), submitted.encode("utf-8")):
        raise CSRFError("the form's CSRF token does not match this session; reload the page")


async def resolve_token(state: RegistryState, token: str) -> Principal:
    """The principal of a bearer token, exactly as the API resolves it.

    Raises
    ------
    AuthenticationError
        Unknown, expired or revoked token.
    """
    if not token or len(token) > MAX_TOKEN_LENGTH:
        raise AuthenticationError("invalid token: it matches no registered site")
    credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=token)
    return await get_principal(state, credentials)


def start_session(session: MutableMapping[str, Any], sealer: TokenSealer, token: str) -> None:
    """Begin a fresh session for ``token`` (a new CSRF token; nothing of the old one is kept)."""
    session.clear()
    session[_TOKEN_KEY] = sealer.seal(token)
    csrf_token(session)


def end_session(session: MutableMapping[str, Any], notice: str | None = None) -> None:
    """Forget the logged-in token; ``notice`` is shown once on the log-in page."""
    session.clear()
    if notice:
        session[_NOTICE_KEY] = notice[:300]


def pop_notice(session: MutableMapping[str, Any]) -> str | None:
    """The notice left by :func:`end_session`, removed from the session."""
    notice = session.pop(_NOTICE_KEY, None)
    return notice if isinstance(notice, str) else None


async def session_principal(
    session: MutableMapping[str, Any], state: RegistryState, sealer: TokenSealer
) -> Principal:
    """The logged-in principal, resolved again from the sealed token.

    Raises
    ------
    LoginRequired
        No session, a session past its lifetime or altered, or a token that no longer
        authenticates (the session is then ended, with the reason as notice).
    """
    sealed = session.get(_TOKEN_KEY)
    if not isinstance(sealed, str):
        raise LoginRequired
    token = sealer.unseal(sealed, max_age=state.settings.ui_session_max_age)
    if token is None:
        end_session(session, "your session has ended; log in again")
        raise LoginRequired
    try:
        return await resolve_token(state, token)
    except AuthenticationError as exc:
        end_session(session, str(exc))
        raise LoginRequired from None
