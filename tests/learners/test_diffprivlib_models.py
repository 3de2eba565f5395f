"""Tests of pubsubml.learners.diffprivlib_models: public bounds, fit contract, sklearn copies."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import GaussianNB as DiffprivlibGaussianNB
from diffprivlib.models import LogisticRegression as DiffprivlibLogisticRegression
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.learners.diffprivlib_models import (
    DiffprivlibClassifier,
    resolve_public_bounds,
    to_sklearn_base,
)
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

SCHEMA = FeatureSchema.numeric(["a", "b", "c"])


def _data(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    return X, (X[:, 0] + X[:, 1] > 1).astype(int)


class _Spends(DiffprivlibClassifier):
    """A naive Bayes model fitted by ``runs`` diffprivlib mechanisms sharing one accountant,
    plus an optional extra (ε, δ) spend recorded on that accountant."""

    def __init__(
        self,
        *,
        schema: FeatureSchema | None = SCHEMA,
        classes: Any = (0, 1),
        epsilon: float = 1.0,
        runs: int = 1,
        extra: tuple[float, float] | None = None,
        random_state: Any = 0,
    ) -> None:
        self.schema = schema
        self.classes = classes
        self.epsilon = epsilon
        self.runs = runs
        self.extra = extra
        self.random_state = random_state

    def _train(self, Z: np.ndarray, codes: np.ndarray, n_classes: int, epsilon: float) -> Any:
        accountant = BudgetAccountant()
        model = DiffprivlibGaussianNB(accountant=accountant)  # never fitted when runs == 0
        for _ in range(self.runs):
            model = DiffprivlibGaussianNB(
                epsilon=epsilon / self.runs,
                bounds=resolve_public_bounds(None, self.schema, Z.shape[1]),
                random_state=self.random_state,
                accountant=accountant,
            ).fit(Z, codes)
        if self.extra is not None:
            accountant.spend(*self.extra)
        return model


# ---- public bounds ---------------------------------------------------------------------------
def test_explicit_bounds_win_over_the_schema_and_broadcast_per_column() -> None:
    lower, upper = resolve_public_bounds((-1.0, [2.0, 3.0, 4.0]), SCHEMA, 3)

    assert lower.tolist() == [-1.0, -1.0, -1.0] and upper.tolist() == [2.0, 3.0, 4.0]


def test_resolved_bounds_are_independent_writable_copies() -> None:
    given = np.array([0.5, 0.5])

    lower, upper = resolve_public_bounds((given, 1.0), None, 2)
    lower[0] = -9.0
    upper[:] = 7.0

    assert given.tolist() == [0.5, 0.5]


@pytest.mark.parametrize("bounds", [(0.0, math.inf), (-math.inf, 1.0), (0.5, 0.5)])
def test_unbounded_or_empty_ranges_are_refused(bounds: tuple[float, float]) -> None:
    with pytest.raises(InvalidPrivacyParameterError, match="finite"):
        resolve_public_bounds(bounds, SCHEMA, 3)


# ---- the fit contract ------------------------------------------------------------------------
def test_one_event_per_mechanism_and_their_sum_as_the_model_epsilon() -> None:
    X, y = _data()

    clf = _Spends(epsilon=0.9, runs=3).fit(X, y)

    assert clf.privacy_events_ == [
        DPEvent(mechanism="approx_dp", epsilon=e, delta=0.0, neighbouring="replace_one")
        for e, _ in clf.estimator_.accountant.spent_budget
    ]
    assert len(clf.privacy_events_) == 3
    assert clf.epsilon_ == pytest.approx(0.9) and clf.delta_ == 0.0
    assert clf.predict_proba(X).shape == (len(X), 2)


@pytest.mark.parametrize(
    ("runs", "extra"),
    [(0, None), (1, (0.0, 1e-6))],
    ids=["no-mechanism-ran", "a-delta-was-spent"],
)
def test_a_fit_without_a_pure_epsilon_record_is_refused(
    runs: int, extra: tuple[float, float] | None
) -> None:
    X, y = _data()
    clf = _Spends(runs=runs, extra=extra)

    with pytest.raises(InvalidPrivacyParameterError, match="did not run"):
        clf.fit(X, y)
    assert not hasattr(clf, "estimator_") and not hasattr(clf, "privacy_events_")


def test_the_fitted_model_predicts_the_declared_labels() -> None:
    X, y = _data()
    labels = np.array(["low", "high"], dtype=object)[y]

    clf = _Spends(classes=["low", "high"], epsilon=50.0).fit(X, labels)

    assert set(clf.predict(X).tolist()) <= {"low", "high"}
    assert clf.estimator_.classes_.tolist() == ["low", "high"]
    assert np.mean(clf.predict(X) == labels) > 0.7


# ---- copies into scikit-learn ----------------------------------------------------------------
def test_unfitted_copy_keeps_the_shared_parameters_only() -> None:
    priors = [0.25, 0.75]
    model = DiffprivlibGaussianNB(epsilon=2.0, bounds=(0, 1), priors=priors, var_smoothing=1e-3)

    base = to_sklearn_base(model)

    assert type(base) is GaussianNB
    assert base.get_params() == {"priors": [0.25, 0.75], "var_smoothing": 1e-3}
    assert base.priors is not priors  # a copy, not the diffprivlib model's list


def test_logistic_regression_copy_drops_diffprivlib_only_parameters() -> None:
    model = DiffprivlibLogisticRegression(epsilon=2.0, data_norm=3.0, C=0.5, max_iter=7, tol=1e-3)

    base = to_sklearn_base(model)

    assert type(base) is LogisticRegression
    assert (base.C, base.max_iter, base.tol) == (0.5, 7, 1e-3)
    assert not hasattr(base, "epsilon") and not hasattr(base, "data_norm")


def test_fitted_copy_carries_the_fitted_attributes() -> None:
    X, y = _data()
    model = DiffprivlibGaussianNB(
        epsilon=5.0,
        bounds=(np.zeros(3), np.ones(3)),
        random_state=0,
        accountant=BudgetAccountant(),
    ).fit(X, y)

    base = to_sklearn_base(model)

    np.testing.assert_array_equal(base.theta_, model.theta_)
    np.testing.assert_array_equal(base.var_, model.var_)
    assert base.theta_ is not model.theta_
    np.testing.assert_array_equal(base.predict_proba(X), model.predict_proba(X))
