"""Tests of pubsubml.artifacts.export: privacy records of estimators and export_model's choices."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sklearn.linear_model import LogisticRegression

from pubsubml.artifacts.export import export_model, privacy_record_of
from pubsubml.errors import PrivacyError
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

PURE = DPEvent(mechanism="approx_dp", epsilon=0.25, delta=0.0, count=4)
GAUSSIAN = DPEvent(mechanism="gaussian", noise_multiplier=2.0, count=3)


class Fitted:
    """A fitted estimator as pubsubml's learners describe one: attributes only."""

    def __init__(self, **attributes: Any) -> None:
        for name, value in attributes.items():
            setattr(self, name, value)


# ---- privacy_record_of ----------------------------------------------------------------------
def test_an_estimator_without_events_is_non_private() -> None:
    record = privacy_record_of(Fitted(), data_scope=["2024"])

    assert math.isinf(record.epsilon) and record.delta == 0.0
    assert record.accountant is None and record.data_scope == ["2024"]
    assert math.isinf(privacy_record_of(Fitted(epsilon_=math.inf)).epsilon)


def test_a_finite_epsilon_without_events_is_refused() -> None:
    with pytest.raises(PrivacyError, match=r"reports ε = 2\.0 but recorded no DP events"):
        privacy_record_of(Fitted(epsilon_=2.0, privacy_events_=[]))


def test_pure_events_at_delta_zero_compose_basically() -> None:
    record = privacy_record_of(Fitted(privacy_events_=[PURE, PURE], delta_=0.0, epsilon_=2.0))

    assert record.accountant == "pure"
    assert record.epsilon == pytest.approx(2 * 4 * 0.25)
    assert record.events == [PURE, PURE]


def test_the_declared_rdp_accountant_is_kept_and_pld_is_the_default() -> None:
    rdp = privacy_record_of(Fitted(privacy_events_=[GAUSSIAN], delta_=1e-5, accountant_="rdp"))
    pld = privacy_record_of(Fitted(privacy_events_=[GAUSSIAN], delta_=1e-5, accountant_="prv"))

    assert (rdp.accountant, pld.accountant) == ("rdp", "pld")
    assert rdp.epsilon > pld.epsilon > 0
    assert rdp.delta == pld.delta == 1e-5


def test_an_epsilon_that_disagrees_with_the_events_is_refused() -> None:
    honest = privacy_record_of(Fitted(privacy_events_=[PURE], delta_=0.0))

    accepted = privacy_record_of(
        Fitted(privacy_events_=[PURE], delta_=0.0, epsilon_=honest.epsilon * (1 + 1e-8))
    )

    assert accepted.epsilon == honest.epsilon == pytest.approx(1.0)
    with pytest.raises(PrivacyError, match=r"epsilon_ = 0\.5 but the pure accountant gives 1\.0"):
        privacy_record_of(Fitted(privacy_events_=[PURE], delta_=0.0, epsilon_=0.5))


# ---- export_model ---------------------------------------------------------------------------
def _wrapped(
    schema: FeatureSchema, frame: pd.DataFrame, labels: np.ndarray, classes: Sequence[Any]
) -> Fitted:
    """A learner wrapping a scikit-learn model fitted on ``labels`` and declaring ``classes``."""
    model = LogisticRegression().fit(schema.encode(frame[schema.names]), labels)
    return Fitted(estimator_=model, schema_=schema, classes_=np.asarray(classes))


def test_an_unknown_format_is_refused(
    make_network: Callable[..., Any], signing_key: Ed25519PrivateKey
) -> None:
    unknown: Any = "pickle"

    with pytest.raises(ValueError, match="format must be"):
        export_model(make_network(), publisher="a", signing_key=signing_key, format=unknown)


def test_a_schema_that_differs_from_the_fitted_one_is_refused(
    make_network: Callable[..., Any], signing_key: Ed25519PrivateKey
) -> None:
    with pytest.raises(ValueError, match="differs from the estimator's fitted schema_"):
        export_model(
            make_network(),
            publisher="a",
            signing_key=signing_key,
            schema=FeatureSchema.numeric(["x0", "x1", "x2", "x3", "x4"]),
        )


def test_a_network_narrower_than_the_schema_is_refused(
    make_network: Callable[..., Any], signing_key: Ed25519PrivateKey
) -> None:
    network = make_network()
    network.schema_ = FeatureSchema.numeric(["a", "b", "c"])

    with pytest.raises(ValueError, match="the network takes 5 inputs, the schema encodes 3"):
        export_model(network, publisher="a", signing_key=signing_key)


def test_boolean_class_labels_are_refused(
    schema: FeatureSchema, frame: pd.DataFrame, signing_key: Ed25519PrivateKey
) -> None:
    estimator = _wrapped(schema, frame, frame["y"].to_numpy(), [False, True])

    with pytest.raises(ValueError, match="class labels must be str, int or float"):
        export_model(estimator, publisher="a", signing_key=signing_key)


def test_a_model_fitted_on_label_codes_scatters_into_the_declared_classes(
    schema: FeatureSchema,
    frame: pd.DataFrame,
    X: pd.DataFrame,
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    codes = np.where(frame["y"] == 1, 3, 0)  # codes 0 and 3 of four declared labels
    estimator = _wrapped(schema, frame, codes, ["a", "b", "c", "d"])

    model = export_model(estimator, publisher="a", signing_key=signing_key).open(trusted)

    proba = estimator.estimator_.predict_proba(schema.encode(X))
    expected = np.zeros((len(X), 4))
    expected[:, [0, 3]] = proba
    np.testing.assert_allclose(model.predict_proba(X), expected, atol=1e-6)
    assert set(model.predict(X)) <= {"a", "d"}


def test_a_model_whose_classes_match_nothing_declared_is_refused(
    schema: FeatureSchema, frame: pd.DataFrame, signing_key: Ed25519PrivateKey
) -> None:
    labels = np.where(frame["y"] == 1, "yes", "no")
    estimator = _wrapped(schema, frame, labels, ["negative", "positive"])

    with pytest.raises(ValueError, match="match neither the declared classes"):
        export_model(estimator, publisher="a", signing_key=signing_key)


def test_an_mlp_exported_to_onnx_predicts_as_its_safetensors_export(
    make_network: Callable[..., Any],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
    X: pd.DataFrame,
) -> None:
    network = make_network(classes=None, seed=7)

    as_onnx = export_model(network, publisher="a", signing_key=signing_key, format="onnx")
    as_safetensors = export_model(network, publisher="a", signing_key=signing_key)

    assert as_onnx.card.architecture is None and as_onnx.card.task == "regression"
    assert as_safetensors.card.architecture is not None
    assert as_safetensors.card.architecture.output_activation == "identity"
    assert as_onnx.card.model_id != as_safetensors.card.model_id
    np.testing.assert_allclose(
        as_onnx.open(trusted).predict(X), as_safetensors.open(trusted).predict(X), atol=1e-6
    )


def test_the_data_scope_and_privacy_record_go_on_the_signed_card(
    make_network: Callable[..., Any],
    signing_key: Ed25519PrivateKey,
    trusted: dict[str, Ed25519PublicKey],
) -> None:
    network = make_network(seed=8)
    network.privacy_events_ = [PURE]
    network.delta_ = 0.0
    network.epsilon_ = 1.0

    artifact = export_model(network, publisher="a", signing_key=signing_key, data_scope=["q1"])

    privacy = artifact.open(trusted).card.privacy
    assert privacy.data_scope == ["q1"]
    assert (privacy.epsilon, privacy.accountant, privacy.events) == (1.0, "pure", [PURE])
