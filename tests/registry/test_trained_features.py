"""A model trained with some features at their public defaults reaches only subscribers of the
features it was trained on (its card's ``defaulted_features``)."""

from __future__ import annotations

from typing import Any

from pubsubml.hub import LocalHub


def test_channels_deliver_a_model_only_for_the_features_it_was_trained_on(
    registry: Any,
) -> None:
    plain = registry.artifacts("a", seed=41)
    extended = registry.artifacts.resign(plain.card, plain.weights, "a", defaulted_features=["sex"])
    assert extended.card.trained_features == ["age"]
    on_sex = registry.subscribe("b", "sex")
    on_age = registry.subscribe("b", "age")

    assert registry.publish(extended, site="a").status_code == 201

    assert registry.feed("b", on_sex) == []
    assert [i["model_id"] for i in registry.feed("b", on_age)] == [extended.card.model_id]
    listed = registry.client.get(
        f"/v1/models/{extended.card.model_id}", headers=registry.auth("b")
    ).json()
    assert listed["features"] == ["age"]


def test_the_in_process_hub_matches_trained_features_too(artifacts: Any) -> None:
    from pubsubml.schema import Channel

    hub = LocalHub()
    plain = artifacts("a", seed=42)
    extended = artifacts.resign(plain.card, plain.weights, "a", defaulted_features=["sex"])
    on_sex = hub.subscribe("b", Channel.parse("sex"), task="classification", classes=[0, 1])
    on_age = hub.subscribe("b", Channel.parse("age"), task="classification", classes=[0, 1])

    hub.publish(extended.card, extended.weights)

    assert hub.poll(on_sex) == [] and len(hub.poll(on_age)) == 1
