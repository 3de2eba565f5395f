"""Bearer tokens and the authenticated principal.

A site's token is 256 random bits, shown once when the site is created and stored only as its
SHA-256 digest.  A token is resolved by looking its digest up (a digest of a high-entropy secret
reveals nothing about other tokens); the admin token from the settings is compared in constant
time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Literal

from pubsubml.errors import PermissionDeniedError

__all__ = [
    "ADMIN",
    "Principal",
    "hash_token",
    "new_token",
    "tokens_equal",
]

TOKEN_PREFIX = "psm_"

Role = Literal["publisher", "subscriber", "both"]


def new_token() -> str:
    """A fresh site token (``psm_`` + 43 url-safe characters, 256 bits).

    Examples
    --------
    >>> t = new_token()
    >>> t.startswith("psm_"), len(t)
    (True, 47)
    """
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """Hex SHA-256 of a token: what the database stores.

    Examples
    --------
    >>> hash_token("abc")[:12]
    'ba7816bf8f01'
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def tokens_equal(given: str, expected: str) -> bool:
    """Constant-time comparison of two tokens (through their digests, so lengths leak nothing)."""
    return hmac.compare_digest(hash_token(given), hash_token(expected))


@dataclass(frozen=True)
class Principal:
    """Who is calling: the consortium administrator, or one registered site.

    Attributes
    ----------
    kind : {"admin", "site"}
    site_id : int or None
    name : str
        The site's name, ``"admin"`` for the administrator.
    roles : {"publisher", "subscriber", "both"} or None
    """

    kind: Literal["admin", "site"]
    site_id: int | None
    name: str
    roles: Role | None = None

    @property
    def is_admin(self) -> bool:
        """True for the administrator."""
        return self.kind == "admin"

    def can_publish(self) -> bool:
        """True for a site with the publisher role."""
        return self.roles in ("publisher", "both")

    def can_subscribe(self) -> bool:
        """True for a site with the subscriber role."""
        return self.roles in ("subscriber", "both")

    def require_admin(self, action: str) -> None:
        """Raise unless the caller is the administrator.

        Raises
        ------
        PermissionDeniedError
        """
        if not self.is_admin:
            raise PermissionDeniedError(f"only the registry administrator may {action}")

    def require_site(self, name: str, action: str) -> None:
        """Raise unless the caller is the site ``name`` (or the administrator).

        Raises
        ------
        PermissionDeniedError
        """
        if not self.is_admin and self.name != name:
            raise PermissionDeniedError(f"site {self.name!r} may not {action} for site {name!r}")


ADMIN = Principal(kind="admin", site_id=None, name="admin")
