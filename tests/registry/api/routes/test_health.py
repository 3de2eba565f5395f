"""Tests of pubsubml.registry.api.routes.health: the unauthenticated liveness answer."""

from __future__ import annotations

from typing import Any


def test_health_needs_no_token_and_reports_the_upload_limit(registry_factory: Any) -> None:
    reg = registry_factory(max_upload_bytes=12_345)

    plain = reg.client.get("/v1/health")
    with_bad_token = reg.client.get("/v1/health", headers={"Authorization": "Bearer psm_nope"})

    assert plain.status_code == with_bad_token.status_code == 200
    assert plain.json() == with_bad_token.json() == {"status": "ok", "max_upload_bytes": 12_345}
    wrong = reg.client.post("/v1/health")
    assert (wrong.status_code, wrong.json()["error"]) == (405, "method_not_allowed")
