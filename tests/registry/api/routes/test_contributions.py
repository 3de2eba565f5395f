"""Tests of pubsubml.registry.api.routes.contributions: reporting and listing subscribers'
contribution scores."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import pytest

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.validation import validate_untrusted
from pubsubml.registry.api.deps import get_state
from pubsubml.registry.schemas import ContributionList


class InProcessValidator:
    """The checks of the validation workers (safe loader, recomputed ε), run in this process."""

    def validate(
        self, card: ModelCard, weights: bytes, *, site_delta: float, max_weights_bytes: int
    ) -> float:
        return validate_untrusted(
            card, weights, site_delta=site_delta, max_weights_bytes=max_weights_bytes
        )


@pytest.fixture
def reg(registry: Any) -> Iterator[Any]:
    """The registry with one model of site a, validated in this process."""
    app = registry.client.app
    state = dataclasses.replace(app.state.registry, validator=InProcessValidator())
    app.dependency_overrides[get_state] = lambda: state
    art = registry.artifacts("a", seed=210)
    assert registry.publish(art, site="a").status_code == 201
    registry.model_id = art.card.model_id
    yield registry
    app.dependency_overrides.clear()


def test_report_then_list(reg: Any) -> None:
    client, mid = reg.client, reg.model_id

    first = client.post(
        "/v1/contributions", json={"subscriber": "b", "scores": {mid: 0.4}}, headers=reg.auth("b")
    )
    second = client.post(
        "/v1/contributions", json={"subscriber": "c", "scores": {mid: 0.2}}, headers=reg.admin
    )
    empty = client.post(
        "/v1/contributions", json={"subscriber": "b", "scores": {}}, headers=reg.auth("b")
    )

    assert (first.status_code, second.status_code, empty.status_code) == (201, 201, 201)
    stored = ContributionList.model_validate(first.json()).contributions
    assert [(c.subscriber, c.model_id, c.score) for c in stored] == [("b", mid, 0.4)]
    assert re.fullmatch(r"[0-9a-f]{32}", stored[0].report_id)
    assert second.json()["contributions"][0]["subscriber"] == "c"
    assert empty.json() == {"contributions": []}

    def scores(**params: Any) -> list[tuple[str, float]]:
        r = client.get("/v1/contributions", params=params, headers=reg.auth("a"))
        assert r.status_code == 200, r.text
        return [(c["subscriber"], c["score"]) for c in r.json()["contributions"]]

    assert scores() == [("c", 0.2), ("b", 0.4)]  # newest first
    assert scores(limit=1) == [("c", 0.2)]
    assert scores(subscriber="b") == [("b", 0.4)]
    assert scores(subscriber="nobody") == []
    assert scores(model_id="f" * 32) == []
    assert scores(model_id=mid, subscriber="c") == [("c", 0.2)]


def test_refusals_of_every_endpoint(registry: Any) -> None:
    client = registry.client
    before = registry.snapshot()
    body = {"subscriber": "b", "scores": {"f" * 32: 0.5}}

    anonymous = [client.post("/v1/contributions", json=body), client.get("/v1/contributions")]
    codes = [(r.status_code, r.json()["error"]) for r in anonymous]
    assert codes == [(401, "unauthenticated")] * 2

    for params in (
        {"limit": 0},
        {"limit": 10_001},
        {"model_id": "m" * 65},
        {"subscriber": "s" * 65},
    ):
        r = client.get("/v1/contributions", params=params, headers=registry.auth("b"))
        assert (r.status_code, r.json()["error"]) == (422, "validation_error"), params

    unknown_site = client.post(
        "/v1/contributions", json={**body, "subscriber": "nobody"}, headers=registry.admin
    )
    assert (unknown_site.status_code, unknown_site.json()["error"]) == (404, "not_found")
    unknown_model = client.post("/v1/contributions", json=body, headers=registry.auth("b"))
    assert (unknown_model.status_code, unknown_model.json()["error"]) == (404, "not_found")
    extra = client.post("/v1/contributions", json={**body, "at": 1}, headers=registry.auth("b"))
    assert (extra.status_code, extra.json()["error"]) == (422, "validation_error")

    assert registry.snapshot() == before


def test_a_site_without_the_subscriber_role_cannot_report_scores(reg: Any) -> None:
    reg.add_site("writer", roles="publisher")

    r = reg.client.post(
        "/v1/contributions",
        json={"subscriber": "writer", "scores": {reg.model_id: 1.0}},
        headers=reg.auth("writer"),
    )

    assert r.status_code == 403, r.text
