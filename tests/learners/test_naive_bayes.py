"""Tests of pubsubml.learners.naive_bayes: DPGaussianNB's public priors, bounds and statistics."""

from __future__ import annotations

import numpy as np
import pytest

from pubsubml.errors import LabelError
from pubsubml.learners.naive_bayes import DPGaussianNB


def _data(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    return X, (X[:, 0] > 0.5).astype(int)


def test_public_priors_are_used_as_given() -> None:
    X, y = _data()

    clf = DPGaussianNB(
        classes=[0, 1], bounds=(0, 1), priors=[0.3, 0.7], random_state=0, noise_seed=0
    ).fit(X, y)

    np.testing.assert_array_equal(clf.estimator_.class_prior_, [0.3, 0.7])


@pytest.mark.parametrize("epsilon", [0.05, 1.0])
def test_noisy_means_stay_within_the_public_bounds(epsilon: float) -> None:
    X, y = _data()
    lower, upper = np.array([0.0, -1.0, 0.0]), np.array([1.0, 1.0, 4.0])

    clf = DPGaussianNB(
        classes=[0, 1], bounds=(lower, upper), epsilon=epsilon, random_state=0, noise_seed=0
    ).fit(X, y)

    theta = clf.estimator_.theta_
    assert theta.shape == (2, 3)
    assert np.all(theta >= lower) and np.all(theta <= upper)
    assert np.all(clf.estimator_.var_ > 0)


def test_a_large_budget_recovers_the_class_means() -> None:
    X, y = _data(2000)

    clf = DPGaussianNB(
        classes=[0, 1], bounds=(0, 1), epsilon=1000.0, random_state=0, noise_seed=0
    ).fit(X, y)

    expected = np.stack([X[y == k].mean(axis=0) for k in (0, 1)])
    np.testing.assert_allclose(clf.estimator_.theta_, expected, atol=0.02)


def test_var_smoothing_is_added_to_every_variance() -> None:
    X, y = _data()
    params = {"classes": [0, 1], "bounds": (0, 1), "random_state": 0, "noise_seed": 0}

    plain = DPGaussianNB(var_smoothing=0.0, **params).fit(X, y)
    smoothed = DPGaussianNB(var_smoothing=0.5, **params).fit(X, y)

    # a public constant: diffprivlib adds var_smoothing itself, not a multiple of a data variance
    np.testing.assert_allclose(smoothed.estimator_.var_ - plain.estimator_.var_, 0.5, rtol=1e-12)
    np.testing.assert_array_equal(smoothed.estimator_.theta_, plain.estimator_.theta_)


def test_absent_declared_class_names_every_missing_label() -> None:
    X, y = _data()
    labels = np.array(["a", "b"])[y]

    with pytest.raises(LabelError, match=r"\['c', 'd'\]"):
        DPGaussianNB(classes=["a", "b", "c", "d"], bounds=(0, 1)).fit(X, labels)
