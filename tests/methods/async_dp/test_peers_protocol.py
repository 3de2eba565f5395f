"""Tests of pubsubml.methods.async_dp.peers_protocol: the strict messages owners send."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from pubsubml.methods.async_dp.peers_protocol import (
    AnswerMessage,
    RefuseMessage,
    RegisterMessage,
    RequestMessage,
)

GOOD: dict[type[BaseModel], dict[str, Any]] = {
    RegisterMessage: {"owner": 0, "n_records": 1},
    RequestMessage: {"owner": 3},
    AnswerMessage: {"owner": 1, "ticket": 7, "gradient": [0.5, -1e-300, 2.0]},
    RefuseMessage: {"owner": 2, "ticket": -1},
}


@pytest.mark.parametrize("cls", list(GOOD))
def test_messages_round_trip_through_json_unchanged(cls: type[BaseModel]) -> None:
    message = cls.model_validate(GOOD[cls])
    assert message.model_dump() == GOOD[cls]
    assert cls.model_validate_json(message.model_dump_json()) == message
    assert cls.model_validate(json.loads(json.dumps(message.model_dump()))) == message


def test_every_message_has_its_own_path() -> None:
    paths = [cls.path for cls in GOOD]  # type: ignore[attr-defined]
    assert len(set(paths)) == len(paths) and all(p.startswith("/") for p in paths)
    assert "path" not in RequestMessage(owner=0).model_dump()  # the path is not a field


@pytest.mark.parametrize(
    ("cls", "changes", "error"),
    [
        (RequestMessage, {"owner": -1}, "greater than or equal to 0"),
        (RequestMessage, {"owner": 1.0}, "valid integer"),
        (RequestMessage, {"owner": True}, "valid integer"),
        (RequestMessage, {"owner": "1"}, "valid integer"),
        (RequestMessage, {"X": [[0.1, 0.2]]}, "Extra inputs"),
        (RegisterMessage, {"n_records": 0}, "greater than or equal to 1"),
        (RegisterMessage, {"n_records": None}, "valid integer"),
        (AnswerMessage, {"gradient": (0.1, 0.2)}, "valid list"),
        (AnswerMessage, {"gradient": [float("nan")]}, "finite number"),
        (AnswerMessage, {"gradient": [float("-inf")]}, "finite number"),
        (AnswerMessage, {"ticket": 2.5}, "valid integer"),
        (RefuseMessage, {"gradient": [0.1]}, "Extra inputs"),
    ],
)
def test_malformed_messages_are_refused(
    cls: type[BaseModel], changes: dict[str, Any], error: str
) -> None:
    with pytest.raises(ValidationError, match=error):
        cls.model_validate(GOOD[cls] | changes)


@pytest.mark.parametrize("cls", list(GOOD))
def test_a_missing_field_is_refused(cls: type[BaseModel]) -> None:
    for name in GOOD[cls]:
        partial = {k: v for k, v in GOOD[cls].items() if k != name}
        with pytest.raises(ValidationError, match="Field required"):
            cls.model_validate(partial)


def test_messages_are_frozen() -> None:
    message = AnswerMessage.model_validate(GOOD[AnswerMessage])
    with pytest.raises(ValidationError, match="frozen"):
        message.ticket = 8  # type: ignore[misc]
    assert message.ticket == 7
