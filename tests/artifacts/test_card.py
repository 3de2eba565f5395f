"""Tests of pubsubml.artifacts.card: canonical JSON, model ids, architectures and card rules."""

from __future__ import annotations

import base64
import json
import math
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from pubsubml.artifacts.card import (
    MAX_LAYERS,
    MAX_UNITS,
    MLPArchitecture,
    ModelCard,
    canonical_json,
    derive_model_id,
)
from pubsubml.artifacts.privacy_record import PrivacyRecord
from pubsubml.errors import UntrustedArtifactError
from pubsubml.schema import Feature, FeatureSchema

DIGEST = "ab" * 32
SCHEMA = FeatureSchema(
    features=(
        Feature(name="age", lower=0, upper=100, default=50),
        Feature(name="sex", kind="categorical", categories=("f", "m"), default="f"),
    )
)  # 3 encoded columns


def _fields(**changes: Any) -> dict[str, Any]:
    """Fields of a valid, unsigned ONNX classification card, with ``changes`` applied."""
    fields: dict[str, Any] = {
        "model_id": derive_model_id("site-a", DIGEST),
        "publisher": "site-a",
        "task": "classification",
        "classes": [0, 1],
        "input_schema": SCHEMA,
        "output": ["proba[0]", "proba[1]"],
        "privacy": PrivacyRecord.from_events([], epsilon=math.inf, delta=0.0),
        "created_at": datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
        "format": "onnx",
        "weights_sha256": DIGEST,
    }
    fields.update(changes)
    return fields


def _regression(**changes: Any) -> dict[str, Any]:
    return _fields(task="regression", classes=None, output=["prediction"], **changes)


def _architecture(sizes: list[int], output: str = "softmax") -> MLPArchitecture:
    return MLPArchitecture(layer_sizes=sizes, activation="tanh", output_activation=output)


# ---- canonical_json and derive_model_id -----------------------------------------------------
def test_canonical_json_sorts_nested_keys_and_is_compact() -> None:
    data = {"z": {"b": [1, {"y": 2, "x": 1}], "a": None}, "m": "ü"}

    text = canonical_json(data)

    assert text == '{"m":"ü","z":{"a":null,"b":[1,{"x":1,"y":2}]}}'.encode()
    assert canonical_json(json.loads(text)) == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_canonical_json_refuses_non_finite_numbers(value: float) -> None:
    with pytest.raises(ValueError):
        canonical_json({"epsilon": value})


def test_model_id_depends_on_publisher_and_digest() -> None:
    ids = {derive_model_id(p, d) for p in ("site-a", "site-b") for d in ("0" * 64, "1" * 64)}

    assert len(ids) == 4
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


# ---- MLPArchitecture ------------------------------------------------------------------------
def test_tensor_shapes_of_a_deeper_network() -> None:
    arch = _architecture([6, 5, 4, 3, 2])

    assert arch.n_layers == 4
    assert arch.tensor_shapes() == {
        "0.weight": (5, 6),
        "0.bias": (5,),
        "1.weight": (4, 5),
        "1.bias": (4,),
        "2.weight": (3, 4),
        "2.bias": (3,),
        "3.weight": (2, 3),
        "3.bias": (2,),
    }


def test_layer_count_limit() -> None:
    assert _architecture([2] * (MAX_LAYERS + 1)).n_layers == MAX_LAYERS
    with pytest.raises(ValidationError):
        _architecture([2] * (MAX_LAYERS + 2))
    with pytest.raises(ValidationError):
        _architecture([2])


@pytest.mark.parametrize(
    "fields",
    [
        {"layer_sizes": [3, MAX_UNITS + 1, 2]},
        {"layer_sizes": [3, -1, 2]},
        {"layer_sizes": [3.0, 2]},
        {"layer_sizes": ["3", 2]},
        {"activation": "gelu"},
        {"output_activation": "sigmoid"},
        {"dropout": 0.5},
    ],
)
def test_invalid_architectures_are_rejected(fields: dict[str, Any]) -> None:
    data: dict[str, Any] = {
        "layer_sizes": [3, 4, 2],
        "activation": "relu",
        "output_activation": "softmax",
    }
    data.update(fields)

    with pytest.raises(ValidationError):
        MLPArchitecture(**data)


# ---- ModelCard rules ------------------------------------------------------------------------
def test_a_valid_card_reports_its_input_features() -> None:
    card = ModelCard(**_fields())

    assert card.input_features == ["age", "sex"]
    assert card.card_version == 1


