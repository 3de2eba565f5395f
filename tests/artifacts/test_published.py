"""Tests of pubsubml.artifacts.published: verified loading, metadata, predictions, predict_many."""

from __future__ import annotations

import itertools
import pickle
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pubsubml.artifacts import (
    Artifact,
    PrivacyRecord,
    PublishedModel,
    export_model,
    generate_signing_key,
    key_id,
    make_artifact,
    predict_many,
    published,
)
from pubsubml.artifacts.published import build_runner
from pubsubml.errors import DigestMismatchError, SignatureError, UntrustedArtifactError
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import Feature, FeatureSchema


def _resigned(
    artifact: Artifact, key: Ed25519PrivateKey, weights: bytes, privacy: PrivacyRecord
) -> Artifact:
    """A card for ``weights`` with ``privacy``, signed by ``key``."""
    card = artifact.card
    return make_artifact(
        weights,
        format=card.format,
        publisher=card.publisher,
        schema=card.input_schema,
        classes=card.classes,
        privacy=privacy,
        signing_key=key,
        architecture=card.architecture,
    )


UNDERSTATED = PrivacyRecord.from_events(
    [DPEvent(mechanism="approx_dp", epsilon=1.0, delta=0.0)] * 3,
    epsilon=1.0,
    delta=0.0,
    accountant="pure",
)


# ---- load -----------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["model", "text", "bytes"])
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_card_and_weights_forms_load_alike(
    onnx_artifact: Artifact,
    trusted: dict[str, Ed25519PublicKey],
    X: pd.DataFrame,
    form: str,
    kind: type,
) -> None:
    card = {
        "model": onnx_artifact.card,
        "text": onnx_artifact.card.to_json(),
        "bytes": onnx_artifact.card.to_json().encode(),
    }[form]
    reference = onnx_artifact.open(trusted)

    model = PublishedModel.load(card, kind(onnx_artifact.weights), trusted)

    assert model.card == onnx_artifact.card
    np.testing.assert_array_equal(model.predict_proba(X), reference.predict_proba(X))


def test_weights_that_are_not_bytes_are_refused(
    onnx_artifact: Artifact, trusted: dict[str, Ed25519PublicKey]
) -> None:
    text = onnx_artifact.weights.decode("latin-1")

    with pytest.raises(UntrustedArtifactError, match="must be bytes, got str"):
        PublishedModel.load(onnx_artifact.card, text, trusted)  # type: ignore[arg-type]


def test_size_limit_applies_before_the_digest(
    onnx_artifact: Artifact, trusted: dict[str, Ed25519PublicKey]
) -> None:
    size = len(onnx_artifact.weights)

    model = PublishedModel.load(
        onnx_artifact.card, onnx_artifact.weights, trusted, max_weights_bytes=size
    )

    assert model.n_outputs == 2
    with pytest.raises(UntrustedArtifactError, match=f"{size} bytes, the limit is {size - 1}"):
        PublishedModel.load(
            onnx_artifact.card, onnx_artifact.weights, trusted, max_weights_bytes=size - 1
        )


def test_the_signature_is_checked_before_the_weights(onnx_artifact: Artifact) -> None:
    stranger = generate_signing_key().public_key()

    with pytest.raises(SignatureError):
        PublishedModel.load(onnx_artifact.card, b"other weights", {key_id(stranger): stranger})


