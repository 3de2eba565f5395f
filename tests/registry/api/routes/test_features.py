"""Tests of pubsubml.registry.api.routes.features: adding to and reading the feature dictionary."""

from __future__ import annotations

from typing import Any

from pubsubml.registry.schemas import FeatureList
from pubsubml.schema import Feature

WARD = Feature(
    name="ward",
    kind="categorical",
    categories=("icu", "er", "gen"),
    default="gen",
    description="where the patient stays",
)
TEMP = Feature(name="temp", lower=34.0, upper=43.0, default=37.0)


def _json(*features: Feature) -> dict[str, Any]:
    return {"features": [f.model_dump(mode="json") for f in features]}


def test_add_answers_only_the_new_features(registry_factory: Any, support: Any) -> None:
    reg = registry_factory()
    reg.add_features(["age"])
    age = support.DICTIONARY["age"]
    client = reg.client

    mixed = client.post("/v1/features", json=_json(age, WARD, WARD, TEMP), headers=reg.admin)

    assert mixed.status_code == 201, mixed.text
    assert FeatureList.model_validate(mixed.json()).features == [WARD, TEMP]
    nothing = client.post("/v1/features", json=_json(), headers=reg.admin)
    assert (nothing.status_code, nothing.json()) == (200, {"features": []})
    stored = FeatureList.model_validate(client.get("/v1/features", headers=reg.admin).json())
    assert stored.features == [age, TEMP, WARD]  # by name, definitions as sent


def test_refusals_of_every_endpoint(registry_factory: Any) -> None:
    reg = registry_factory()
    reg.add_site("a")
    client = reg.client
    before = reg.snapshot()

    anonymous = [client.get("/v1/features"), client.post("/v1/features", json=_json(TEMP))]
    codes = [(r.status_code, r.json()["error"]) for r in anonymous]
    assert codes == [(401, "unauthenticated")] * 2

    by_site = client.post("/v1/features", json=_json(TEMP), headers=reg.auth("a"))
    assert (by_site.status_code, by_site.json()["error"]) == (403, "forbidden")

    unbounded = {"name": "x", "kind": "numeric", "default": 1.0}
    for bad in ({}, {"features": [unbounded]}, {**_json(TEMP), "more": []}, {"features": "temp"}):
        r = client.post("/v1/features", json=bad, headers=reg.admin)
        assert (r.status_code, r.json()["error"]) == (422, "validation_error"), bad

    assert reg.snapshot() == before
    assert client.get("/v1/features", headers=reg.auth("a")).json() == {"features": []}
