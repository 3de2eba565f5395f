"""Contract tests (every backend): authentication, sites, feature dictionary, visibility, hostile
ids and names, ledger and contributions access."""

from __future__ import annotations

from typing import Any

import pytest


def test_every_request_is_authenticated(registry: Any) -> None:
    for path in (
        "/v1/sites",
        "/v1/models",
        "/v1/features",
        "/v1/subscriptions",
        "/v1/events",
        "/v1/whoami",
    ):
        r = registry.client.get(path)
        assert r.status_code == 401, path
        assert r.json()["error"] == "unauthenticated" and "Bearer" in r.json()["detail"]
        assert r.headers["www-authenticate"] == "Bearer"
        bad = registry.client.get(path, headers={"Authorization": "Bearer psm_nope"})
        assert bad.status_code == 401 and "invalid token" in bad.json()["detail"]
    assert registry.client.get("/v1/health").status_code == 200


def test_whoami_and_openapi(registry: Any) -> None:
    assert registry.client.get("/v1/whoami", headers=registry.auth("a")).json() == {
        "kind": "site",
        "name": "a",
        "roles": "both",
    }
    assert registry.client.get("/v1/whoami", headers=registry.admin).json()["kind"] == "admin"
    spec = registry.client.get("/openapi.json").json()
    for path in (
        "/v1/models",
        "/v1/subscriptions/{subscription_id}/models",
        "/v1/sites/{name}/ledger",
    ):
        assert path in spec["paths"]
    assert "multipart/form-data" in spec["paths"]["/v1/models"]["post"]["requestBody"]["content"]


def test_sites_admin_only_and_validated(registry: Any) -> None:
    body = {"name": "d", "roles": "subscriber", "epsilon_budget": 1.0, "delta_budget": 1e-5}
    r = registry.client.post("/v1/sites", json=body, headers=registry.auth("a"))
    assert r.status_code == 403 and "administrator" in r.json()["detail"]
    before = registry.snapshot()
    bad_bodies = [
        {**body, "name": "../../etc/passwd"},
        {**body, "name": "x'; DROP TABLE sites;--"},
        {**body, "epsilon_budget": 0.0},
        {**body, "epsilon_budget": -1.0},
        {**body, "delta_budget": 0.0},
        {**body, "delta_budget": 1.0},
        {**body, "roles": "publisher"},  # a publisher needs a key
        {**body, "public_key": "not-a-key"},
        {**body, "unexpected": 1},
    ]
    for bad in bad_bodies:
        r = registry.client.post("/v1/sites", json=bad, headers=registry.admin)
        assert r.status_code == 422, bad
        assert r.json()["error"] == "validation_error" and r.json()["detail"].startswith(
            "invalid request"
        )
    r = registry.client.post("/v1/sites", json={**body, "name": "a"}, headers=registry.admin)
    assert r.status_code == 409 and "already exists" in r.json()["detail"]
    assert registry.snapshot() == before
    created = registry.client.post("/v1/sites", json=body, headers=registry.admin)
    assert created.status_code == 201 and created.json()["token"].startswith("psm_")
    listed = registry.client.get("/v1/sites", headers=registry.auth("b")).json()["sites"]
    assert [s["name"] for s in listed] == ["a", "b", "c", "d"]
    assert all("token" not in s for s in listed)


def test_tokens_are_stored_hashed(registry: Any) -> None:
    from sqlalchemy import text

    with registry.db.engine.connect() as conn:
        stored = conn.execute(text("SELECT token_hash FROM sites WHERE name = 'a'")).scalar_one()
    assert registry.tokens["a"] not in stored and len(stored) == 64


def test_feature_dictionary(registry: Any, support: Any) -> None:
    age = support.DICTIONARY["age"].model_dump(mode="json")
    r = registry.client.post("/v1/features", json={"features": [age]}, headers=registry.admin)
    assert r.status_code == 200 and r.json()["features"] == []  # identical re-add: nothing new
    before = registry.snapshot()
    changed = {**age, "upper": 120.0}
    r = registry.client.post("/v1/features", json={"features": [changed]}, headers=registry.admin)
    assert r.status_code == 409 and "immutable" in r.json()["detail"]
    r = registry.client.post("/v1/features", json={"features": [age]}, headers=registry.auth("a"))
    assert r.status_code == 403
    r = registry.client.post(
        "/v1/features", json={"features": [{**age, "name": "../x"}]}, headers=registry.admin
    )
    assert r.status_code == 422
    assert registry.snapshot() == before
    names = [
        f["name"]
        for f in registry.client.get("/v1/features", headers=registry.auth("c")).json()["features"]
    ]
    assert names == sorted(support.DICTIONARY.names)


HOSTILE = [
    "..%2F..%2Fetc%2Fpasswd",
    "%2E%2E",
    "1'%20OR%20'1'%3D'1",
    "x%3B%20DROP%20TABLE%20models%3B--",
    "0" * 200,
]


