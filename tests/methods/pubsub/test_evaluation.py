"""Tests of pubsubml.methods.pubsub.evaluation: a customized model scored next to its parts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score

from pubsubml.errors import LabelError
from pubsubml.methods import Customizer
from pubsubml.methods.pubsub.evaluation import score_parts

pytestmark = pytest.mark.usefixtures("one_thread")


class Threshold:
    """A black box predicting 1 when ``x0 > 0.5``, with fixed confidence, named like a card."""

    input_features = ("x0",)
    classes = (0, 1)
    publisher = "p"
    model_id = "m" * 12

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        p = np.where(X["x0"].to_numpy() > 0.5, 0.8, 0.2)
        return np.column_stack([1 - p, p])


def test_the_customized_model_its_own_model_and_each_received_model_are_scored() -> None:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.random((120, 2)), columns=["x0", "x1"])
    y = (X["x0"] > 0.5).astype(int).to_numpy()
    c = Customizer(models=[Threshold()], own_model="logistic", cv=3, random_state=0).fit(X, y)
    rows = score_parts(c, X, y)
    assert list(rows) == ["customized", "own model alone", "p mmmmmmmm"]
    assert rows["p mmmmmmmm"]["accuracy"] == accuracy_score(y, (X["x0"] > 0.5).astype(int))
    assert set(rows["customized"]) == {"accuracy", "balanced accuracy", "log-loss"}
    with pytest.raises(LabelError, match="not among the model's classes"):
        score_parts(c, X, np.where(y == 1, 1, 7))
