"""Tests of pubsubml.registry.api.routes.ledger: a site's privacy ledger and its registered data
chunks."""

from __future__ import annotations

from typing import Any

from pubsubml.registry.schemas import LedgerPublic, ScopeList


def test_ledger_and_scope_answers(registry: Any) -> None:
    client = registry.client
    registry.add_site("small", roles="subscriber", epsilon=2.5, delta=1e-6)

    fresh = client.get("/v1/sites/small/ledger", headers=registry.auth("small"))

    assert fresh.status_code == 200
    assert LedgerPublic.model_validate(fresh.json()) == LedgerPublic(
        site="small",
        epsilon_budget=2.5,
        delta_budget=1e-6,
        spent_epsilon=0.0,
        remaining_epsilon=2.5,
        neighbouring="add_remove",
        scopes=[],
        releases=[],
    )

    added = client.post(
        "/v1/sites/a/scopes", json={"scopes": ["q2", "q1", "q2"]}, headers=registry.auth("a")
    )

    assert added.status_code == 200, added.text
    scopes = ScopeList.model_validate(added.json())
    assert scopes.site == "a" and scopes.new == ["q2", "q1"]  # once each, in request order
    assert [s.label for s in scopes.scopes] == ["q1", "q2"]
    listed = client.get("/v1/sites/a/scopes", headers=registry.admin)
    assert listed.json() == {**added.json(), "new": []}
    ledger = client.get("/v1/sites/a/ledger", headers=registry.admin).json()
    assert ledger["scopes"] == listed.json()["scopes"] and ledger["releases"] == []


def test_refusals_of_every_endpoint(registry: Any) -> None:
    client = registry.client
    before = registry.snapshot()
    body = {"scopes": ["q1"]}

    anonymous = [
        client.get("/v1/sites/a/ledger"),
        client.get("/v1/sites/a/scopes"),
        client.post("/v1/sites/a/scopes", json=body),
    ]
    codes = [(r.status_code, r.json()["error"]) for r in anonymous]
    assert codes == [(401, "unauthenticated")] * 3

    for r in (
        client.get("/v1/sites/a/ledger", headers=registry.auth("b")),
        client.get("/v1/sites/a/scopes", headers=registry.auth("b")),
        client.post("/v1/sites/a/scopes", json=body, headers=registry.auth("b")),
        client.post("/v1/sites/a/scopes", json=body, headers=registry.admin),
    ):
        assert (r.status_code, r.json()["error"]) == (403, "forbidden"), r.request.url

    for r in (
        client.get("/v1/sites/nobody/ledger", headers=registry.admin),
        client.post("/v1/sites/nobody/scopes", json=body, headers=registry.auth("a")),
    ):
        assert (r.status_code, r.json()["error"]) == (404, "not_found"), r.request.url

    for bad in ({}, {"scopes": ["q1"], "extra": 1}, {"scopes": [1]}):
        r = client.post("/v1/sites/a/scopes", json=bad, headers=registry.auth("a"))
        assert (r.status_code, r.json()["error"]) == (422, "validation_error"), bad

    assert registry.snapshot() == before
