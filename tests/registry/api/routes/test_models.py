"""Tests of pubsubml.registry.api.routes.models: publish, list, read and download models."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.validation import validate_untrusted
from pubsubml.registry.api.deps import get_state
from pubsubml.registry.schemas import ModelPublic

NEVER = "e" * 32


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
    """The registry, validating uploads in this process."""
    app = registry.client.app
    state = dataclasses.replace(app.state.registry, validator=InProcessValidator())
    app.dependency_overrides[get_state] = lambda: state
    yield registry
    app.dependency_overrides.clear()


BAD_LIST_QUERIES: list[dict[str, Any]] = [
    {"task": "ranking"},
    {"limit": 0},
    {"limit": 1001},
    {"min_epsilon": -1},
    {"max_epsilon": -0.5},
    {"max_delta": -1e-9},
    {"publisher": "p" * 65},
    {"after": "first"},
    {"features": ["age"] * 257},
]


def test_refusals_of_every_endpoint(registry: Any) -> None:
    files = {"card": (None, b"{}", "application/json"), "weights": ("w", b"w", "text/plain")}
    before = registry.snapshot()
    client = registry.client

    anonymous = [
        client.post("/v1/models", files=files),
        client.get(f"/v1/models/{NEVER}"),
        client.get(f"/v1/models/{NEVER}/card"),
        client.get(f"/v1/models/{NEVER}/weights"),
        client.get(f"/v1/models/{NEVER}", headers={"Authorization": "Bearer psm_unknown"}),
    ]
    codes = [(r.status_code, r.json()["error"]) for r in anonymous]
    assert codes == [(401, "unauthenticated")] * 5

    by_admin = client.post("/v1/models", files=files, headers=registry.admin)
    assert (by_admin.status_code, by_admin.json()["error"]) == (403, "forbidden")
    assert "publisher role" in by_admin.json()["detail"]

    for suffix in ("", "/card", "/weights"):
        r = client.get(f"/v1/models/{NEVER}{suffix}", headers=registry.admin)
        assert (r.status_code, r.json()["error"]) == (404, "not_found"), suffix

    for params in BAD_LIST_QUERIES:
        r = client.get("/v1/models", params=params, headers=registry.auth("b"))
        assert (r.status_code, r.json()["error"]) == (422, "validation_error"), params
        assert r.json()["errors"][0]["loc"] == ["query", next(iter(params))]

    # With every publish slot taken, a publish waits publish_wait_seconds, then answers busy.
    real = client.app.state.registry
    full = dataclasses.replace(
        real,
        publish_slots=asyncio.Semaphore(0),
        settings=real.settings.model_copy(update={"publish_wait_seconds": 0.01}),
    )
    client.app.dependency_overrides[get_state] = lambda: full
    try:
        busy = client.post("/v1/models", files=files, headers=registry.auth("a"))
    finally:
        client.app.dependency_overrides.clear()
    assert (busy.status_code, busy.json()["error"]) == (503, "busy")
    assert busy.headers["retry-after"] == "1"
    assert "nothing was published" in busy.json()["detail"]

    assert registry.snapshot() == before


def test_publish_then_read_model_card_weights_and_pages(reg: Any) -> None:
    art, other = reg.artifacts("a", seed=201), reg.artifacts("b", seed=202)

    created = reg.publish(art, site="a", visible_to=["b"])

    assert created.status_code == 201, created.text
    body = ModelPublic.model_validate(created.json())
    assert body.created is True and body.model_id == art.card.model_id
    assert (body.publisher, body.format, body.visible_to) == ("a", "safetensors", ["b"])
    assert body.size_bytes == len(art.weights)
    assert body.weights_sha256 == hashlib.sha256(art.weights).hexdigest()
    assert body.claimed_epsilon == art.card.privacy.epsilon
    mid = art.card.model_id

    one = reg.client.get(f"/v1/models/{mid}", headers=reg.auth("b"))
    assert one.status_code == 200
    assert one.json()["card"] == json.loads(art.card.to_json())
    assert one.json()["created"] is None and one.json()["position"] == body.position
    assert one.json()["visible_to"] is None  # shown to the publisher only

    card = reg.client.get(f"/v1/models/{mid}/card", headers=reg.auth("b"))
    assert card.headers["content-type"] == "application/json"
    assert ModelCard.model_validate_json(card.content) == art.card

    weights = reg.client.get(f"/v1/models/{mid}/weights", headers=reg.auth("b"))
    assert weights.headers["content-type"] == "application/octet-stream"
    assert weights.headers["etag"] == f'"{body.weights_sha256}"'
    assert f'filename="{mid}.safetensors"' in weights.headers["content-disposition"]
    assert hashlib.sha256(weights.content).hexdigest() == body.weights_sha256

    assert reg.publish(other, site="b").status_code == 201

    def page(**params: Any) -> list[dict[str, Any]]:
        r = reg.client.get("/v1/models", params=params, headers=reg.auth("b"))
        assert r.status_code == 200, r.text
        return list(r.json()["models"])

    everything = page()
    assert [m["model_id"] for m in everything] == [mid, other.card.model_id]
    assert everything[0]["position"] < everything[1]["position"]
    assert all(m["card"] is None for m in everything)  # cards only on the single read
    assert page(limit=1) == everything[:1]
    assert page(after=everything[0]["position"]) == everything[1:]
    assert page(after=everything[1]["position"]) == []
