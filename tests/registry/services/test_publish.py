"""Tests of pubsubml.registry.services.publish: the publish path end to end."""

from __future__ import annotations

import pytest

from pubsubml.registry.schemas import ModelPublic
from pubsubml.registry.services.model_reads import get_model
from pubsubml.registry.services.publish import publish_model
from registry.services.conftest import MAX_BYTES, Env


@pytest.mark.parametrize("visible_to", [None, ["c", "a", "c"]])
def test_publish_model_is_idempotent_and_validates_once(
    env: Env, visible_to: list[str] | None
) -> None:
    art = env.artifacts("b", seed=211)

    def publish() -> ModelPublic:
        return publish_model(
            env.db,
            env.store,
            env.sites["b"],
            art.card.to_json(),
            art.weights,
            lock=env.lock,
            validator=env.validator,  # type: ignore[arg-type]
            visible_to=visible_to,
            max_weights_bytes=MAX_BYTES,
        )

    first, second = publish(), publish()  # the answer built from the new row, then one read
    assert (first.created, second.created) == (True, False)
    assert second.model_dump(exclude={"created"}) == first.model_dump(exclude={"created"})
    with env.db.read() as s:
        stored = get_model(s, env.sites["b"], first.model_id)
    assert stored.model_dump(exclude={"created"}) == first.model_dump(exclude={"created"})
    assert first.visible_to == (None if visible_to is None else ["a", "c"])
    assert env.validator.calls == 1