def test_regression_cards() -> None:
    assert ModelCard(**_regression()).classes is None
    with pytest.raises(ValidationError, match="regression card has classes = null"):
        ModelCard(**(_regression() | {"classes": [0, 1]}))
    with pytest.raises(ValidationError, match="one output, got 2"):
        ModelCard(**(_regression() | {"output": ["a", "b"]}))


def test_class_labels_of_mixed_types_and_non_finite_floats() -> None:
    card = ModelCard(**_fields(classes=["no", 1, 2.5], output=["p0", "p1", "p2"]))

    assert card.classes == ["no", 1, 2.5]
    with pytest.raises(ValidationError, match="class labels must be finite"):
        ModelCard(**_fields(classes=[0.0, math.inf]))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"architecture": None}, "needs its architecture"),
        ({"architecture": _architecture([3, 4, 3])}, "output width 3 differs"),
        ({"architecture": _architecture([3, 2], "identity")}, "output_activation 'softmax'"),
    ],
)
def test_safetensors_classification_architecture_rules(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        ModelCard(**_fields(format="safetensors", **changes))


def test_safetensors_regression_needs_an_identity_output() -> None:
    ok = ModelCard(
        **_regression(format="safetensors", architecture=_architecture([3, 1], "identity"))
    )

    assert ok.architecture is not None and ok.architecture.n_layers == 1
    with pytest.raises(ValidationError, match="output_activation 'identity'"):
        ModelCard(**_regression(format="safetensors", architecture=_architecture([3, 1])))


def test_a_signature_needs_its_signer_key_id() -> None:
    signature = base64.b64encode(bytes(64)).decode()

    with pytest.raises(ValidationError, match="must name its signer_key_id"):
        ModelCard(**_fields(signature=signature))
    assert ModelCard(**_fields(signature=signature, signer_key_id="cd" * 32)).signature


@pytest.mark.parametrize(
    ("feature", "message"),
    [
        (
            Feature(name="site", kind="categorical", categories=("a\nb", "c"), default="c"),
            "control characters",
        ),
        (
            Feature(name="site", kind="categorical", categories=("a", "b" * 129), default="a"),
            "1 to 128 characters",
        ),
        (
            Feature(name="age2", lower=0, upper=1, default=0, description="d" * 1025),
            "exceeds 1024 characters",
        ),
    ],
    ids=["control-character", "long-category", "long-description"],
)
def test_schema_text_limits(feature: Feature, message: str) -> None:
    schema = FeatureSchema(features=(*SCHEMA.features, feature))

    with pytest.raises(ValidationError, match=message):
        ModelCard(**_fields(input_schema=schema))


def test_created_at_accepts_any_zero_offset_zone() -> None:
    zero = timezone(timedelta(0), "GMT")

    card = ModelCard(**_fields(created_at=datetime(2024, 5, 1, tzinfo=zero)))

    assert card.created_at.utcoffset() == timedelta(0)


# ---- serialization --------------------------------------------------------------------------
def test_from_json_accepts_text_and_bytes_alike() -> None:
    card = ModelCard(**_fields())
    text = card.to_json()

    assert ModelCard.from_json(text) == ModelCard.from_json(text.encode()) == card


def test_from_json_size_limit_is_inclusive() -> None:
    text = ModelCard(**_fields()).to_json()
    size = len(text.encode())

    assert ModelCard.from_json(text, max_bytes=size).model_id == derive_model_id("site-a", DIGEST)
    with pytest.raises(UntrustedArtifactError, match=f"{size} bytes, the limit is {size - 1}"):
        ModelCard.from_json(text, max_bytes=size - 1)


def test_signing_payload_ignores_the_signature_but_covers_everything_else() -> None:
    card = ModelCard(**_fields(signer_key_id="cd" * 32))
    signed = card.replace(signature=base64.b64encode(bytes(64)).decode())

    assert signed.signing_payload() == card.signing_payload()
    assert card.replace(output=["p0", "p1"]).signing_payload() != card.signing_payload()
    assert card.replace(signer_key_id="ef" * 32).signing_payload() != card.signing_payload()


def test_replace_returns_a_new_validated_card() -> None:
    card = ModelCard(**_fields())

    later = card.replace(created_at=datetime(2025, 1, 1, tzinfo=UTC))

    assert later.created_at.year == 2025 and card.created_at.year == 2024
    with pytest.raises(ValidationError, match="model_id does not match"):
        card.replace(publisher="site-b")
