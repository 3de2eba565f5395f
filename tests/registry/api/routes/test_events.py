"""Tests of pubsubml.registry.api.routes.events: the registry event feed and its long poll."""

from __future__ import annotations

from typing import Any

from pubsubml.registry.schemas import EventPage


def test_event_pages(registry_factory: Any) -> None:
    reg = registry_factory(long_poll_max_seconds=0.05)
    client = reg.client
    empty = client.get("/v1/events", headers=reg.admin)
    assert empty.json() == {"events": [], "next_cursor": 0}
    reg.add_features(["age", "sex"])
    reg.add_site("a", roles="publisher")

    page = EventPage.model_validate(client.get("/v1/events", headers=reg.auth("a")).json())

    added, created = page.events
    assert (added.kind, added.site, added.model_id) == ("features.added", None, None)
    assert added.payload == {"names": ["age", "sex"]}
    assert (created.kind, created.site, created.payload) == (
        "site.created",
        "a",
        {"name": "a", "roles": "publisher"},
    )
    assert added.position < created.position == page.next_cursor
    assert added.created_at.tzinfo is not None

    first = client.get("/v1/events", params={"limit": 1}, headers=reg.auth("a")).json()
    assert [e["position"] for e in first["events"]] == [added.position]
    assert first["next_cursor"] == added.position
    rest = client.get(
        "/v1/events", params={"after": first["next_cursor"]}, headers=reg.auth("a")
    ).json()
    assert [e["kind"] for e in rest["events"]] == ["site.created"]

    # The wait is bounded by long_poll_max_seconds whatever timeout the caller asks for.
    waited = client.get(
        "/v1/events", params={"after": page.next_cursor, "timeout": 1e9}, headers=reg.admin
    )
    assert waited.json() == {"events": [], "next_cursor": page.next_cursor}


def test_refusals(registry_factory: Any) -> None:
    reg = registry_factory()

    anonymous = reg.client.get("/v1/events")
    assert (anonymous.status_code, anonymous.json()["error"]) == (401, "unauthenticated")
    for params in ({"limit": 0}, {"limit": 1001}, {"timeout": -1}, {"timeout": "nan"}):
        r = reg.client.get("/v1/events", params=params, headers=reg.admin)
        assert (r.status_code, r.json()["error"]) == (422, "validation_error"), params
        assert r.json()["errors"][0]["loc"] == ["query", next(iter(params))]
