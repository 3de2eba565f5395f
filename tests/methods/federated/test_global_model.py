"""Tests of pubsubml.methods.federated.global_model: the global model's predictions at a site."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, r2_score

from pubsubml.methods import hyperplane_chunks, hyperplane_schema
from pubsubml.methods.federated import DPFedAvg

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


def test_predictions_are_labels_of_the_most_probable_class(
    labelled: DPFedAvg, data: list[tuple[pd.DataFrame, np.ndarray]]
) -> None:
    X, y = data[2]
    proba = labelled.predict_proba(X)
    assert proba.shape == (40, 2) and proba.dtype == np.float64
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    pred = labelled.predict(X)
    np.testing.assert_array_equal(pred, np.array(["neg", "pos"])[proba.argmax(axis=1)])
    truth = np.where(y == 1, "pos", "neg")
    assert labelled.score(X, truth) == pytest.approx(accuracy_score(truth, pred))


def test_inputs_are_matched_by_name_and_missing_ones_take_the_public_default(
    labelled: DPFedAvg, data: list[tuple[pd.DataFrame, np.ndarray]]
) -> None:
    X = data[2][0]
    base = labelled.predict_proba(X)
    shuffled = X[["x2", "x0", "x1"]].assign(extra=np.arange(len(X)))
    np.testing.assert_array_equal(labelled.predict_proba(shuffled), base)
    defaulted = X.assign(x1=0.5)  # the schema's public default for x1
    np.testing.assert_array_equal(
        labelled.predict_proba(X.drop(columns="x1")), labelled.predict_proba(defaulted)
    )


def test_regression_predicts_values_and_scores_r2(
    data: list[tuple[pd.DataFrame, np.ndarray]],
) -> None:
    clients = [(X, X.sum(axis=1).to_numpy()) for X, _ in data[:2]]
    reg = DPFedAvg(**COMMON, task="regression").fit(clients)
    X, _ = data[2]
    target = X.sum(axis=1).to_numpy()
    pred = reg.predict(X)
    assert pred.shape == (40,) and pred.dtype == np.float64
    assert reg.score(X, target) == pytest.approx(r2_score(target, pred))
