"""Cross-fitting the own model M^s (pubsub-ml.txt §4 Step 1): out-of-fold outputs, folds that
every class can fill, and the candidate chosen by out-of-fold loss."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.errors import DataValidationError
from pubsubml.methods import Customizer

pytestmark = pytest.mark.usefixtures("one_thread")


class Threshold:
    """A black box predicting 1 when ``x0 > t``, with fixed confidence."""

    input_features = ("x0",)
    classes = (0, 1)

    def __init__(self, t: float) -> None:
        self.t = t

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        p = np.where(X["x0"].to_numpy() > self.t, 0.8, 0.2)
        return np.column_stack([1 - p, p])


def _frame(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.random((n, 3)), columns=["x0", "x1", "x2"])
    return X, (X["x0"].to_numpy() > 0.5).astype(int)


class Memorizer:
    """An own model that is certain of the rows it was trained on and knows nothing else."""

    def __init__(self) -> None:
        self.seen: dict[int, int] = {}

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {}

    def set_params(self, **params: Any) -> Memorizer:
        return self

    def fit(self, X: pd.DataFrame, y: np.ndarray) -> Memorizer:
        self.seen = dict(zip(X["rid"].astype(int).tolist(), np.asarray(y).tolist(), strict=True))
        self.classes_ = np.array([0, 1])
        return self

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        out = np.full((len(X), 2), 0.5)
        for i, rid in enumerate(X["rid"].astype(int).tolist()):
            if rid in self.seen:
                out[i] = np.eye(2)[self.seen[rid]]
        return out

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return self.predict_proba(X).argmax(axis=1)


def test_cross_fitted_own_outputs_are_out_of_fold() -> None:
    from pubsubml.methods.pubsub.own import cross_fit_own, make_folds

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"rid": np.arange(200), "x0": rng.random(200)})
    y = rng.integers(0, 2, 200)
    folds = make_folds(y, 5, "classification", seed=0)
    held = np.sort(np.concatenate([h for _, h in folds]))
    np.testing.assert_array_equal(held, np.arange(200))  # every row held out exactly once
    found = cross_fit_own(
        X, y, task="classification", candidates={"m": Memorizer()}, folds=folds, n_classes=2
    )
    np.testing.assert_allclose(found.oof, 0.5)  # no row's output comes from a model that saw it
    # In the customizer the memorizer's out-of-fold outputs carry nothing, so the fusion must not
    # trust them: the label noise is not learned.
    c = Customizer(models=[Threshold(0.5)], own_model=Memorizer(), random_state=0).fit(X, y)
    assert c.folds_ is not None and len(c.folds_) == 5
    assert len(c.fusion_index_) == len(c.train_index_) == 200


def test_too_few_rows_for_the_folds_raise_and_leave_nothing_fitted() -> None:
    X, y = _frame(40, 6)
    y = np.zeros(40, dtype=int)
    y[:3] = 1  # a class of 3 rows cannot be in every one of 5 folds
    c = Customizer(models=[Threshold(0.5)], random_state=0)
    with pytest.raises(DataValidationError, match="fewer than the 5 folds"):
        c.fit(X, y)
    assert not hasattr(c, "fusion_model_") and not hasattr(c, "own_model_")
    with pytest.raises(DataValidationError, match="4 rows cannot be cross-fitted"):
        c.fit(X.iloc[:4], np.array([0, 1, 0, 1]))
    with pytest.raises(ValueError, match="cv must be"):
        Customizer(cv=1).fit(X, y)
    assert Customizer(models=[Threshold(0.5)], cv=3, random_state=0).fit(X, y).folds_ is not None


def test_cv_chosen_own_model_beats_a_fixed_network_on_a_forest_concept() -> None:
    from pubsubml.methods import OwnLearner

    rng = np.random.default_rng(2)

    def data(n: int) -> tuple[pd.DataFrame, np.ndarray]:
        X = pd.DataFrame(rng.random((n, 4)), columns=["a", "b", "c", "d"])
        y = ((X["a"] > 0.5) ^ (X["b"] > 0.3) ^ (X["c"] > 0.7)).astype(int).to_numpy()
        return X, y

    X, y = data(200)
    Xt, yt = data(4000)
    auto = OwnLearner(kind="auto", random_state=0).fit(X, y)
    mlp = OwnLearner(kind="mlp", random_state=0).fit(X, y)
    assert auto.choice_ == "forest" and set(auto.cv_scores_) == {"mlp", "forest", "logistic"}
    assert auto.score(Xt, yt) > mlp.score(Xt, yt) + 0.05
    assert auto.score(Xt, yt) > 0.8
