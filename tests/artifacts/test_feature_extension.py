"""Feature extension (pubsub-ml.txt §4 Step 3) and batched prediction of published models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pubsubml.artifacts import Artifact, PublishedModel, export_model, predict_many
from pubsubml.schema import Feature, FeatureSchema


@pytest.fixture(scope="module")
def published(
    onnx_artifact: Artifact,
    safetensors_artifact: Artifact,
    trusted: dict[str, Ed25519PublicKey],
) -> list[PublishedModel]:
    return [artifact.open(trusted) for artifact in (onnx_artifact, safetensors_artifact)]


def _by_hand(X: pd.DataFrame) -> pd.DataFrame:
    """The full frame in schema order, the absent features set to the public defaults by hand."""
    full = X[["age", "wbc"]].copy()
    full["bmi"] = 25.0
    full["sex"] = "f"
    return full[["age", "bmi", "wbc", "sex"]]


def test_missing_reordered_and_extra_columns(
    published: list[PublishedModel], X: pd.DataFrame
) -> None:
    partial = X[["wbc", "age"]].assign(zip_code=1234, hospital="north")

    for model in published:
        assert model.missing_features(partial.columns) == ["bmi", "sex"]
        np.testing.assert_array_equal(
            model.predict_proba(partial), model.predict_proba(_by_hand(X))
        )
        np.testing.assert_array_equal(model.predict(partial), model.predict(_by_hand(X)))


def test_column_order_never_matters(published: list[PublishedModel], X: pd.DataFrame) -> None:
    shuffled = X[list(reversed(X.columns))]

    for model in published:
        np.testing.assert_array_equal(model.predict_proba(shuffled), model.predict_proba(X))


def test_extension_agrees_with_the_original_estimator(
    make_network: Callable[..., Any],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
    X: pd.DataFrame,
) -> None:
    network = make_network(hidden=(6,), activation=torch.nn.ReLU, seed=3)
    model = export_model(network, publisher="site-d", signing_key=signing_key).open(trusted)

    np.testing.assert_allclose(
        model.predict_proba(X[["age", "wbc"]]), network.outputs(_by_hand(X)), atol=1e-6
    )


def test_regressor_predict_and_no_predict_proba(
    make_network: Callable[..., Any],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
    X: pd.DataFrame,
) -> None:
    network = make_network(classes=None)
    model = export_model(network, publisher="site-e", signing_key=signing_key).open(trusted)

    np.testing.assert_allclose(model.predict(X), network.outputs(X)[:, 0], atol=1e-6)
    with pytest.raises(TypeError, match="regressor"):
        model.predict_proba(X)


def test_predict_many_equals_one_by_one(
    make_network: Callable[..., Any],
    published: list[PublishedModel],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
    schema: FeatureSchema,
    X: pd.DataFrame,
) -> None:
    other_schema = FeatureSchema(
        features=(*schema.features[:3], Feature(name="smoker", lower=0, upper=1, default=0.2))
    )
    networks = [make_network(seed=s) for s in range(3)]
    other = make_network(seed=9, over=other_schema)
    models = [
        *published,
        *(
            export_model(n, publisher=f"s{i}", signing_key=signing_key).open(trusted)
            for i, n in enumerate(networks)
        ),
        export_model(other, publisher="s9", signing_key=signing_key).open(trusted),
        export_model(make_network(hidden=(3,)), publisher="s8", signing_key=signing_key).open(
            trusted
        ),
    ]
    partial = X.drop(columns=["bmi"])

    outputs = predict_many(models, partial, max_chunk_bytes=1)  # one network per chunk
    batched = predict_many(models, partial)

    assert [o.shape for o in outputs] == [(len(X), 2)] * len(models)
    for model, out, out_batched in zip(models, outputs, batched, strict=True):
        np.testing.assert_allclose(out, model.predict_outputs(partial), atol=1e-6)
        np.testing.assert_allclose(out_batched, model.predict_outputs(partial), atol=1e-6)


def test_invalid_values_raise_data_errors(published: list[PublishedModel], X: pd.DataFrame) -> None:
    bad = X.assign(sex="x")

    with pytest.raises(ValueError, match="outside its categories"):
        published[0].predict_proba(bad)
