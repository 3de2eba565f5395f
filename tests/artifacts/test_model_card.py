"""ModelCard and PrivacyRecord: strict validation, canonical JSON, derived ids."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import pytest
from pydantic import ValidationError

from pubsubml.artifacts import Artifact, MLPArchitecture, ModelCard, PrivacyRecord, derive_model_id
from pubsubml.errors import UntrustedArtifactError
from pubsubml.privacy.events import DPEvent


def _card_dict(artifact: Artifact) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(artifact.card.to_json())
    return data


def test_json_round_trip_is_exact(onnx_artifact: Artifact) -> None:
    card = onnx_artifact.card

    parsed = ModelCard.from_json(card.to_json())

    assert parsed == card
    assert parsed.signing_payload() == card.signing_payload()
    assert parsed.to_json() == card.to_json()


def test_canonical_json_is_sorted_compact_and_excludes_signature(onnx_artifact: Artifact) -> None:
    card = onnx_artifact.card

    payload = card.signing_payload().decode("utf-8")

    data = json.loads(payload)
    assert "signature" not in data and data["signer_key_id"] == card.signer_key_id
    assert payload == json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_non_private_epsilon_serializes_as_infinity_string(onnx_artifact: Artifact) -> None:
    data = _card_dict(onnx_artifact)

    assert data["privacy"]["epsilon"] == "Infinity"
    assert math.isinf(ModelCard.from_json(json.dumps(data)).privacy.epsilon)


def test_model_id_is_derived_from_publisher_and_digest(onnx_artifact: Artifact) -> None:
    card = onnx_artifact.card
    data = _card_dict(onnx_artifact)
    data["model_id"] = derive_model_id("someone-else", card.weights_sha256)

    with pytest.raises(ValidationError, match="model_id does not match"):
        ModelCard.from_json(json.dumps(data))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("publisher",), "../etc", "invalid publisher"),
        (("publisher",), "a" * 65, "invalid publisher"),
        (("task",), "clustering", "classification"),
        (("format",), "pickle", "onnx"),
        (("weights_sha256",), "ABC", "64 lowercase hexadecimal"),
        (("signature",), "not base64!", "base64"),
        (("created_at",), "2024-01-01T00:00:00", "UTC"),
        (("created_at",), "2024-01-01T00:00:00+02:00", "UTC"),
        (("classes",), [0], "at least two classes"),
        (("classes",), [0, 0], "not unique"),
        (("classes",), [0, 1, 2], "one output per class"),
        (("classes",), ["\x00", 1], "control characters"),
        (("output",), ["p", "p"], "unique"),
        (("privacy", "epsilon"), "1.0", "valid number"),
        (("privacy", "epsilon"), -1.0, "epsilon must be > 0"),
        (("privacy", "epsilon"), 1.0, "'Infinity'"),
        (("privacy", "delta"), 1.5, "delta must be in"),
        (("privacy", "steps"), 10, "disagree with the events"),
        (
            ("architecture",),
            {"layer_sizes": [5, 2], "activation": "tanh", "output_activation": "softmax"},
            "architecture = null",
        ),
        (("card_version",), 2, "1"),
    ],
)
def test_invalid_fields_are_rejected_with_a_reason(
    onnx_artifact: Artifact, path: tuple[str, ...], value: Any, message: str
) -> None:
    data = _card_dict(onnx_artifact)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value

    with pytest.raises(ValidationError, match=message):
        ModelCard.from_json(json.dumps(data))


def test_unknown_fields_are_forbidden(onnx_artifact: Artifact) -> None:
    data = _card_dict(onnx_artifact)
    data["privacy"]["note"] = "trust me"

    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        ModelCard.from_json(json.dumps(data))


def test_nested_models_are_validated_strictly(onnx_artifact: Artifact) -> None:
    data = _card_dict(onnx_artifact)
    data["input_schema"]["features"][0]["lower"] = "0"

    with pytest.raises(ValidationError, match="valid number"):
        ModelCard.from_json(json.dumps(data))


@pytest.mark.parametrize("text", ["", "{", "[]", "null", '{"model_id": 1}', "\xff"])
def test_malformed_json_raises_validation_error(text: str) -> None:
    with pytest.raises(ValidationError):
        ModelCard.from_json(text)


def test_oversized_card_is_rejected_before_parsing() -> None:
    with pytest.raises(UntrustedArtifactError, match="limit"):
        ModelCard.from_json(b"{" + b" " * 2_000_000 + b"}")


def test_oversized_lists_and_strings_are_rejected(onnx_artifact: Artifact) -> None:
    data = _card_dict(onnx_artifact)
    data["privacy"]["data_scope"] = ["x" * 200]

    with pytest.raises(ValidationError, match="data_scope entry"):
        ModelCard.from_json(json.dumps(data))


def test_safetensors_card_needs_a_consistent_architecture(safetensors_artifact: Artifact) -> None:
    data = json.loads(safetensors_artifact.card.to_json())
    data["architecture"]["layer_sizes"][0] = 6

    with pytest.raises(ValidationError, match="input width 6 differs"):
        ModelCard.from_json(json.dumps(data))

    data["architecture"] = None
    with pytest.raises(ValidationError, match="needs its architecture"):
        ModelCard.from_json(json.dumps(data))


def test_replace_validates(onnx_artifact: Artifact) -> None:
    with pytest.raises(ValidationError):
        onnx_artifact.card.replace(created_at=datetime(2024, 1, 1))


def test_privacy_record_fills_convenience_fields_from_events() -> None:
    event = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=1.1, sample_rate=0.01, count=300
    )

    record = PrivacyRecord.from_events([event], epsilon=2.0, delta=1e-5, accountant="pld")

    assert (record.mechanism, record.noise_multiplier, record.sample_rate, record.steps) == (
        "subsampled_gaussian",
        1.1,
        0.01,
        300,
    )
    assert record.is_private


def test_privacy_record_rules() -> None:
    event = DPEvent(mechanism="approx_dp", epsilon=1.0, delta=0.0)
    with pytest.raises(ValidationError, match="name the accountant"):
        PrivacyRecord.from_events([event], epsilon=1.0, delta=0.0)
    with pytest.raises(ValidationError, match="'pure' accountant applies exactly at delta = 0"):
        PrivacyRecord.from_events([event], epsilon=1.0, delta=0.0, accountant="pld")
    with pytest.raises(ValidationError, match="finite epsilon"):
        PrivacyRecord.from_events([event], epsilon=math.inf, delta=0.0, accountant="pure")
    assert (
        PrivacyRecord.from_events([event], epsilon=1.0, delta=0.0, accountant="pure").steps is None
    )


def test_architecture_limits() -> None:
    with pytest.raises(ValidationError, match="layer sizes must be in"):
        MLPArchitecture(layer_sizes=[5, 0, 2], activation="tanh", output_activation="softmax")
    arch = MLPArchitecture(layer_sizes=[5, 3, 2], activation="relu", output_activation="softmax")
    assert arch.tensor_shapes() == {
        "0.weight": (3, 5),
        "0.bias": (3,),
        "1.weight": (2, 3),
        "1.bias": (2,),
    }


def test_pure_accounting_composes_pure_events_only() -> None:
    from pubsubml.errors import InvalidPrivacyParameterError
    from pubsubml.privacy.accountants import release_epsilon

    events = [
        DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0, count=2),
        DPEvent(mechanism="laplace", noise_multiplier=4.0, count=2),
    ]

    assert release_epsilon(events, 0.0, "pure") == pytest.approx(1.5)
    with pytest.raises(InvalidPrivacyParameterError, match="not pure"):
        release_epsilon([DPEvent(mechanism="gaussian", noise_multiplier=1.0)], 0.0, "pure")
    with pytest.raises(InvalidPrivacyParameterError, match="δ = 0"):
        release_epsilon(events, 1e-5, "pure")


def test_check_privacy_record_recomputes_epsilon() -> None:
    from pubsubml.artifacts import check_privacy_record

    event = DPEvent(mechanism="approx_dp", epsilon=1.0, delta=0.0)
    honest = PrivacyRecord.from_events([event] * 2, epsilon=2.0, delta=0.0, accountant="pure")
    understated = PrivacyRecord.from_events([event] * 2, epsilon=1.5, delta=0.0, accountant="pure")

    assert check_privacy_record(honest) == 2.0
    with pytest.raises(UntrustedArtifactError, match=r"claims ε = 1\.5"):
        check_privacy_record(understated)
