"""Sites: registration (administrator only), listing, token authentication and token lifecycle.

Sites register as publishers, subscribers or both, with an Ed25519 public key and a declared
personalized budget (ε^p, δ^p) (pubsub-ml.txt §3.2, Algorithm 1; §6 "Discussion").  A site's
token may carry an expiry; the site or the administrator rotates it (the old one stops working)
or revokes it (it is refused with a clear reason until the administrator rotates it).  Only the
token's SHA-256 is stored; creation, expiry, revocation and who last changed it are shown.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from pubsubml.artifacts.signing import key_id, public_key_from_base64
from pubsubml.errors import (
    AuthenticationError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
)
from pubsubml.registry.auth import ADMIN, Principal, hash_token, new_token, tokens_equal
from pubsubml.registry.schemas import (
    SiteCreate,
    SiteCreated,
    SitePublic,
    SiteToken,
    TokenRotate,
    check_site_name,
)
from pubsubml.registry.services.feed_writer import FeedWriter
from pubsubml.registry.tables import SiteRow, utcnow

__all__ = [
    "authenticate",
    "create_site",
    "get_site_row",
    "list_sites",
    "revoke_token",
    "rotate_token",
    "site_public",
]


def _expiry(now: datetime, days: int | None) -> datetime | None:
    return None if days is None else now + timedelta(days=days)


def site_public(row: SiteRow) -> SitePublic:
    """The public view of a site row."""
    return SitePublic(
        name=row.name,
        roles=row.roles,  # type: ignore[arg-type]
        public_key=row.public_key,
        epsilon_budget=row.epsilon_budget,
        delta_budget=row.delta_budget,
        key_id=row.key_id,
        created_at=row.created_at,
        token_created_at=row.token_created_at,
        token_expires_at=row.token_expires_at,
        token_revoked_at=row.token_revoked_at,
        token_changed_by=row.token_changed_by,
    )


def create_site(session: Session, principal: Principal, body: SiteCreate) -> SiteCreated:
    """Register a site and return it with its new token (shown only here).

    Raises
    ------
    PermissionDeniedError
        The caller is not the administrator.
    SignatureError
        The public key is not a valid Ed25519 key.
    ConflictError
        The name is taken.
    """
    principal.require_admin("register sites")
    kid = None
    if body.public_key is not None:
        kid = key_id(public_key_from_base64(body.public_key))
    writer = FeedWriter(session)
    if session.execute(select(SiteRow.id).where(SiteRow.name == body.name)).first() is not None:
        raise ConflictError(f"site {body.name!r} already exists")
    token = new_token()
    now = utcnow()
    row = SiteRow(
        name=body.name,
        roles=body.roles,
        public_key=body.public_key,
        key_id=kid,
        epsilon_budget=body.epsilon_budget,
        delta_budget=body.delta_budget,
        token_hash=hash_token(token),
        created_at=now,
        token_created_at=now,
        token_expires_at=_expiry(now, body.token_expires_in_days),
        token_changed_by=principal.name,
    )
    session.add(row)
    session.flush()
    writer.event("site.created", {"name": row.name, "roles": row.roles}, site_id=row.id)
    writer.close()
    return SiteCreated(**site_public(row).model_dump(), token=token)


def _may_manage_token(principal: Principal, row: SiteRow, action: str) -> None:
    if not principal.is_admin and principal.name != row.name:
        raise PermissionDeniedError(
            f"{principal.name!r} may not {action} the token of site {row.name!r}: only the site "
            "itself or the administrator"
        )


def rotate_token(session: Session, principal: Principal, name: str, body: TokenRotate) -> SiteToken:
    """Give site ``name`` a new token (shown only in the answer); the old one stops working.

    The site itself or the administrator; a revoked token is rotated by the administrator only
    (its site can no longer authenticate).  Clears any revocation.

    Raises
    ------
    NotFoundError
        No such site.
    PermissionDeniedError
        Another site.
    """
    row = get_site_row(session, name)
    _may_manage_token(principal, row, "rotate")
    token = new_token()
    now = utcnow()
    row.token_hash = hash_token(token)
    row.token_created_at = now
    row.token_expires_at = _expiry(now, body.expires_in_days)
    row.token_revoked_at = None
    row.token_changed_by = principal.name
    session.flush()
    return SiteToken(
        name=row.name,
        token=token,
        token_created_at=now,
        token_expires_at=row.token_expires_at,
    )


def revoke_token(session: Session, principal: Principal, name: str) -> SitePublic:
    """Revoke site ``name``'s token: every request with it is refused (401, "revoked") until the
    administrator rotates it.  The site itself or the administrator; revoking twice changes
    nothing.

    Raises
    ------
    NotFoundError
        No such site.
    PermissionDeniedError
        Another site.
    """
    row = get_site_row(session, name)
    _may_manage_token(principal, row, "revoke")
    if row.token_revoked_at is None:
        row.token_revoked_at = utcnow()
        row.token_changed_by = principal.name
        session.flush()
    return site_public(row)


def get_site_row(session: Session, name: str) -> SiteRow:
    """The row of site ``name``.

    Raises
    ------
    NotFoundError
        No such site (or an invalid name).
    """
    try:
        check_site_name(name)
    except ValueError:
        raise NotFoundError(f"site {name[:80]!r} not found") from None
    row = session.execute(select(SiteRow).where(SiteRow.name == name)).scalar_one_or_none()
    if row is None:
        raise NotFoundError(f"site {name!r} not found")
    return row


def list_sites(session: Session) -> list[SitePublic]:
    """Every registered site, by name."""
    rows = session.execute(select(SiteRow).order_by(SiteRow.name)).scalars()
    return [site_public(r) for r in rows]


def authenticate(session: Session, token: str | None, admin_token: str) -> Principal:
    """Resolve a bearer token to the administrator or a site.

    Raises
    ------
    AuthenticationError
        No token, or a token that matches neither the admin token nor any site.
    """
    if not token:
        raise AuthenticationError(
            "authentication required: send 'Authorization: Bearer <token>' (a site token from "
            "`pubsubml site add`, or the admin token)"
        )
    if tokens_equal(token, admin_token):
        return ADMIN
    row = session.execute(
        select(
            SiteRow.id,
            SiteRow.name,
            SiteRow.roles,
            SiteRow.token_expires_at,
            SiteRow.token_revoked_at,
        ).where(SiteRow.token_hash == hash_token(token))
    ).first()
    if row is None:
        raise AuthenticationError("invalid token: it matches no registered site")
    if row.token_revoked_at is not None:
        raise AuthenticationError(
            f"the token of site {row.name!r} was revoked at {row.token_revoked_at.isoformat()}; "
            "ask the administrator for a new one"
        )
    if row.token_expires_at is not None and row.token_expires_at <= utcnow():
        raise AuthenticationError(
            f"the token of site {row.name!r} expired at {row.token_expires_at.isoformat()}; "
            "ask the administrator to rotate it"
        )
    return Principal(kind="site", site_id=row.id, name=row.name, roles=row.roles)
