"""Tests of pubsubml.learners.dpsgd_tasks: the classification and regression tasks of the DP-SGD
learners (labels, probabilities, bounded targets, scikit-learn tags)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from sklearn.utils import get_tags

from pubsubml.errors import LabelError
from pubsubml.learners.mlp import DPMLPClassifier, DPMLPRegressor

FAST: dict[str, Any] = {"hidden_layer_sizes": (4,), "dp": False, "random_state": 0}


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _rows(n: int = 60, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 3))


def test_a_non_private_classifier_without_classes_learns_them_from_y() -> None:
    X = _rows()
    y = np.where(X[:, 0] > 0.5, "yes", "no")

    clf = DPMLPClassifier(epochs=2, **FAST).fit(X, y)

    assert clf.classes_.tolist() == ["no", "yes"]
    assert clf.predict_proba(X).shape == (len(X), 2)


def test_continuous_labels_are_refused_without_declared_classes() -> None:
    X = _rows()

    with pytest.raises(LabelError, match="continuous"):
        DPMLPClassifier(epochs=1, **FAST).fit(X, X[:, 0])


def test_predictions_are_the_most_probable_declared_class() -> None:
    X = _rows()
    y = np.array(["c", "a", "b"])[(X[:, 0] * 3).astype(int)]

    clf = DPMLPClassifier(classes=["c", "a", "b"], epochs=3, **FAST).fit(X, y)
    proba = clf.predict_proba(X)

    assert proba.dtype == np.float64 and np.all(proba >= 0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[proba.argmax(axis=1)])
    assert clf.classes_.tolist() == ["c", "a", "b"]


@pytest.mark.parametrize(("target", "expected"), [(5.0, 1.0), (-5.0, -2.0)])
def test_targets_outside_the_public_bounds_are_clipped_to_them(
    target: float, expected: float
) -> None:
    X = _rows()
    reg = DPMLPRegressor(
        target_bounds=(-2.0, 1.0), epochs=60, batch_size=20, learning_rate=0.05, **FAST
    )

    reg.fit(X, np.full(len(X), target))

    prediction = reg.predict(X)
    assert prediction.dtype == np.float64 and prediction.shape == (len(X),)
    np.testing.assert_allclose(prediction, expected, atol=0.1)


@pytest.mark.parametrize(
    ("estimator", "poor"),
    [
        (DPMLPClassifier(dp=False, epochs=10), False),
        (DPMLPClassifier(dp=False, epochs=5), True),
        (DPMLPClassifier(), True),
        (DPMLPRegressor(dp=False, epochs=30), False),
        (DPMLPRegressor(dp=False, epochs="many"), True),  # type: ignore[arg-type]
        (DPMLPRegressor(), True),
    ],
)
def test_private_or_briefly_trained_models_are_tagged_poor_scorers(
    estimator: Any, poor: bool
) -> None:
    tags = get_tags(estimator)

    task_tags = tags.classifier_tags if tags.classifier_tags is not None else tags.regressor_tags
    assert task_tags is not None and task_tags.poor_score is poor
