"""Tests of pubsubml.learners.logistic: DPLogisticRegression and its one-vs-rest fit."""

from __future__ import annotations

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import LogisticRegression as DiffprivlibLogisticRegression
from diffprivlib.utils import BudgetError

from pubsubml.learners.logistic import DPLogisticRegression, fit_one_vs_rest

pytestmark = pytest.mark.filterwarnings("ignore:.*iprint:DeprecationWarning")


def _data(n: int = 150, k: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    return X, np.minimum((X[:, 0] * k).astype(int), k - 1)


def test_rows_beyond_the_public_norm_are_clipped_to_it() -> None:
    X, y = _data()
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    params = {
        "classes": [0, 1],
        "data_norm": 1.0,
        "fit_intercept": False,
        "random_state": 3,
        "noise_seed": 3,
    }

    long_rows = DPLogisticRegression(**params).fit(5 * unit, y)
    unit_rows = DPLogisticRegression(**params).fit(unit, y)

    # Every row of norm 5 is clipped back to its unit-norm direction.
    np.testing.assert_allclose(long_rows.estimator_.coef_, unit_rows.estimator_.coef_, rtol=1e-6)


@pytest.mark.parametrize(("k", "problems"), [(2, 1), (3, 3), (4, 4)])
def test_one_problem_for_two_classes_and_one_per_class_otherwise(k: int, problems: int) -> None:
    X, y = _data(k=k)

    clf = DPLogisticRegression(
        classes=list(range(k)), data_norm=2.0, random_state=0, noise_seed=0
    ).fit(X, y)

    assert clf.n_iter_.shape == (problems,)
    assert clf.estimator_.coef_.shape == (problems, 3)
    assert clf.estimator_.intercept_.shape == (problems,)
    assert clf.predict_proba(X).shape == (len(X), k)
    assert np.all((clf.n_iter_ >= 1) & (clf.n_iter_ <= clf.max_iter))


def test_explicit_data_norm_is_reported_and_the_schema_bound_is_not_needed() -> None:
    X, y = _data()

    clf = DPLogisticRegression(classes=[0, 1], data_norm=2.5, random_state=0, noise_seed=0).fit(
        X, y
    )

    assert clf.data_norm_ == 2.5 and clf.schema_ is None


def test_one_vs_rest_spends_the_model_epsilon_once_and_labels_codes() -> None:
    X, y = _data(k=3)
    accountant = BudgetAccountant()
    model = DiffprivlibLogisticRegression(
        epsilon=0.6, data_norm=2.0, random_state=0, noise_seed=0, accountant=accountant
    )

    fitted = fit_one_vs_rest(model, X, y, 3)

    assert fitted is model
    assert accountant.spent_budget == [(0.6, 0)]
    assert fitted.classes_.tolist() == [0, 1, 2]
    assert fitted.n_iter_.dtype == np.int32 and fitted.n_features_in_ == 3


def test_one_vs_rest_refuses_a_budget_the_accountant_cannot_afford() -> None:
    X, y = _data()
    accountant = BudgetAccountant(epsilon=0.5)
    model = DiffprivlibLogisticRegression(
        epsilon=1.0, data_norm=2.0, random_state=0, noise_seed=0, accountant=accountant
    )

    with pytest.raises(BudgetError):
        fit_one_vs_rest(model, X, y, 2)
    assert accountant.spent_budget == []
