"""Tests of pubsubml.registry.api.deps: the authenticated principal and its cache, the publisher
check, cursors, and replacing dependencies."""

from __future__ import annotations

import time
from typing import Any

from fastapi.routing import APIRoute
from sqlalchemy import text

from pubsubml.registry.api.deps import (
    BEARER_SECURITY,
    Caller,
    get_caller,
    get_principal,
    get_settings,
)
from pubsubml.registry.api.routes.subscriptions import router
from pubsubml.registry.auth import Principal, hash_token


def test_principals_are_cached_by_token_digest_for_a_while(registry_factory: Any) -> None:
    reg = registry_factory()
    token = reg.add_site("a")
    cache = reg.client.app.state.registry.principals
    cache.clear()

    assert reg.client.get("/v1/whoami", headers=reg.auth("a")).status_code == 200
    bad = reg.client.get("/v1/whoami", headers={"Authorization": "Bearer psm_unknown"})

    assert bad.status_code == 401
    assert list(cache) == [hash_token(token)]  # the digest, never the token; no failures
    expires, principal = cache[hash_token(token)]
    assert principal.name == "a" and principal.roles == "both" and expires > time.monotonic()

    with reg.db.engine.begin() as conn:  # revoked behind this replica's back
        conn.execute(text("UPDATE sites SET token_revoked_at = created_at WHERE name = 'a'"))
    assert reg.client.get("/v1/whoami", headers=reg.auth("a")).status_code == 200  # cached
    cache[hash_token(token)] = (time.monotonic() - 1.0, principal)  # the entry expires
    refused = reg.client.get("/v1/whoami", headers=reg.auth("a"))
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]

    for i in range(10_001):  # a full cache is emptied, not grown without bound
        cache[f"k{i}"] = (time.monotonic() + 60, principal)
    assert reg.client.get("/v1/whoami", headers=reg.admin).status_code == 200
    assert len(cache) == 1


def test_publisher_check_cursor_bounds_and_overrides(registry_factory: Any) -> None:
    reg = registry_factory(max_upload_bytes=1024)
    app, client = reg.client.app, reg.client
    big = {"weights": ("w", b"\x00" * 4096, "application/octet-stream")}
    token = {"Authorization": "Bearer any"}

    def acting_as(roles: str) -> None:
        principal = Principal("site", 99, "x", roles)  # type: ignore[arg-type]
        app.dependency_overrides[get_principal] = lambda: principal

    try:
        acting_as("subscriber")  # refused before its oversized body is read
        r = client.post("/v1/models", files=big, headers=token)
        assert (r.status_code, r.json()["error"]) == (403, "forbidden")
        assert client.get("/v1/whoami", headers=token).json() == {
            "kind": "site",
            "name": "x",
            "roles": "subscriber",
        }
        acting_as("publisher")
        r = client.post("/v1/models", files=big, headers=token)
        assert (r.status_code, r.json()["error"]) == (413, "payload_too_large")
        app.dependency_overrides[get_settings] = lambda: reg.settings.model_copy(
            update={"max_upload_bytes": 77}
        )
        assert client.get("/v1/health").json()["max_upload_bytes"] == 77
    finally:
        app.dependency_overrides.clear()

    largest = 2**63 - 1  # a BIGINT
    last = client.get("/v1/events", params={"after": largest}, headers=reg.admin)
    assert last.json() == {"events": [], "next_cursor": largest}
    beyond = client.get("/v1/events", params={"after": largest + 1}, headers=reg.admin)
    assert (beyond.status_code, beyond.json()["error"]) == (422, "validation_error")
    assert client.get("/v1/whoami", headers=token).status_code == 401  # overrides are gone


def test_the_feed_poll_resolves_its_caller_as_one_dependency(registry: Any) -> None:
    reg = registry
    sub = reg.subscribe("b", "age")
    app, client = reg.client.app, reg.client
    url = f"/v1/subscriptions/{sub}/models"
    poll = next(
        r
        for r in router.routes
        if isinstance(r, APIRoute) and r.path == "/subscriptions/{subscription_id}/models"
    )

    assert [d.call for d in poll.dependant.dependencies] == [get_caller]
    spec = client.get("/openapi.json").json()["paths"]
    listed = spec["/v1/subscriptions"]["get"]["security"]  # a route that depends on get_principal
    assert spec["/v1/subscriptions/{subscription_id}/models"]["get"]["security"] == listed
    assert listed == BEARER_SECURITY["security"]

    assert client.get(url, headers=reg.auth("b")).json() == {"items": [], "next_cursor": 0}
    for headers in ({}, {"Authorization": "Basic eDp5"}, {"Authorization": "Bearer psm_x"}):
        # refused as every route refuses, and before its parameters are checked
        r = client.get(url, params={"limit": 0}, headers=headers)
        assert (r.status_code, r.json()["error"]) == (401, "unauthenticated"), headers
    assert client.get(url, headers=reg.auth("c")).status_code == 404  # not c's subscription

    state = app.state.registry
    try:  # replaced as the other dependencies are
        app.dependency_overrides[get_caller] = lambda: Caller(
            state,
            Principal("site", 99, "b", "both"),  # type: ignore[arg-type]
        )
        r = client.get(url, headers={"Authorization": "Bearer any"})
        assert (r.status_code, r.json()["error"]) == (404, "not_found")  # site 99 owns nothing
    finally:
        app.dependency_overrides.clear()
