"""Every registered learner through export → save → load → PublishedModel, and tampering."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sklearn.linear_model import LogisticRegression

from pubsubml.artifacts import (
    Artifact,
    PrivacyRecord,
    PublishedModel,
    export_model,
    generate_signing_key,
    key_id,
    load_artifact,
    make_artifact,
)
from pubsubml.artifacts.export import PREFER_SAFETENSORS_FOR_MLP
from pubsubml.errors import DigestMismatchError, SignatureError, UntrustedArtifactError
from pubsubml.learners import available_learners, create_learner, get_learner_spec
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

# Small and fast: few epochs, few trees, small networks.
_FAST = {
    "epochs": 2,
    "batch_size": 50,
    "hidden_layer_sizes": (8, 4),
    "n_estimators": 5,
    "max_depth": 3,
    "max_iter": 50,
    "random_state": 0,
}


def _fit(name: str, schema: FeatureSchema, frame: pd.DataFrame) -> Any:
    spec = get_learner_spec(name)
    params: dict[str, Any] = {"schema": schema}
    if spec.task == "classification":
        params["classes"] = [0, 1]
    estimator = create_learner(name, **params)
    available = estimator.get_params(deep=True)
    knobs = {}
    for key, value in _FAST.items():
        for candidate in (key, f"estimator__{key}"):
            if candidate in available:
                knobs[candidate] = value
    if available.get("dp") is True:
        knobs["noise_multiplier"] = 1.0
    estimator.set_params(**knobs)
    target = frame["y"] if spec.task == "classification" else frame["t"]
    return estimator.fit(frame[schema.names], target)


def _reference(estimator: Any, X: pd.DataFrame) -> np.ndarray:
    if hasattr(estimator, "classes_"):
        return np.asarray(estimator.predict_proba(X))
    return np.asarray(estimator.predict(X)).reshape(-1, 1)


@pytest.mark.parametrize("name", available_learners())
def test_every_learner_round_trips_with_identical_predictions(
    name: str,
    schema: FeatureSchema,
    frame: pd.DataFrame,
    make_data: Callable[[int, int], pd.DataFrame],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
    tmp_path: Path,
) -> None:
    estimator = _fit(name, schema, frame)
    X_new = make_data(200, 7)[schema.names]
    formats = ["onnx", "safetensors"] if hasattr(estimator, "module_") else ["onnx"]

    for fmt in formats:
        artifact = export_model(estimator, publisher="site-a", signing_key=signing_key, format=fmt)
        loaded = load_artifact(artifact.save(tmp_path / fmt))
        model = PublishedModel.load(loaded.card, loaded.weights, trusted)

        assert loaded == artifact
        assert model.card.format == fmt
        np.testing.assert_allclose(
            model.predict_outputs(X_new), _reference(estimator, X_new), atol=1e-6
        )
        if model.task == "classification":
            np.testing.assert_allclose(
                model.predict_proba(X_new), estimator.predict_proba(X_new), atol=1e-6
            )
            assert model.classes is not None and model.classes.tolist() == [0, 1]
        else:
            np.testing.assert_allclose(model.predict(X_new), estimator.predict(X_new), atol=1e-6)
            assert model.classes is None
        assert model.input_features == schema.names
        assert model.delta == estimator.delta_
        assert math.isclose(model.epsilon, estimator.epsilon_, rel_tol=1e-6)
        assert model.card.privacy.events == list(estimator.privacy_events_)


@pytest.mark.parametrize("name", ["mlp_classifier", "logistic_regression"])
def test_auto_format_and_idempotent_model_id(
    name: str, schema: FeatureSchema, frame: pd.DataFrame, signing_key: Ed25519PrivateKey
) -> None:
    estimator = _fit(name, schema, frame)

    first = export_model(estimator, publisher="site-a", signing_key=signing_key)
    second = export_model(estimator, publisher="site-a", signing_key=signing_key)

    network = hasattr(estimator, "module_")
    assert first.card.format == (
        "safetensors" if network and PREFER_SAFETENSORS_FOR_MLP else "onnx"
    )
    assert (first.card.architecture is not None) == (first.card.format == "safetensors")
    assert first.card.model_id == second.card.model_id
    assert first.weights == second.weights


def test_safetensors_is_refused_for_non_networks(
    schema: FeatureSchema, frame: pd.DataFrame, signing_key: Ed25519PrivateKey
) -> None:
    estimator = _fit("logistic_regression", schema, frame)

    with pytest.raises(ValueError, match="fully connected networks only"):
        export_model(estimator, publisher="site-a", signing_key=signing_key, format="safetensors")


def test_classifier_trained_on_a_subset_of_declared_classes(
    schema: FeatureSchema,
    frame: pd.DataFrame,
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    estimator = create_learner("logistic_regression", schema=schema, classes=[2, 0, 1, 3])
    estimator.fit(frame[schema.names], frame["y"])

    artifact = export_model(estimator, publisher="site-a", signing_key=signing_key)
    model = artifact.open(trusted)

    assert model.classes is not None and model.classes.tolist() == [2, 0, 1, 3]
    np.testing.assert_allclose(
        model.predict_proba(frame), estimator.predict_proba(frame[schema.names]), atol=1e-6
    )


class _Residual(torch.nn.Module):
    """A network that is not a plain Sequential: exported through torch.onnx.export."""

    def __init__(self, n_in: int) -> None:
        super().__init__()
        self.hidden = torch.nn.Linear(n_in, n_in)
        self.out = torch.nn.Linear(n_in, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(x)) + x)


def test_any_torch_network_exports_through_torch_onnx(
    make_network: Callable[..., Any],
    schema: FeatureSchema,
    X: pd.DataFrame,
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    torch.manual_seed(0)
    network = make_network()
    network.module_ = _Residual(schema.n_encoded)

    artifact = export_model(network, publisher="site-a", signing_key=signing_key)

    assert artifact.card.format == "onnx"
    assert network.module_.training  # exporting leaves the module's mode alone
    np.testing.assert_allclose(
        artifact.open(trusted).predict_proba(X), network.outputs(X), atol=1e-6
    )
    with pytest.raises(ValueError, match="fully connected networks only"):
        export_model(network, publisher="site-a", signing_key=signing_key, format="safetensors")


def test_direct_mlp_graph_matches_torch(
    make_network: Callable[..., Any], schema: FeatureSchema, X: pd.DataFrame
) -> None:
    from pubsubml.artifacts.onnx_codec import OnnxRunner
    from pubsubml.artifacts.onnx_export import mlp_to_onnx

    network = make_network(hidden=(6, 3), activation=torch.nn.Sigmoid)
    layers = [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in network.module_[0::2]]
    graph = mlp_to_onnx(layers, activation="sigmoid", output_activation="softmax")

    direct = OnnxRunner(graph, n_inputs=schema.n_encoded, n_outputs=2)

    np.testing.assert_allclose(direct.run(schema.encode(X)), network.outputs(X), atol=1e-6)


# ---- tampering --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dp_artifact(
    schema: FeatureSchema, frame: pd.DataFrame, signing_key: Ed25519PrivateKey
) -> Artifact:
    estimator = _fit("dp_logistic_regression", schema, frame)
    return export_model(estimator, publisher="site-c", signing_key=signing_key)


def test_one_flipped_weight_byte_raises_digest_mismatch(
    dp_artifact: Artifact, trusted: dict[str, Ed25519PublicKey], tmp_path: Path
) -> None:
    directory = dp_artifact.save(tmp_path)
    weights_file = directory / "weights.onnx"
    data = bytearray(weights_file.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights_file.write_bytes(bytes(data))
    loaded = load_artifact(directory)

    with pytest.raises(DigestMismatchError, match="the signed card says"):
        PublishedModel.load(loaded.card, loaded.weights, trusted)


def test_lowered_epsilon_in_card_file_raises_signature_error(
    dp_artifact: Artifact, trusted: dict[str, Ed25519PublicKey], tmp_path: Path
) -> None:
    directory = dp_artifact.save(tmp_path)
    card = json.loads((directory / "card.json").read_text())
    card["privacy"]["epsilon"] = card["privacy"]["epsilon"] / 10
    (directory / "card.json").write_text(json.dumps(card))
    loaded = load_artifact(directory)

    with pytest.raises(SignatureError, match="does not match its content"):
        PublishedModel.load(loaded.card, loaded.weights, trusted)


def test_unknown_signer_raises_signature_error(dp_artifact: Artifact) -> None:
    stranger = generate_signing_key().public_key()

    with pytest.raises(SignatureError, match="not among the trusted keys"):
        PublishedModel.load(
            dp_artifact.card.to_json(), dp_artifact.weights, {key_id(stranger): stranger}
        )


def test_signed_card_understating_epsilon_is_refused(
    dp_artifact: Artifact, signing_key: Ed25519PrivateKey, trusted: dict[str, Ed25519PublicKey]
) -> None:
    events = [
        DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.1, count=100)
    ]
    card = dp_artifact.card
    claim = PrivacyRecord.from_events(events, epsilon=0.1, delta=1e-5, accountant="rdp")
    forged = make_artifact(
        dp_artifact.weights,
        format="onnx",
        publisher=card.publisher,
        schema=card.input_schema,
        classes=card.classes,
        privacy=claim,
        signing_key=signing_key,
    )

    with pytest.raises(UntrustedArtifactError, match=r"claims ε = 0\.1 but its DP events give"):
        forged.open(trusted)
    assert forged.open(trusted, check_privacy=False).epsilon == 0.1


def test_export_needs_a_schema_for_plain_estimators(
    schema: FeatureSchema, frame: pd.DataFrame, signing_key: Ed25519PrivateKey
) -> None:
    model = LogisticRegression().fit(schema.encode(frame[schema.names]), frame["y"])

    with pytest.raises(ValueError, match="pass schema="):
        export_model(model, publisher="site-a", signing_key=signing_key)
    with pytest.raises(ValueError, match="schema encodes 3"):
        export_model(
            model,
            publisher="site-a",
            signing_key=signing_key,
            schema=FeatureSchema.numeric(["a", "b", "c"]),
        )
