"""Tests of pubsubml.registry.api.routes.sites: registering sites, the site directory, and token
rotation and revocation."""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta
from typing import Any

from pubsubml.registry.schemas import SiteCreated, SitePublic, SiteToken


def test_register_then_read_the_directory(registry: Any) -> None:
    client = registry.client
    reader = {"name": "reader", "roles": "subscriber", "epsilon_budget": 3.0, "delta_budget": 1e-6}
    key = registry.artifacts.public_key("writer")
    writer = {**reader, "name": "writer", "roles": "publisher", "public_key": key}

    created = client.post("/v1/sites", json=reader, headers=registry.admin)
    published = client.post("/v1/sites", json=writer, headers=registry.admin)

    assert (created.status_code, published.status_code) == (201, 201)
    new = SiteCreated.model_validate(created.json())
    assert new.token.startswith("psm_") and new.public_key is None and new.key_id is None
    assert (new.epsilon_budget, new.delta_budget) == (3.0, 1e-6)
    assert new.token_changed_by == "admin" and new.token_expires_at is None
    assert new.created_at.tzinfo is not None and new.token_created_at == new.created_at
    assert published.json()["key_id"] == hashlib.sha256(base64.b64decode(key)).hexdigest()

    token = {"Authorization": f"Bearer {new.token}"}
    one = client.get("/v1/sites/writer", headers=token)
    assert one.status_code == 200 and "token" not in one.json()
    assert SitePublic.model_validate(one.json()).public_key == key
    listed = client.get("/v1/sites", headers=token).json()["sites"]
    assert [s["name"] for s in listed] == ["a", "b", "c", "reader", "writer"]
    assert listed[-1] == one.json()

    missing = client.get("/v1/sites/nobody", headers=token)
    assert (missing.status_code, missing.json()["error"]) == (404, "not_found")


def test_rotate_and_revoke_answers(registry: Any) -> None:
    client = registry.client

    body = {"expires_in_days": 30}
    rotated = client.post("/v1/sites/b/token", json=body, headers=registry.admin)

    assert rotated.status_code == 200, rotated.text
    new = SiteToken.model_validate(rotated.json())
    assert new.name == "b" and new.token.startswith("psm_") and new.token != registry.tokens["b"]
    assert new.token_expires_at is not None
    assert new.token_expires_at - new.token_created_at == timedelta(days=30)

    first = client.delete("/v1/sites/c/token", headers=registry.admin)
    again = client.delete("/v1/sites/c/token", headers=registry.admin)

    assert (first.status_code, again.status_code) == (200, 200)
    revoked = SitePublic.model_validate(first.json())
    assert revoked.token_revoked_at is not None and revoked.token_changed_by == "admin"
    assert "token" not in first.json()
    assert again.json() == first.json()  # revoking twice changes nothing
    refused = client.get("/v1/whoami", headers=registry.auth("c"))  # no cached acceptance
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]


def test_refusals_of_every_endpoint(registry: Any) -> None:
    client = registry.client
    before = registry.snapshot()
    body = {"name": "d", "roles": "subscriber", "epsilon_budget": 1.0, "delta_budget": 1e-5}

    anonymous = [
        client.post("/v1/sites", json=body),
        client.get("/v1/sites"),
        client.get("/v1/sites/a"),
        client.post("/v1/sites/a/token", json={}),
        client.delete("/v1/sites/a/token"),
    ]
    codes = [(r.status_code, r.json()["error"]) for r in anonymous]
    assert codes == [(401, "unauthenticated")] * 5

    for method in ("post", "delete"):
        kwargs: dict[str, Any] = {"json": {}} if method == "post" else {}
        r = getattr(client, method)("/v1/sites/nobody/token", headers=registry.admin, **kwargs)
        assert (r.status_code, r.json()["error"]) == (404, "not_found"), method

    not_json = client.post(
        "/v1/sites", content=b"name=d", headers={**registry.admin, "Content-Type": "text/plain"}
    )
    assert (not_json.status_code, not_json.json()["error"]) == (422, "validation_error")

    assert registry.snapshot() == before
