"""Zero-hidden-layer DP-SGD models and private selections through export → load → predict."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pubsubml.artifacts import PublishedModel, export_model, load_artifact, predict_many
from pubsubml.artifacts.privacy_record import check_privacy_record
from pubsubml.learners import (
    DPMLPClassifier,
    DPSGDLinearRegression,
    DPSGDLogisticRegression,
    PrivateHyperparameterSearch,
    fit_many,
)
from pubsubml.schema import FeatureSchema

logging.getLogger("absl").setLevel(logging.ERROR)


@pytest.mark.parametrize("fmt", ["safetensors", "onnx"])
def test_linear_models_round_trip_with_zero_hidden_layers(
    fmt: str,
    schema: FeatureSchema,
    frame: pd.DataFrame,
    make_data: Callable[[int, int], pd.DataFrame],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
    tmp_path: Path,
) -> None:
    X, X_new = frame[schema.names], make_data(200, 3)[schema.names]
    clf = DPSGDLogisticRegression(schema=schema, classes=[0, 1], random_state=0).fit(X, frame.y)
    reg = DPSGDLinearRegression(schema=schema, target_bounds=(-1.0, 1.5), random_state=0)
    reg.fit(X, frame.t)

    for est, reference in ((clf, clf.predict_proba(X_new)), (reg, reg.predict(X_new)[:, None])):
        artifact = export_model(est, publisher="site-a", signing_key=signing_key, format=fmt)
        loaded = load_artifact(artifact.save(tmp_path / f"{fmt}-{type(est).__name__}"))
        model = PublishedModel.load(loaded.card, loaded.weights, trusted)

        np.testing.assert_allclose(model.predict_outputs(X_new), reference, atol=1e-6)
        assert model.epsilon == pytest.approx(est.epsilon_, rel=1e-6)
        assert model.card.privacy.events == est.privacy_events_
        if fmt == "safetensors":
            assert model.card.architecture is not None
            assert model.card.architecture.layer_sizes == [schema.n_encoded, reference.shape[1]]


def test_predict_many_stacks_linear_models_beside_networks(
    schema: FeatureSchema,
    frame: pd.DataFrame,
    make_data: Callable[[int, int], pd.DataFrame],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    X, X_new = frame[schema.names], make_data(150, 4)[schema.names]
    linear = fit_many(
        DPSGDLogisticRegression(schema=schema, classes=[0, 1], random_state=1),
        [X[:100], X[100:200], X[200:]],
        [frame.y[:100], frame.y[100:200], frame.y[200:]],
    )
    network = DPMLPClassifier(
        schema=schema, classes=[0, 1], hidden_layer_sizes=(4,), epochs=2, noise_multiplier=1.0
    ).fit(X, frame.y)
    fitted = [*linear, network]
    models = [PublishedModel.load(*_card_and_weights(est, signing_key), trusted) for est in fitted]

    outputs = predict_many(models, X_new)

    for out, est in zip(outputs, fitted, strict=True):
        np.testing.assert_allclose(out, est.predict_proba(X_new), atol=1e-6)


def _card_and_weights(est: object, key: Ed25519PrivateKey) -> tuple[object, bytes]:
    artifact = export_model(est, publisher="site-a", signing_key=key)
    return artifact.card, artifact.weights


def test_a_private_selection_exports_its_best_model_with_the_selections_cost(
    schema: FeatureSchema,
    frame: pd.DataFrame,
    make_data: Callable[[int, int], pd.DataFrame],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    X, X_new = frame[schema.names], make_data(100, 5)[schema.names]
    search = PrivateHyperparameterSearch(
        estimator=DPSGDLogisticRegression(schema=schema, classes=[0, 1]),
        param_grid={"learning_rate": [0.05, 0.2]},
        random_state=0,
    ).fit(X, frame.y)

    artifact = export_model(search, publisher="site-a", signing_key=signing_key)
    model = PublishedModel.load(artifact.card, artifact.weights, trusted)

    record = artifact.card.privacy
    assert record.events == search.privacy_events_ and record.mechanism == "repeat_and_select"
    assert record.epsilon == pytest.approx(search.epsilon_, rel=1e-9)
    assert check_privacy_record(record) == pytest.approx(search.epsilon_, rel=1e-9)
    assert record.epsilon > search.best_estimator_.epsilon_
    assert artifact.card.format == "safetensors"
    np.testing.assert_allclose(
        model.predict_proba(X_new), search.best_estimator_.predict_proba(X_new), atol=1e-6
    )
