"""Contract tests (every backend): subscriptions, channel matching, cursors, the event log."""

from __future__ import annotations

from typing import Any


def _ids(items: list[dict[str, Any]]) -> list[str]:
    return [i["model_id"] for i in items]


def test_late_subscription_sees_history_and_resumes_by_cursor(registry: Any) -> None:
    m1 = registry.artifacts("a", seed=40)
    m2 = registry.artifacts("c", seed=41)
    m3 = registry.artifacts("a", seed=42)
    assert registry.publish(m1, site="a").status_code == 201
    assert registry.publish(m2, site="c").status_code == 201
    sub = registry.subscribe("b", "age")
    first = registry.feed("b", sub)
    assert _ids(first) == [m1.card.model_id, m2.card.model_id]
    assert registry.publish(m3, site="a").status_code == 201
    everything = registry.feed("b", sub)
    cursors = [i["cursor"] for i in everything]
    assert cursors == sorted(set(cursors))
    assert _ids(everything) == [m1.card.model_id, m2.card.model_id, m3.card.model_id]
    resumed = registry.feed("b", sub, after=first[-1]["cursor"])
    assert _ids(resumed) == [m3.card.model_id]
    assert registry.feed("b", sub, after=everything[-1]["cursor"]) == []
    assert everything[0]["card"]["publisher"] == "a"


def test_channel_task_and_label_matching(registry: Any) -> None:
    cases = {
        "age_sex": registry.artifacts("a", seed=43, features=("age", "sex")),
        "age": registry.artifacts("a", seed=44, features=("age",)),
        "wbc_bmi": registry.artifacts("a", seed=45, features=("wbc", "bmi")),
        "regression": registry.artifacts(
            "a", seed=46, features=("wbc", "age", "sex"), classes=None
        ),
        "three_classes": registry.artifacts("a", seed=47, features=("wbc",), classes=(0, 1, 2)),
    }
    for art in cases.values():
        assert registry.publish(art, site="a").status_code == 201
    channel = "wbc | sex & age"
    binary = registry.subscribe("b", channel, classes=(0, 1))
    any_labels = registry.subscribe("b", channel, classes=None)
    regression = registry.subscribe("b", channel, task="regression", classes=None)
    own = registry.subscribe("a", channel, classes=None)
    mid = {k: v.card.model_id for k, v in cases.items()}
    assert _ids(registry.feed("b", binary)) == [mid["age_sex"], mid["wbc_bmi"]]
    assert _ids(registry.feed("b", any_labels)) == [
        mid["age_sex"],
        mid["wbc_bmi"],
        mid["three_classes"],
    ]
    assert _ids(registry.feed("b", regression)) == [mid["regression"]]
    assert registry.feed("a", own) == []  # a site's own models are not delivered to it


def test_bad_subscriptions_change_nothing(registry: Any) -> None:
    registry.add_site("writer", roles="publisher")
    before = registry.snapshot()
    bad = [
        ("b", {"channel": "age &", "task": "classification"}, 422, "channel_syntax"),
        ("b", {"channel": "age & & sex", "task": "classification"}, 422, "channel_syntax"),
        (
            "b",
            {"channel": "age; DROP TABLE subscriptions", "task": "classification"},
            422,
            "channel_syntax",
        ),
        ("b", {"channel": "../../etc/passwd", "task": "classification"}, 422, "channel_syntax"),
        ("b", {"channel": "", "task": "classification"}, 422, "validation_error"),
        ("b", {"channel": "zzz", "task": "classification"}, 422, "schema_mismatch"),
        ("b", {"channel": "age", "task": "ranking"}, 422, "validation_error"),
        ("b", {"channel": "age", "task": "regression", "classes": [0, 1]}, 422, "validation_error"),
        ("b", {"channel": "age", "task": "classification", "site": "c"}, 403, "forbidden"),
        ("writer", {"channel": "age", "task": "classification"}, 403, "forbidden"),
    ]
    for site, body, status, code in bad:
        r = registry.client.post("/v1/subscriptions", json=body, headers=registry.auth(site))
        assert (r.status_code, r.json()["error"]) == (status, code), (body, r.text)
        assert r.json()["detail"]
    assert registry.snapshot() == before


def test_subscriptions_are_private(registry: Any) -> None:
    sub = registry.subscribe("b", "age")
    assert (
        registry.client.get(f"/v1/subscriptions/{sub}", headers=registry.auth("b")).status_code
        == 200
    )
    assert (
        registry.client.get(f"/v1/subscriptions/{sub}", headers=registry.admin).status_code == 200
    )
    for path in (f"/v1/subscriptions/{sub}", f"/v1/subscriptions/{sub}/models"):
        r = registry.client.get(path, headers=registry.auth("c"))
        assert r.status_code == 404
    assert (
        registry.client.get("/v1/subscriptions", headers=registry.auth("c")).json()["subscriptions"]
        == []
    )
    mine = registry.client.get("/v1/subscriptions", headers=registry.auth("b")).json()[
        "subscriptions"
    ]
    assert [s["id"] for s in mine] == [sub] and mine[0]["channel"] == "age"
    kinds_c = [
        e["kind"]
        for e in registry.client.get("/v1/events", headers=registry.auth("c")).json()["events"]
    ]
    assert "subscription.created" not in kinds_c


def test_event_log_is_ordered_and_resumable(registry: Any) -> None:
    art = registry.artifacts("a", seed=48)
    assert registry.publish(art, site="a").status_code == 201
    page = registry.client.get("/v1/events", headers=registry.admin).json()
    positions = [e["position"] for e in page["events"]]
    assert positions == sorted(set(positions)) and page["next_cursor"] == positions[-1]
    kinds = [e["kind"] for e in page["events"]]
    assert kinds[:2] == ["features.added", "site.created"] and kinds[-1] == "model.published"
    after = registry.client.get(
        "/v1/events", params={"after": positions[-2]}, headers=registry.admin
    ).json()
    assert [e["position"] for e in after["events"]] == positions[-1:]
    waited = registry.client.get(
        "/v1/events", params={"after": positions[-1], "timeout": 0.2}, headers=registry.admin
    ).json()
    assert waited == {"events": [], "next_cursor": positions[-1]}


def test_long_poll_answers_at_once_when_items_exist(registry: Any) -> None:
    sub = registry.subscribe("b", "age")
    assert registry.publish(registry.artifacts("a", seed=49), site="a").status_code == 201
    r = registry.client.get(
        f"/v1/subscriptions/{sub}/models", params={"timeout": 30}, headers=registry.auth("b")
    )
    assert len(r.json()["items"]) == 1
    empty = registry.client.get(
        f"/v1/subscriptions/{sub}/models",
        params={"after": r.json()["next_cursor"], "timeout": 0.1},
        headers=registry.auth("b"),
    ).json()
    assert empty == {"items": [], "next_cursor": r.json()["next_cursor"]}