@pytest.mark.parametrize("ident", HOSTILE)
def test_hostile_ids_are_not_found(registry: Any, ident: str) -> None:
    art = registry.artifacts("a", seed=30)
    assert registry.publish(art, site="a").status_code == 201
    before = registry.snapshot()
    for path in (
        f"/v1/models/{ident}",
        f"/v1/models/{ident}/card",
        f"/v1/models/{ident}/weights",
        f"/v1/subscriptions/{ident}",
        f"/v1/subscriptions/{ident}/models",
        f"/v1/sites/{ident}",
        f"/v1/sites/{ident}/ledger",
    ):
        r = registry.client.get(path, headers=registry.auth("b"))
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"] == "not_found"
    r = registry.client.get(
        "/v1/models", params={"publisher": "a' OR '1'='1"}, headers=registry.auth("b")
    )
    assert r.status_code == 200 and r.json()["models"] == []
    assert registry.snapshot() == before


def test_asymmetric_visibility(registry: Any) -> None:
    shared = registry.artifacts("a", seed=31)
    assert registry.publish(shared, site="a", visible_to=["b"]).status_code == 201
    mid = shared.card.model_id
    sub_b = registry.subscribe("b", "age")
    sub_c = registry.subscribe("c", "age")
    assert [i["model_id"] for i in registry.feed("b", sub_b)] == [mid]
    assert registry.feed("c", sub_c) == []
    never = "f" * 32
    for suffix in ("", "/card", "/weights"):
        hidden = registry.client.get(f"/v1/models/{mid}{suffix}", headers=registry.auth("c"))
        absent = registry.client.get(f"/v1/models/{never}{suffix}", headers=registry.auth("c"))
        assert hidden.status_code == absent.status_code == 404
        assert hidden.json()["detail"].replace(mid, "X") == absent.json()["detail"].replace(
            never, "X"
        )
        assert (
            registry.client.get(f"/v1/models/{mid}{suffix}", headers=registry.auth("b")).status_code
            == 200
        )
    assert registry.client.get("/v1/models", headers=registry.auth("c")).json()["models"] == []
    own = registry.client.get(f"/v1/models/{mid}", headers=registry.auth("a")).json()
    assert own["visible_to"] == ["b"]
    assert (
        registry.client.get(f"/v1/models/{mid}", headers=registry.auth("b")).json()["visible_to"]
        is None
    )
    kinds_c = [
        e["kind"]
        for e in registry.client.get("/v1/events", headers=registry.auth("c")).json()["events"]
    ]
    assert "model.published" not in kinds_c
    r = registry.client.post(
        "/v1/contributions",
        json={"subscriber": "c", "scores": {mid: 0.5}},
        headers=registry.auth("c"),
    )
    assert r.status_code == 404


def test_ledger_access(registry: Any) -> None:
    assert registry.client.get("/v1/sites/a/ledger", headers=registry.auth("a")).status_code == 200
    assert registry.client.get("/v1/sites/a/ledger", headers=registry.admin).status_code == 200
    r = registry.client.get("/v1/sites/a/ledger", headers=registry.auth("b"))
    assert r.status_code == 403 and "ledger" in r.json()["detail"]
    empty = registry.client.get("/v1/sites/a/ledger", headers=registry.auth("a")).json()
    assert empty["spent_epsilon"] == 0.0 and empty["remaining_epsilon"] == 50.0


def test_contributions(registry: Any) -> None:
    a1, a2 = registry.artifacts("a", seed=32), registry.artifacts("a", seed=33)
    for art in (a1, a2):
        assert registry.publish(art, site="a").status_code == 201
    scores = {a1.card.model_id: 0.6, a2.card.model_id: 0.3}
    r = registry.client.post(
        "/v1/contributions", json={"subscriber": "b", "scores": scores}, headers=registry.auth("b")
    )
    assert r.status_code == 201, r.text
    before = registry.snapshot()
    bad = [
        ({"subscriber": "b", "scores": {a1.card.model_id: 0.8, a2.card.model_id: 0.8}}, 422),
        ({"subscriber": "b", "scores": {a1.card.model_id: -0.1}}, 422),
        ({"subscriber": "b", "scores": {"../../x": 0.1}}, 422),
        ({"subscriber": "c", "scores": {a1.card.model_id: 0.1}}, 403),
        ({"subscriber": "b", "scores": {"e" * 32: 0.1}}, 404),
    ]
    for body, status in bad:
        r = registry.client.post("/v1/contributions", json=body, headers=registry.auth("b"))
        assert r.status_code == status, (body, r.text)
    assert registry.snapshot() == before
    listed = registry.client.get(
        "/v1/contributions", params={"model_id": a1.card.model_id}, headers=registry.auth("a")
    )
    assert [(c["subscriber"], c["score"]) for c in listed.json()["contributions"]] == [("b", 0.6)]
