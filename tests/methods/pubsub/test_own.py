"""Tests of pubsubml.methods.pubsub.own: OwnLearner, the subscriber's own model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.tree import DecisionTreeClassifier

from pubsubml.errors import DataValidationError, LabelError, SchemaMismatchError
from pubsubml.methods.pubsub.outputs import model_classes, model_features
from pubsubml.methods.pubsub.own import OwnLearner, OwnModel, public_encoder
from pubsubml.schema import FeatureSchema

pytestmark = pytest.mark.usefixtures("one_thread")

FRAME = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0], "c": [5.0, 6.0]})


def _data(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.random((n, 3)), columns=["a", "b", "c"])
    score = X["a"] - X["b"] + 0.3 * rng.normal(size=n)
    return X, np.where(score > 0.2, "hi", np.where(score < -0.2, "lo", "mid"))


def test_logistic_own_model_is_scikit_learn_logistic_regression_on_class_indices() -> None:
    # Prepare
    X, y = _data(120, 0)
    # Execute: the public label set in its own order, one class absent from y.
    own = OwnLearner(kind="logistic", classes=["mid", "lo", "hi", "none"]).fit(X, y)
    # Assert: columns in classes_ order, an empty column for the absent class.
    index = {"mid": 0, "lo": 1, "hi": 2}
    reference = LogisticRegression(C=1.0, max_iter=1000).fit(X.to_numpy(), [index[v] for v in y])
    proba = own.predict_proba(X)
    assert own.choice_ == "logistic" and own.cv_scores_ == {}
    assert own.classes_.tolist() == ["mid", "lo", "hi", "none"]
    np.testing.assert_allclose(proba[:, :3], reference.predict_proba(X.to_numpy()), atol=1e-6)
    np.testing.assert_array_equal(proba[:, 3], 0.0)
    np.testing.assert_array_equal(own.predict(X), own.classes_[proba.argmax(axis=1)])
    assert own.n_features_in_ == 3 and own.feature_names_in_.tolist() == ["a", "b", "c"]


def test_regression_on_public_target_bounds_equals_ridge_on_the_raw_target() -> None:
    # Scaling the target by public bounds before RidgeCV and back after changes nothing:
    # the ridge fit is affine in y, and the GCV choice of α is scale-free.
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.random((80, 3)), columns=["a", "b", "c"])
    y = X.to_numpy() @ [3.0, -2.0, 1.0] + rng.normal(0, 0.1, 80)
    own = OwnLearner(task="regression", kind="logistic", target_bounds=(-5.0, 5.0)).fit(X, y)
    reference = RidgeCV(alphas=np.logspace(-4, 2, 13)).fit(X.to_numpy(), y)
    np.testing.assert_allclose(own.predict(X), reference.predict(X.to_numpy()), atol=1e-8)
    assert own.score(X, y) > 0.95
    with pytest.raises(AttributeError, match="classification"):
        own.predict_proba(X)


def test_auto_choice_is_the_lowest_out_of_fold_loss() -> None:
    X, y = _data(40, 2)
    own = OwnLearner(candidates=("logistic", "forest"), cv=2, random_state=0).fit(X, y)
    assert set(own.cv_scores_) == {"logistic", "forest"}
    assert own.choice_ == min(own.cv_scores_, key=lambda k: own.cv_scores_[k])
    assert all(score > 0 for score in own.cv_scores_.values())  # out-of-fold log-losses


def test_an_estimator_is_cloned_and_seeded() -> None:
    X, y = _data(50, 3)
    tree = DecisionTreeClassifier(max_depth=2)
    a = OwnLearner(kind=tree, random_state=4).fit(X, y)
    b = OwnLearner(kind=clone(tree), random_state=4).fit(X, y)
    assert not hasattr(tree, "tree_")  # the given estimator is not fitted
    assert a.choice_ == "estimator" and a.estimator_ is not tree
    assert a.estimator_.random_state is not None
    assert a.estimator_.random_state == b.estimator_.random_state
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_column_names_are_matched_as_strings() -> None:
    X, y = _data(40, 5)
    numbered = X.set_axis([0, 1, 2], axis=1)
    own = OwnLearner(kind="logistic").fit(numbered, y)
    assert own.feature_names_in_.tolist() == ["0", "1", "2"]
    np.testing.assert_array_equal(
        own.predict(numbered), own.predict(numbered.set_axis(["0", "1", "2"], axis=1))
    )


@pytest.mark.parametrize(
    ("params", "X", "y", "error"),
    [
        ({"task": "ranking"}, None, None, ValueError),
        ({"kind": "svm"}, None, None, ValueError),
        ({}, "array", None, SchemaMismatchError),
        ({}, None, "short", DataValidationError),
        ({}, "empty", "empty", DataValidationError),
        ({"classes": ["hi", "lo"]}, None, None, LabelError),
        ({"task": "regression", "target_bounds": (1.0, 1.0)}, None, "numbers", ValueError),
    ],
)
def test_bad_input_raises_and_leaves_nothing_fitted(
    params: dict[str, Any], X: str | None, y: str | None, error: type[Exception]
) -> None:
    X_ok, y_ok = _data(30, 6)
    frames: dict[str | None, Any] = {None: X_ok, "array": X_ok.to_numpy(), "empty": X_ok.iloc[:0]}
    targets: dict[str | None, Any] = {None: y_ok, "short": y_ok[:-1], "empty": y_ok[:0],
                                      "numbers": np.arange(30.0)}  # fmt: skip
    own = OwnLearner(**{"kind": "logistic", **params})
    with pytest.raises(error):
        own.fit(frames[X], targets[y])
    assert not hasattr(own, "estimator_") and not hasattr(own, "classes_")
    with pytest.raises(NotFittedError):
        own.predict(X_ok)


def test_own_model_reads_only_its_features() -> None:
    est = LogisticRegression().fit(FRAME[["c", "a"]], ["no", "yes"])
    own = OwnModel(est, ["c", "a"])
    np.testing.assert_array_equal(own.predict_proba(FRAME), est.predict_proba(FRAME[["c", "a"]]))
    np.testing.assert_array_equal(own.predict(FRAME), ["no", "yes"])
    assert model_features(own) == ["c", "a"] and model_classes(own) == ["no", "yes"]


def test_public_encoder_scales_by_the_public_bounds() -> None:
    schema = FeatureSchema.numeric(["a", "b", "c"], lower=0.0, upper=10.0)
    encode = public_encoder(schema, ["c", "a"])
    np.testing.assert_allclose(encode(FRAME), [[0.5, 0.1], [0.6, 0.2]])
    plain = public_encoder(None, ["c", "a"])
    np.testing.assert_array_equal(plain(FRAME), [[5.0, 1.0], [6.0, 2.0]])
    with pytest.raises(DataValidationError, match="numeric"):
        plain(FRAME.assign(a=["x", "y"]))


def test_default_network_does_not_underfit() -> None:
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.random((200, 4)), columns=["a", "b", "c", "d"])
    y = (X["a"] + X["b"] > 1).astype(int).to_numpy()
    Xt = pd.DataFrame(rng.random((2000, 4)), columns=["a", "b", "c", "d"])
    yt = (Xt["a"] + Xt["b"] > 1).astype(int).to_numpy()
    assert OwnLearner(kind="mlp", random_state=0).fit(X, y).score(Xt, yt) > 0.9
