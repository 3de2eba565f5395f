"""Shared input handling of the learners (the parts the estimator checks do not reach)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import DataConversionWarning
from sklearn.linear_model import LogisticRegression

from pubsubml.errors import DataValidationError, LabelError, SchemaMismatchError
from pubsubml.learners import (
    DPGaussianNB,
    DPLogisticRegression,
    DPMLPClassifier,
    DPRandomForestClassifier,
    DPSGDLinearRegression,
    DPSGDLogisticRegression,
)
from pubsubml.learners.base import check_labels, check_regression_targets
from pubsubml.learners.local import LocalModel
from pubsubml.schema import Feature, FeatureSchema

#: A consortium schema of four features; the site below holds only ``a`` and ``c``.
CONSORTIUM = FeatureSchema(
    features=(
        Feature(name="a", lower=0, upper=1, default=0.5),
        Feature(name="b", lower=0, upper=10, default=2.0),
        Feature(name="c", lower=-1, upper=1, default=0.0),
        Feature(name="d", kind="categorical", categories=("x", "y"), default="y"),
    )
)

LEARNERS: dict[str, Callable[[], Any]] = {
    "local": lambda: LocalModel(estimator=LogisticRegression(), schema=CONSORTIUM, classes=[0, 1]),
    "dp_logistic": lambda: DPLogisticRegression(
        schema=CONSORTIUM, classes=[0, 1], epsilon=1.0, random_state=0, noise_seed=0
    ),
    "dp_naive_bayes": lambda: DPGaussianNB(
        schema=CONSORTIUM, classes=[0, 1], epsilon=1.0, random_state=0, noise_seed=0
    ),
    "dp_forest": lambda: DPRandomForestClassifier(
        schema=CONSORTIUM, classes=[0, 1], epsilon=1.0, n_estimators=3, random_state=0, noise_seed=0
    ),
    "dp_sgd_logistic": lambda: DPSGDLogisticRegression(
        schema=CONSORTIUM, classes=[0, 1], epsilon=1.0, random_state=0, noise_seed=0
    ),
    "dp_mlp": lambda: DPMLPClassifier(
        schema=CONSORTIUM,
        classes=[0, 1],
        hidden_layer_sizes=(8,),
        epochs=2,
        epsilon=1.0,
        accountant="rdp",
        random_state=0,
        noise_seed=0,
    ),
    "dp_sgd_linear": lambda: DPSGDLinearRegression(
        schema=CONSORTIUM, epsilon=1.0, target_bounds=(-1.0, 2.0), random_state=0, noise_seed=0
    ),
}


def _site(n: int = 120, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """A site holding the consortium's features ``c`` and ``a`` only (in another order)."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"c": rng.uniform(-1, 1, n), "a": rng.uniform(0, 1, n)})
    return X, (X["a"] + X["c"] > 0.5).astype(int).to_numpy()


@pytest.mark.parametrize("name", list(LEARNERS))
def test_a_site_with_a_subset_of_the_schema_trains_on_its_columns_and_public_defaults(
    name: str,
) -> None:
    X, y = _site()
    extended = CONSORTIUM.extend(X)  # what the site would build by hand
    assert extended["b"].eq(2.0).all() and extended["d"].eq("y").all()

    on_subset = LEARNERS[name]().fit(X, y)
    by_hand = LEARNERS[name]().fit(extended, y)

    predict = on_subset.predict if name == "dp_sgd_linear" else on_subset.predict_proba
    expected = by_hand.predict if name == "dp_sgd_linear" else by_hand.predict_proba
    np.testing.assert_allclose(predict(X), expected(extended))
    np.testing.assert_allclose(predict(X), predict(extended))
    assert on_subset.n_features_in_ == len(CONSORTIUM) and on_subset.schema_ == CONSORTIUM
    assert on_subset.feature_names_in_.tolist() == ["c", "a"]


@pytest.mark.parametrize("name", list(LEARNERS))
def test_a_training_column_outside_the_schema_is_refused_and_nothing_is_fitted(
    name: str,
) -> None:
    X, y = _site()
    model = LEARNERS[name]()

    with pytest.raises(SchemaMismatchError, match=r"\['zip_code'\] that are not in the schema"):
        model.fit(X.assign(zip_code=1.0), y)
    assert not hasattr(model, "n_features_in_")


def test_extra_columns_are_ignored_at_prediction_as_a_published_model_ignores_them() -> None:
    X, y = _site()
    X = CONSORTIUM.extend(X)
    model = clone(LEARNERS["local"]()).fit(X, y)

    np.testing.assert_array_equal(
        model.predict_proba(X.assign(zip_code=1.0)), model.predict_proba(X)
    )


def test_declared_classes_keep_their_order_and_codes() -> None:
    classes, codes = check_labels(["b", "a", "b"], ["b", "a"], 3)

    assert classes.tolist() == ["b", "a"] and codes.tolist() == [0, 1, 0]


@pytest.mark.parametrize(
    ("y", "message"),
    [
        (None, "requires y"),
        ([[0, 1], [1, 0]], "1d array"),
        ([0.5, 1.5], "continuous"),
        (np.array(["a", 1], dtype=object), "cannot be sorted"),
        ([0, None], "missing"),
        ([1, 1], "1 class"),
    ],
)
def test_bad_labels_raise_label_error(y: object, message: str) -> None:
    with pytest.raises(LabelError, match=message):
        check_labels(y, None, 2)


def test_column_vector_targets_warn_and_ravel() -> None:
    with pytest.warns(DataConversionWarning):
        _, codes = check_labels(np.array([[0], [1]]), None, 2)
    with pytest.warns(DataConversionWarning):
        values = check_regression_targets(np.array([[0.5], [1.5]]), 2)

    assert codes.tolist() == [0, 1] and values.tolist() == [0.5, 1.5]


def test_regression_targets_must_be_numeric_and_finite() -> None:
    with pytest.raises(DataValidationError):
        check_regression_targets(["a", "b"], 2)
    with pytest.raises(DataValidationError):
        check_regression_targets([1.0, np.inf], 2)


def test_fit_that_fails_on_labels_leaves_a_fresh_estimator_unfitted() -> None:
    model = LocalModel(
        estimator=LogisticRegression(), schema=FeatureSchema.numeric(["a"]), classes=[0, 1]
    )

    with pytest.raises(LabelError):
        model.fit(pd.DataFrame({"a": [0.1, 0.9]}), [0, 2])
    assert not hasattr(model, "schema_") and not hasattr(model, "n_features_in_")
