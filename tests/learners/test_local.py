"""LocalModel (non-private wrapper) and the helpers that accept plain scikit-learn estimators."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.base import is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.svm import SVC

from pubsubml.errors import DataValidationError, LabelError
from pubsubml.learners.forest import DPRandomForestClassifier
from pubsubml.learners.local import LocalModel, as_learner, privacy_guarantee
from pubsubml.schema import FeatureSchema

SCHEMA = FeatureSchema.numeric(["a", "b"], lower=0.0, upper=10.0)


def _frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.uniform(0, 10, n), "b": rng.uniform(0, 10, n)})


def test_estimator_type_follows_the_wrapped_estimator() -> None:
    assert is_classifier(LocalModel(estimator=LogisticRegression()))
    assert is_regressor(LocalModel(estimator=LinearRegression()))
    assert not hasattr(LocalModel(estimator=SVC()), "predict_proba")


def test_schema_encoding_is_applied_before_the_estimator() -> None:
    X = _frame()
    y = 3.0 * X["a"] - X["b"]

    model = LocalModel(estimator=LinearRegression(), schema=SCHEMA).fit(X, y)

    # Encoded columns are x / 10, so the wrapped coefficients are ten times the raw ones.
    np.testing.assert_allclose(model.estimator_.coef_, [30.0, -10.0], rtol=1e-4)
    np.testing.assert_allclose(model.predict(X), y, atol=1e-3)


def test_declared_classes_align_predict_proba_columns() -> None:
    X = _frame()
    y = np.where(X["a"] > 5, "high", "low")

    model = LocalModel(
        estimator=LogisticRegression(), schema=SCHEMA, classes=["low", "mid", "high"]
    )
    proba = model.fit(X, y).predict_proba(X)

    assert model.classes_.tolist() == ["low", "mid", "high"]
    assert proba.shape == (len(X), 3)
    np.testing.assert_array_equal(proba[:, 1], 0.0)
    np.testing.assert_array_equal(model.classes_[proba.argmax(axis=1)], model.predict(X))


def test_without_classes_the_labels_are_learned() -> None:
    X = _frame()
    y = (X["a"] > 5).astype(int)

    model = LocalModel(estimator=LogisticRegression(), schema=SCHEMA).fit(X, y)

    assert model.classes_.tolist() == [0, 1]


def test_classes_for_a_regressor_raise() -> None:
    model = LocalModel(estimator=LinearRegression(), classes=[0, 1])

    with pytest.raises(LabelError):
        model.fit(np.eye(3), [0.0, 1.0, 2.0])
    assert not hasattr(model, "estimator_")


def test_regression_targets_are_validated() -> None:
    with pytest.raises(DataValidationError):
        LocalModel(estimator=LinearRegression()).fit(np.eye(3), [0.0, np.nan, 1.0])


def test_the_original_estimator_is_not_fitted() -> None:
    inner = LinearRegression()

    LocalModel(estimator=inner).fit(np.eye(3), [0.0, 1.0, 2.0])

    with pytest.raises(NotFittedError):
        inner.predict(np.eye(3))


def test_missing_estimator_raises_type_error() -> None:
    with pytest.raises(TypeError):
        LocalModel().fit(np.eye(3), [0.0, 1.0, 2.0])


def test_privacy_guarantee_of_plain_wrapped_and_private_learners() -> None:
    X, y = np.eye(4), [0, 1, 0, 1]
    plain = LogisticRegression().fit(X, y)
    local = LocalModel(estimator=LogisticRegression()).fit(X, y)
    private = DPRandomForestClassifier(classes=[0, 1], bounds=(0, 1), random_state=0).fit(X, y)

    assert privacy_guarantee(plain) == (math.inf, 0.0, [])
    assert privacy_guarantee(local) == (math.inf, 0.0, [])
    assert privacy_guarantee(private).epsilon == 1.0
    with pytest.raises(NotFittedError):
        privacy_guarantee(LogisticRegression())


def test_as_learner_wraps_plain_estimators_only() -> None:
    dp = DPRandomForestClassifier(classes=[0, 1])

    wrapped = as_learner(LinearRegression(), schema=SCHEMA)

    assert as_learner(dp) is dp
    assert isinstance(wrapped, LocalModel) and wrapped.schema is SCHEMA
    with pytest.raises(TypeError):
        as_learner(object())
