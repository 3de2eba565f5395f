"""Tests of pubsubml.registry.services.sites: registration, authentication and token lifecycle."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from pubsubml.artifacts.signing import key_id, public_key_from_base64
from pubsubml.errors import (
    AuthenticationError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
)
from pubsubml.registry.auth import ADMIN, Principal, hash_token
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.schemas import SiteCreate, SiteCreated, TokenRotate
from pubsubml.registry.services.sites import (
    authenticate,
    create_site,
    get_site_row,
    list_sites,
    revoke_token,
    rotate_token,
    site_public,
)
from pubsubml.registry.tables import EventRow, SiteRow, utcnow

ADMIN_TOKEN = "admin-" + "t" * 40


def _create(db: Database, artifacts: Any, name: str, **changes: Any) -> SiteCreated:
    fields: dict[str, Any] = {
        "name": name,
        "public_key": artifacts.public_key(name),
        "epsilon_budget": 2.0,
        "delta_budget": 1e-6,
        **changes,
    }
    with db.write() as s:
        return create_site(s, ADMIN, SiteCreate(**fields))


def _auth(db: Database, token: str | None) -> Principal:
    with db.read() as s:
        return authenticate(s, token, ADMIN_TOKEN)


def test_a_new_sites_token_authenticates_it(db: Database, artifacts: Any) -> None:
    created = _create(db, artifacts, "a", roles="publisher")
    expected_key = key_id(public_key_from_base64(artifacts.public_key("a")))
    assert created.key_id == expected_key and created.token_changed_by == "admin"
    assert created.token_created_at == created.created_at and created.token_expires_at is None
    principal = _auth(db, created.token)
    with db.read() as s:
        row = get_site_row(s, "a")
    assert principal == Principal(kind="site", site_id=row.id, name="a", roles="publisher")
    assert row.token_hash == hash_token(created.token) and created.token not in row.token_hash
    assert _auth(db, ADMIN_TOKEN) is ADMIN


def test_a_subscriber_needs_no_key_and_the_creation_is_an_event(
    db: Database, artifacts: Any
) -> None:
    created = _create(db, artifacts, "reader", roles="subscriber", public_key=None)
    assert created.key_id is None and created.public_key is None
    with db.read() as s:
        event = s.execute(select(EventRow)).scalar_one()
        site_id = get_site_row(s, "reader").id
    assert (event.kind, event.site_id, event.position) == ("site.created", site_id, 1)
    assert json.loads(event.payload) == {"name": "reader", "roles": "subscriber"}


def test_only_the_admin_registers_and_names_are_unique(db: Database, artifacts: Any) -> None:
    _create(db, artifacts, "a")
    body = SiteCreate(
        name="b", public_key=artifacts.public_key("b"), epsilon_budget=1.0, delta_budget=1e-5
    )
    with pytest.raises(PermissionDeniedError, match="administrator"), db.write() as s:
        site = Principal(kind="site", site_id=1, name="a", roles="both")
        create_site(s, site, body)
    with pytest.raises(ConflictError, match="already exists"):
        _create(db, artifacts, "a")
    with db.read() as s:
        assert [p.name for p in list_sites(s)] == ["a"]


def test_a_token_may_expire_after_some_days(db: Database, artifacts: Any) -> None:
    created = _create(db, artifacts, "a", token_expires_in_days=7)
    assert created.token_expires_at is not None
    assert created.token_expires_at - created.created_at == timedelta(days=7)
    assert _auth(db, created.token).name == "a"
    with db.write() as s:
        s.execute(update(SiteRow).values(token_expires_at=utcnow() - timedelta(seconds=1)))
    with pytest.raises(AuthenticationError, match="expired at"):
        _auth(db, created.token)


@pytest.mark.parametrize("token", [None, ""])
def test_a_missing_token_is_refused(db: Database, token: str | None) -> None:
    with pytest.raises(AuthenticationError, match="authentication required"):
        _auth(db, token)


def test_an_unknown_token_is_refused(db: Database, artifacts: Any) -> None:
    created = _create(db, artifacts, "a")
    for token in ("psm_unknown", created.token + "x", ADMIN_TOKEN + "x"):
        with pytest.raises(AuthenticationError, match="invalid token"):
            _auth(db, token)


def test_rotation_replaces_the_token_and_records_who(db: Database, artifacts: Any) -> None:
    created = _create(db, artifacts, "a")
    site = _auth(db, created.token)
    with db.write() as s:
        rotated = rotate_token(s, site, "a", TokenRotate(expires_in_days=30))
    assert rotated.token != created.token and rotated.name == "a"
    assert rotated.token_expires_at == rotated.token_created_at + timedelta(days=30)
    with pytest.raises(AuthenticationError, match="invalid token"):
        _auth(db, created.token)
    assert _auth(db, rotated.token) == site
    with db.read() as s:
        view = site_public(get_site_row(s, "a"))
    assert view.token_changed_by == "a" and view.token_created_at == rotated.token_created_at


def test_revoking_twice_keeps_the_first_revocation(db: Database, artifacts: Any) -> None:
    created = _create(db, artifacts, "a")
    _create(db, artifacts, "b")
    with db.write() as s:
        first = revoke_token(s, ADMIN, "a")
    assert first.token_revoked_at is not None and first.token_changed_by == "admin"
    with db.write() as s:
        row = get_site_row(s, "a")
        site = Principal(kind="site", site_id=row.id, name="a", roles="both")
        second = revoke_token(s, site, "a")
    assert second == first
    with pytest.raises(AuthenticationError, match="revoked at"):
        _auth(db, created.token)
    with db.write() as s, pytest.raises(PermissionDeniedError, match="may not revoke"):
        revoke_token(s, site, "b")
    with db.write() as s:
        rotated = rotate_token(s, ADMIN, "a", TokenRotate())
    assert rotated.token_expires_at is None
    assert _auth(db, rotated.token).name == "a"


@pytest.mark.parametrize("name", ["nobody", "../etc", "", "x" * 65, "a'; --"])
def test_get_site_row_answers_not_found(db: Database, artifacts: Any, name: str) -> None:
    _create(db, artifacts, "a")
    with db.read() as s, pytest.raises(NotFoundError, match="not found"):
        get_site_row(s, name)


def test_sites_are_listed_by_name(db: Database, artifacts: Any) -> None:
    for name in ("m", "b", "x"):
        _create(db, artifacts, name)
    with db.read() as s:
        listed = list_sites(s)
        rows = [get_site_row(s, n) for n in ("b", "m", "x")]
    assert listed == [site_public(r) for r in rows]
    assert [p.epsilon_budget for p in listed] == [2.0, 2.0, 2.0]
