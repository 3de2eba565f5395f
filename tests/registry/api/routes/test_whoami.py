"""Tests of pubsubml.registry.api.routes.whoami: who the bearer token belongs to."""

from __future__ import annotations

from typing import Any


def test_whoami_answers_kind_name_and_roles(registry_factory: Any) -> None:
    reg = registry_factory()
    reg.add_site("writer", roles="publisher")
    reg.add_site("reader", roles="subscriber")

    def me(headers: dict[str, str]) -> Any:
        return reg.client.get("/v1/whoami", headers=headers)

    assert me(reg.admin).json() == {"kind": "admin", "name": "admin", "roles": None}
    writer = {"kind": "site", "name": "writer", "roles": "publisher"}
    assert me(reg.auth("writer")).json() == writer
    assert me(reg.auth("reader")).json() == {
        "kind": "site",
        "name": "reader",
        "roles": "subscriber",
    }
    for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Basic YTpi"}):
        r = me(headers)
        assert (r.status_code, r.json()["error"]) == (401, "unauthenticated"), headers
    forged = me({"Authorization": f"Bearer {reg.tokens['writer']}x"})
    assert forged.status_code == 401 and "invalid token" in forged.json()["detail"]