def test_the_digest_is_checked_before_the_privacy_record(
    onnx_artifact: Artifact,
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    forged = _resigned(onnx_artifact, signing_key, onnx_artifact.weights, UNDERSTATED)

    with pytest.raises(DigestMismatchError):
        PublishedModel.load(forged.card, onnx_artifact.weights + b"\x00", trusted)
    with pytest.raises(UntrustedArtifactError, match=r"claims ε = 1 but its DP events give ε = 3"):
        PublishedModel.load(forged.card, forged.weights, trusted)


def test_the_privacy_record_is_checked_before_the_weights_are_parsed(
    onnx_artifact: Artifact,
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    payload = pickle.dumps({"weights": [1.0, 2.0]}, protocol=4)
    forged = _resigned(onnx_artifact, signing_key, payload, UNDERSTATED)

    with pytest.raises(UntrustedArtifactError, match="claims ε"):
        PublishedModel.load(forged.card, forged.weights, trusted)
    with pytest.raises(UntrustedArtifactError, match="pickle"):
        PublishedModel.load(forged.card, forged.weights, trusted, check_privacy=False)


def test_build_runner_checks_format_not_digest(safetensors_artifact: Artifact) -> None:
    card = safetensors_artifact.card
    zeros = _zero_network_weights(card.architecture.layer_sizes)  # type: ignore[union-attr]

    runner = build_runner(card, zeros)  # another network of the same architecture

    out = runner.run(np.zeros((2, card.input_schema.n_encoded), np.float32))
    np.testing.assert_allclose(out, np.full((2, 2), 0.5))
    with pytest.raises(UntrustedArtifactError):
        build_runner(card, b"\x00" * 64)


def _zero_network_weights(sizes: list[int]) -> bytes:
    from pubsubml.artifacts.safetensors_codec import mlp_to_safetensors

    layers = [
        (np.zeros((n_out, n_in), np.float32), np.zeros(n_out, np.float32))
        for n_in, n_out in itertools.pairwise(sizes)
    ]
    return mlp_to_safetensors(layers)


# ---- metadata and predictions ---------------------------------------------------------------
def test_metadata_comes_from_the_card(
    onnx_artifact: Artifact, trusted: dict[str, Ed25519PublicKey]
) -> None:
    model = onnx_artifact.open(trusted)
    card = onnx_artifact.card

    assert (model.model_id, model.publisher, model.task) == (
        card.model_id,
        "site-a",
        "classification",
    )
    assert model.input_features == ["age", "bmi", "wbc", "sex"]
    assert model.epsilon == float("inf") and model.delta == 0.0
    assert model.classes is not None and model.classes.tolist() == [0, 1]
    assert card.model_id in repr(model) and "epsilon=inf" in repr(model)


def test_string_labels_follow_the_most_probable_output(
    make_network: Callable[..., Any],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
    X: pd.DataFrame,
) -> None:
    network = make_network(classes=("low", "mid", "high"), seed=5)
    model = export_model(network, publisher="site-f", signing_key=signing_key).open(trusted)

    labels = model.predict(X)

    expected = np.array(["low", "mid", "high"])[np.argmax(network.outputs(X), axis=1)]
    assert labels.tolist() == expected.tolist()
    np.testing.assert_allclose(model.predict_proba(X).sum(axis=1), 1.0, rtol=1e-6)


def test_array_input_in_schema_order_encodes_like_a_frame(
    safetensors_artifact: Artifact, trusted: dict[str, Ed25519PublicKey], X: pd.DataFrame
) -> None:
    model = safetensors_artifact.open(trusted)

    np.testing.assert_array_equal(model.encode(X.to_numpy(dtype=object)), model.encode(X))


def test_missing_features_accepts_any_column_labels(
    safetensors_artifact: Artifact, trusted: dict[str, Ed25519PublicKey]
) -> None:
    model = safetensors_artifact.open(trusted)

    assert model.missing_features(pd.Index(["sex", "age", 7])) == ["bmi", "wbc"]
    assert model.missing_features([]) == model.input_features


# ---- predict_many ---------------------------------------------------------------------------
def test_predict_many_of_no_models_is_empty(X: pd.DataFrame) -> None:
    assert predict_many([], X) == []


def test_networks_over_different_schemas_of_one_width_stack_in_row_blocks(
    make_network: Callable[..., Any],
    schema: FeatureSchema,
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
    X: pd.DataFrame,
) -> None:
    other = FeatureSchema(
        features=(
            *schema.features[:2],
            Feature(name="smoker", lower=0, upper=1, default=0.3),
            schema.features[3],
        )
    )
    assert other.n_encoded == schema.n_encoded  # one architecture, two encodings
    networks = [make_network(seed=11), make_network(seed=12, over=other), make_network(seed=13)]
    models = [
        export_model(n, publisher=f"p{i}", signing_key=signing_key).open(trusted)
        for i, n in enumerate(networks)
    ]
    frame = X.assign(smoker=np.linspace(0, 1, len(X)))

    outputs = predict_many(models, frame, block_rows=7, blas_threads=None)

    assert [m.card.format for m in models] == ["safetensors"] * 3
    for model, network, out in zip(models, networks, outputs, strict=True):
        reference = network.outputs(frame[model.input_features])
        np.testing.assert_allclose(out, reference, atol=1e-6)
        np.testing.assert_allclose(out, model.predict_outputs(frame), atol=1e-6)


def test_repeated_calls_on_the_same_networks_reuse_their_stack(
    make_network: Callable[..., Any],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
    X: pd.DataFrame,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(published, "_STACKS", OrderedDict())
    models = [
        export_model(make_network(seed=20 + i), publisher=f"p{i}", signing_key=signing_key).open(
            trusted
        )
        for i in range(4)
    ]
    built: list[int] = []
    real = published.MLPStack

    def counting(runners: Any) -> Any:
        built.append(len(runners))
        return real(runners)

    monkeypatch.setattr(published, "MLPStack", counting)
    first = predict_many(models, X, max_chunk_bytes=1, blas_threads=None)  # one network a chunk
    again = predict_many(models, X.iloc[:5], blas_threads=None)  # other rows, other chunks
    fewer = predict_many(models[1:], X, blas_threads=None)  # other networks: stacked anew
    assert built == [4, 3]
    for model, out, out5 in zip(models, first, again, strict=True):
        np.testing.assert_allclose(out, model.predict_outputs(X), atol=1e-6)
        np.testing.assert_allclose(out5, model.predict_outputs(X.iloc[:5]), atol=1e-6)
    for model, out in zip(models[1:], fewer, strict=True):
        np.testing.assert_allclose(out, model.predict_outputs(X), atol=1e-6)
    assert len(published._STACKS) == 1  # one architecture: the last stack only


def test_models_of_equal_schemas_share_a_key_and_their_features(
    make_network: Callable[..., Any],
    schema: FeatureSchema,
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    other = FeatureSchema(features=(*schema.features[:2], schema.features[3]))
    one, two, three = (
        export_model(make_network(seed=s, over=o), publisher="p", signing_key=signing_key).open(
            trusted
        )
        for s, o in ((1, None), (2, None), (3, other))
    )
    assert one.card.input_schema is not two.card.input_schema
    assert one.schema_key == two.schema_key != three.schema_key
    features = one.input_features
    features.append("changed")  # a copy: the model's features stay as they are
    assert one.input_features == list(schema.names) and three.input_features == list(other.names)


# ---- weights ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
@pytest.mark.parametrize("name", ["onnx_artifact", "safetensors_artifact"])
def test_the_weights_it_was_loaded_from_make_the_same_artifact_again(
    name: str,
    kind: type,
    request: pytest.FixtureRequest,
    trusted: dict[str, Ed25519PublicKey],
    X: pd.DataFrame,
) -> None:
    artifact: Artifact = request.getfixturevalue(name)
    model = PublishedModel.load(artifact.card.to_json(), kind(artifact.weights), trusted)

    again = Artifact(card=model.card, weights=model.weights)

    assert again.card == artifact.card
    assert again.card.to_json() == artifact.card.to_json()
    assert type(again.weights) is bytes and again.weights == artifact.weights
    reopened = again.open(trusted)
    assert reopened.model_id == model.model_id
    np.testing.assert_array_equal(reopened.predict_outputs(X), model.predict_outputs(X))


def test_a_model_built_from_a_runner_alone_cannot_be_stored(
    onnx_artifact: Artifact, X: pd.DataFrame
) -> None:
    card = onnx_artifact.card
    model = PublishedModel(card, build_runner(card, onnx_artifact.weights))

    with pytest.raises(ValueError, match="was not loaded from weights"):
        _ = model.weights
    assert model.predict_outputs(X).shape == (len(X), 2)
