"""Token lifecycle: rotation, revocation and expiry, with the same authorization as the API."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text


def _me(registry: Any, token: str) -> Any:
    return registry.client.get("/v1/whoami", headers={"Authorization": f"Bearer {token}"})


def test_a_site_rotates_its_own_token_and_the_old_one_stops_working(registry: Any) -> None:
    old = registry.tokens["a"]
    r = registry.client.post("/v1/sites/a/token", json={}, headers=registry.auth("a"))
    assert r.status_code == 200, r.text
    new = r.json()["token"]
    assert new != old and r.json()["token_expires_at"] is None
    assert _me(registry, old).status_code == 401
    assert _me(registry, new).json()["name"] == "a"
    site = registry.client.get("/v1/sites/a", headers=registry.admin).json()
    assert site["token_changed_by"] == "a" and site["token_created_at"] is not None


def test_only_the_site_or_the_admin_manages_a_token(registry: Any) -> None:
    before = registry.snapshot()
    for method in ("post", "delete"):
        kwargs = {"json": {}} if method == "post" else {}
        r = getattr(registry.client, method)(
            "/v1/sites/a/token", headers=registry.auth("b"), **kwargs
        )
        assert r.status_code == 403 and r.json()["error"] == "forbidden", r.text
    for bad in ({"expires_in_days": 0}, {"expires_in_days": 10_000}, {"other": 1}):
        r = registry.client.post("/v1/sites/a/token", json=bad, headers=registry.admin)
        assert r.status_code == 422, r.text
    r = registry.client.post("/v1/sites/nobody/token", json={}, headers=registry.admin)
    assert r.status_code == 404
    assert registry.snapshot() == before


def test_revoked_tokens_are_refused_until_the_admin_rotates(registry: Any) -> None:
    token = registry.tokens["a"]
    r = registry.client.delete("/v1/sites/a/token", headers=registry.auth("a"))
    assert r.status_code == 200 and r.json()["token_revoked_at"] is not None
    refused = _me(registry, token)
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
    assert (
        registry.client.post("/v1/sites/a/token", json={}, headers=registry.auth("a")).status_code
        == 401
    )
    r = registry.client.post(
        "/v1/sites/a/token", json={"expires_in_days": 30}, headers=registry.admin
    )
    assert r.status_code == 200 and r.json()["token_expires_at"] is not None
    fresh = r.json()["token"]
    assert _me(registry, fresh).json()["name"] == "a"
    site = registry.client.get("/v1/sites/a", headers=registry.admin).json()
    assert site["token_revoked_at"] is None and site["token_changed_by"] == "admin"


def test_expired_tokens_are_refused_with_the_reason(registry: Any) -> None:
    r = registry.client.post(
        "/v1/sites/b/token", json={"expires_in_days": 1}, headers=registry.admin
    )
    token = r.json()["token"]
    assert _me(registry, token).status_code == 200
    with registry.db.engine.begin() as conn:  # a day later
        conn.execute(
            text("UPDATE sites SET token_expires_at = :t WHERE name = 'b'"),
            {"t": "2000-01-01 00:00:00+00:00"},
        )
    registry.client.app.state.registry.principals.clear()  # the cache answers for seconds
    expired = _me(registry, token)
    assert expired.status_code == 401 and "expired" in expired.json()["detail"]


def test_site_creation_may_set_an_expiry(registry: Any, artifacts: Any) -> None:
    body = {
        "name": "d",
        "roles": "subscriber",
        "epsilon_budget": 1.0,
        "delta_budget": 1e-5,
        "token_expires_in_days": 7,
    }
    r = registry.client.post("/v1/sites", json=body, headers=registry.admin)
    assert r.status_code == 201, r.text
    assert r.json()["token_expires_at"] is not None
