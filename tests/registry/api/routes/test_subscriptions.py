"""Tests of pubsubml.registry.api.routes.subscriptions: subscribing, reading subscriptions, the
long-poll feed's JSON and the stream's refusals."""

from __future__ import annotations

import json
import re
from typing import Any

from pubsubml.registry.api.routes.subscriptions import feed_page_json
from pubsubml.registry.schemas import FeedPage, SubscriptionPublic
from pubsubml.schema.channels import Channel

CARD = '{"model_id":"m","publisher":"a","nested":{"x":[1,2.5,null]}}'


def test_an_empty_page_keeps_the_cursor() -> None:
    assert feed_page_json([], 7) == '{"items":[],"next_cursor":7}'
    assert FeedPage.model_validate_json(feed_page_json([], 0)) == FeedPage(items=[], next_cursor=0)


def test_a_page_embeds_the_stored_card_verbatim_and_ends_at_the_last_cursor() -> None:
    rows = [(3, "a" * 32, CARD), (9, "b" * 32, "{}")]

    text = feed_page_json(rows, 1)

    page = FeedPage.model_validate_json(text)
    assert [(i.cursor, i.model_id) for i in page.items] == [(3, "a" * 32), (9, "b" * 32)]
    assert page.items[0].card == json.loads(CARD) and page.next_cursor == 9
    assert f'"card":{CARD}' in text  # not re-encoded


def test_model_ids_are_json_escaped() -> None:
    hostile = 'x","card":{},"y":"\\\n'

    page = json.loads(feed_page_json([(1, hostile, "{}")], 0))

    assert page["items"] == [{"cursor": 1, "model_id": hostile, "card": {}}]


def test_subscribe_answers_the_subscription_and_lists_it(registry: Any) -> None:
    r = registry.client.post(
        "/v1/subscriptions",
        json={"channel": "wbc|age", "task": "classification", "classes": [0, 1]},
        headers=registry.auth("b"),
    )

    assert r.status_code == 201, r.text
    sub = SubscriptionPublic.model_validate(r.json())
    assert re.fullmatch(r"[0-9a-f]{32}", sub.id)
    assert (sub.site, sub.task, sub.classes) == ("b", "classification", [0, 1])
    assert sub.channel == str(Channel.parse("wbc|age")) == "wbc | age"  # the parsed channel

    one = registry.client.get(f"/v1/subscriptions/{sub.id}", headers=registry.auth("b"))
    assert SubscriptionPublic.model_validate(one.json()) == sub

    on_behalf = registry.client.post(
        "/v1/subscriptions",
        json={"site": "c", "channel": "sex", "task": "regression"},
        headers=registry.admin,
    )
    assert on_behalf.status_code == 201 and on_behalf.json()["site"] == "c"
    every = registry.client.get("/v1/subscriptions", headers=registry.admin).json()
    assert [s["site"] for s in every["subscriptions"]] == ["b", "c"]
    mine = registry.client.get("/v1/subscriptions", headers=registry.auth("c")).json()
    assert [s["id"] for s in mine["subscriptions"]] == [on_behalf.json()["id"]]

    feed = registry.client.get(f"/v1/subscriptions/{sub.id}/models", headers=registry.auth("b"))
    assert feed.headers["content-type"] == "application/json"
    assert feed.json() == {"items": [], "next_cursor": 0}


