"""Tests of pubsubml.registry.auth: tokens, their digests and the authenticated principal."""

from __future__ import annotations

import dataclasses
import hashlib
import re

import pytest

from pubsubml.errors import PermissionDeniedError
from pubsubml.registry.auth import ADMIN, Principal, hash_token, new_token, tokens_equal

URL_SAFE = re.compile(r"^psm_[A-Za-z0-9_-]{43}$")


def _site(name: str = "a", roles: str | None = "both") -> Principal:
    return Principal(kind="site", site_id=1, name=name, roles=roles)  # type: ignore[arg-type]


def test_new_tokens_are_prefixed_url_safe_and_distinct() -> None:
    tokens = [new_token() for _ in range(64)]

    assert all(URL_SAFE.match(t) for t in tokens), tokens[:3]
    assert len(set(tokens)) == len(tokens)


@pytest.mark.parametrize("token", ["abc", "psm_x", "", "é-ünïcode"])
def test_hash_token_is_the_hex_sha256_of_the_utf8_bytes(token: str) -> None:
    expected = hashlib.sha256(token.encode("utf-8")).hexdigest()

    digest = hash_token(token)

    assert digest == expected
    assert re.fullmatch(r"[0-9a-f]{64}", digest)


def test_hash_token_known_vector() -> None:
    # FIPS 180-2 test vector for SHA-256("abc").
    expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert hash_token("abc") == expected


@pytest.mark.parametrize(
    ("given", "expected", "equal"),
    [
        ("secret-token", "secret-token", True),
        ("secret-token", "secret-tokeN", False),
        ("secret", "secret-token", False),  # a prefix is not a match
        ("", "", True),
        ("", "x", False),
    ],
)
def test_tokens_equal(given: str, expected: str, equal: bool) -> None:
    assert tokens_equal(given, expected) is equal


@pytest.mark.parametrize(
    ("roles", "publish", "subscribe"),
    [
        ("publisher", True, False),
        ("subscriber", False, True),
        ("both", True, True),
        (None, False, False),
    ],
)
def test_role_table(roles: str | None, publish: bool, subscribe: bool) -> None:
    principal = _site(roles=roles)

    assert principal.can_publish() is publish
    assert principal.can_subscribe() is subscribe
    assert principal.is_admin is False


def test_the_administrator_principal() -> None:
    assert ADMIN.is_admin and ADMIN.kind == "admin" and ADMIN.name == "admin"
    assert ADMIN.site_id is None and ADMIN.roles is None
    # The administrator manages the registry; it neither publishes nor subscribes itself.
    assert not ADMIN.can_publish() and not ADMIN.can_subscribe()


def test_require_admin_refuses_sites_and_names_the_action() -> None:
    ADMIN.require_admin("register sites")  # no error

    with pytest.raises(PermissionDeniedError, match="only the registry administrator may fly"):
        _site().require_admin("fly")


def test_require_site_admits_the_site_itself_and_the_administrator_only() -> None:
    _site("a").require_site("a", "read")
    ADMIN.require_site("a", "read")

    with pytest.raises(PermissionDeniedError) as err:
        _site("b").require_site("a", "read the ledger")
    assert "'b' may not read the ledger for site 'a'" in str(err.value)


def test_a_site_named_admin_is_not_the_administrator() -> None:
    impostor = _site(name="admin")

    assert not impostor.is_admin
    with pytest.raises(PermissionDeniedError):
        impostor.require_admin("register sites")
    with pytest.raises(PermissionDeniedError):
        impostor.require_site("a", "read")


def test_principals_are_immutable() -> None:
    principal = _site()

    with pytest.raises(dataclasses.FrozenInstanceError):
        principal.name = "admin"  # type: ignore[misc]
