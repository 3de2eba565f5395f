"""Sites: registration (administrator only), listing, and token authentication.

Sites register as publishers, subscribers or both, with an Ed25519 public key and a declared
personalized budget (ε^p, δ^p) (pubsub-ml.txt §3.2, Algorithm 1; §6 "Discussion").
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from pubsubml.artifacts.signing import key_id, public_key_from_base64
from pubsubml.errors import AuthenticationError, ConflictError, NotFoundError
from pubsubml.registry.auth import ADMIN, Principal, hash_token, new_token, tokens_equal
from pubsubml.registry.schemas import SiteCreate, SiteCreated, SitePublic, check_site_name
from pubsubml.registry.services.feed import FeedWriter
from pubsubml.registry.tables import SiteRow, utcnow

__all__ = ["authenticate", "create_site", "get_site_row", "list_sites", "site_public"]


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
    row = SiteRow(
        name=body.name,
        roles=body.roles,
        public_key=body.public_key,
        key_id=kid,
        epsilon_budget=body.epsilon_budget,
        delta_budget=body.delta_budget,
        token_hash=hash_token(token),
        created_at=utcnow(),
    )
    session.add(row)
    session.flush()
    writer.event("site.created", {"name": row.name, "roles": row.roles}, site_id=row.id)
    writer.close()
    return SiteCreated(**site_public(row).model_dump(), token=token)


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
        select(SiteRow.id, SiteRow.name, SiteRow.roles).where(
            SiteRow.token_hash == hash_token(token)
        )
    ).first()
    if row is None:
        raise AuthenticationError("invalid token: it matches no registered site")
    return Principal(kind="site", site_id=row.id, name=row.name, roles=row.roles)