def test_refusals_of_every_endpoint(registry: Any) -> None:
    sub = registry.subscribe("b", "age")
    before = registry.snapshot()
    client = registry.client
    body = {"channel": "age", "task": "classification"}

    anonymous = [
        client.post("/v1/subscriptions", json=body),
        client.get("/v1/subscriptions"),
        client.get(f"/v1/subscriptions/{sub}"),
        client.get(f"/v1/subscriptions/{sub}/models"),
        client.get(f"/v1/subscriptions/{sub}/stream"),
    ]
    codes = [(r.status_code, r.json()["error"]) for r in anonymous]
    assert codes == [(401, "unauthenticated")] * 5

    unnamed = client.post("/v1/subscriptions", json=body, headers=registry.admin)
    assert (unnamed.status_code, unnamed.json()["error"]) == (403, "forbidden")
    assert "must name the subscribing site" in unnamed.json()["detail"]
    unknown_site = client.post(
        "/v1/subscriptions", json={**body, "site": "nobody"}, headers=registry.admin
    )
    assert (unknown_site.status_code, unknown_site.json()["error"]) == (404, "not_found")

    url = f"/v1/subscriptions/{sub}/models"
    for params in ({"limit": 0}, {"limit": 1001}, {"timeout": -1}, {"timeout": "soon"}):
        r = client.get(url, params=params, headers=registry.auth("b"))
        assert (r.status_code, r.json()["error"]) == (422, "validation_error"), params
        assert r.json()["errors"][0]["loc"] == ["query", next(iter(params))]
    # The poll reads its parameters itself; its errors are those of a declared parameter (the
    # stream's ``after``), and the last of repeated values counts, as FastAPI takes it.
    for after in ("-1", "x", str(2**63), "1.5"):
        polled = client.get(url, params={"after": after}, headers=registry.auth("b"))
        streamed = client.get(
            f"/v1/subscriptions/{sub}/stream", params={"after": after}, headers=registry.auth("b")
        )
        assert polled.status_code == streamed.status_code == 422, after
        assert polled.json() == streamed.json(), after
    two = client.get(f"{url}?limit=0&limit=5&after=x&after=0", headers=registry.auth("b"))
    assert two.status_code == 200 and two.json() == {"items": [], "next_cursor": 0}
    r = client.get(
        f"/v1/subscriptions/{sub}/stream", params={"after": -1}, headers=registry.auth("b")
    )
    assert (r.status_code, r.json()["error"]) == (422, "validation_error")

    # Another site's subscription answers 404 before any event is streamed.
    foreign = client.get(f"/v1/subscriptions/{sub}/stream", headers=registry.auth("c"))
    assert (foreign.status_code, foreign.json()["error"]) == (404, "not_found")
    assert foreign.headers["content-type"] == "application/json"

    assert registry.snapshot() == before


def test_the_wildcard_channel_receives_every_model_of_its_task(registry: Any) -> None:
    before = registry.artifacts("a", features=("wbc",), seed=11)
    assert registry.publish(before, site="a").status_code == 201

    r = registry.client.post(
        "/v1/subscriptions",
        json={"channel": " * ", "task": "classification", "classes": [0, 1]},
        headers=registry.auth("b"),
    )

    assert r.status_code == 201, r.text
    sub = SubscriptionPublic.model_validate(r.json())
    assert sub.channel == "*"
    after = registry.artifacts("c", features=("bmi", "sex"), seed=12)
    regression = registry.artifacts("c", features=("age",), classes=None, seed=13)
    own = registry.artifacts("b", features=("age",), seed=14)
    for art, site in ((after, "c"), (regression, "c"), (own, "b")):
        assert registry.publish(art, site=site).status_code == 201
    delivered = [item["model_id"] for item in registry.feed("b", sub.id)]
    assert delivered == [before.card.model_id, after.card.model_id]  # backfilled, then new


def test_a_wildcard_mixed_with_features_is_a_channel_syntax_error(registry: Any) -> None:
    before = registry.snapshot()

    r = registry.client.post(
        "/v1/subscriptions",
        json={"channel": "age | *", "task": "classification"},
        headers=registry.auth("b"),
    )

    assert (r.status_code, r.json()["error"]) == (422, "channel_syntax")
    assert "must be the whole channel" in r.json()["detail"]
    assert registry.snapshot() == before


def test_polls_of_ones_own_feed_are_answered_on_the_event_loop_on_postgresql(
    registry: Any, monkeypatch: Any
) -> None:
    from pubsubml.registry.api.routes import subscriptions as routes

    sub = registry.subscribe("b", "age")
    assert registry.publish(registry.artifacts("a", seed=60), site="a").status_code == 201
    threadpool_reads: list[int] = []
    real = routes._read

    def counted(*args: Any) -> Any:
        threadpool_reads.append(args[3])  # the cursor read after
        return real(*args)

    monkeypatch.setattr(routes, "_read", counted)

    first = registry.feed("b", sub)  # its card is not cached yet: a second statement reads it
    again = registry.feed("b", sub)
    as_admin = registry.client.get(f"/v1/subscriptions/{sub}/models", headers=registry.admin)
    last = first[-1]["cursor"]
    nothing_new = registry.feed("b", sub, after=last)
    not_theirs = registry.client.get(f"/v1/subscriptions/{sub}/models", headers=registry.auth("c"))

    assert len(first) == 1 and again == first and as_admin.json()["items"] == first
    assert nothing_new == [] and not_theirs.status_code == 404
    if registry.settings.database_url.startswith("postgresql"):
        assert threadpool_reads == [0]  # only the refusal (404) is read in the thread pool
    else:
        assert threadpool_reads == [0, 0, 0, last, 0]
