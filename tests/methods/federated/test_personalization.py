"""Tests of pubsubml.methods.federated.personalization: fine-tuning the global model at a site."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from pubsubml.errors import LabelError
from pubsubml.methods import hyperplane_chunks, hyperplane_schema
from pubsubml.methods.federated import DPFedAvg, fine_tune

pytestmark = pytest.mark.usefixtures("one_thread")
SCHEMA = hyperplane_schema(3)
COMMON: dict[str, Any] = {"schema": SCHEMA, "hidden_layer_sizes": (6,), "rounds": 3,
                          "client_fraction": 1.0, "batch_size": 10, "lr": 0.05,
                          "dp": False}  # fmt: skip


@pytest.fixture(scope="module")
def data() -> list[tuple[pd.DataFrame, np.ndarray]]:
    return list(hyperplane_chunks(3, 40, seed=2, n_features=3, mag_change=0.0))


@pytest.fixture(scope="module")
def labelled(data: list[tuple[pd.DataFrame, np.ndarray]]) -> DPFedAvg:
    """A global classifier on string labels."""
    clients = [(X, np.where(y == 1, "pos", "neg")) for X, y in data[:2]]
    return DPFedAvg(**COMMON, classes=["neg", "pos"]).fit(clients)


def test_fine_tuning_is_reproducible_and_defaults_to_the_model_settings(
    labelled: DPFedAvg, data: list[tuple[pd.DataFrame, np.ndarray]]
) -> None:
    X, y = data[2]
    y = np.where(y == 1, "neg", "pos")  # the site's concept is the opposite one
    a = fine_tune(labelled, X, y, epochs=3)
    b = fine_tune(labelled, X, y, epochs=3, lr=labelled.lr, batch_size=labelled.batch_size)
    c = fine_tune(labelled, X, y, epochs=3, random_state=1)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert not np.array_equal(a.predict_proba(X), c.predict_proba(X))
    assert a.fine_tuned_ and a.classes_.tolist() == ["neg", "pos"]
    assert a.score(X, y) > labelled.score(X, y)


def test_fine_tuning_refuses_bad_input(
    labelled: DPFedAvg, data: list[tuple[pd.DataFrame, np.ndarray]]
) -> None:
    X, _ = data[2]
    y = np.array(["neg", "pos"] * 20)
    with pytest.raises(ValueError, match="batch_size"):
        fine_tune(labelled, X, y, batch_size=0)
    with pytest.raises(LabelError):
        fine_tune(labelled, X, np.array(["neg", "maybe"] * 20))
    unfitted = DPFedAvg(**COMMON, classes=["neg", "pos"])
    with pytest.raises(NotFittedError):
        fine_tune(unfitted, X, y)
    with pytest.raises(NotFittedError):
        unfitted.predict_proba(X)
    with pytest.raises(NotFittedError):
        unfitted.predict(X)


def test_a_site_lacking_a_feature_fine_tunes_with_its_public_default(
    labelled: DPFedAvg, data: list[tuple[pd.DataFrame, np.ndarray]]
) -> None:
    X, y = data[2]
    y = np.where(y == 1, "pos", "neg")

    lacking = fine_tune(labelled, X.drop(columns="x1"), y, epochs=2)

    defaulted = fine_tune(labelled, X.assign(x1=0.5), y, epochs=2)  # x1's public default
    np.testing.assert_array_equal(lacking.predict_proba(X), defaulted.predict_proba(X))


def test_fine_tuning_a_model_with_target_bounds_keeps_its_target_units(
    data: list[tuple[pd.DataFrame, np.ndarray]],
) -> None:
    clients = [(X, 10.0 + 5.0 * X.sum(axis=1).to_numpy()) for X, _ in data[:2]]
    reg = DPFedAvg(**COMMON, task="regression", target_bounds=(10.0, 25.0)).fit(clients)
    X, _ = data[2]
    y = 10.0 + 5.0 * X.sum(axis=1).to_numpy()

    still = fine_tune(reg, X, y, epochs=1, lr=1e-12)  # trained on scaled targets, refolded
    tuned = fine_tune(reg, X, y, epochs=30)

    np.testing.assert_allclose(still.predict(X), reg.predict(X), rtol=1e-5)
    assert tuned.score(X, y) > max(reg.score(X, y), 0.8)
