"""Tests of pubsubml.methods.pubsub.crossfit_reuse: one cross-fit of M^s per evaluation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from pubsubml.methods.pubsub import own_crossfit
from pubsubml.methods.pubsub.crossfit_reuse import (
    CrossFitStore,
    active_store,
    cross_fit_key,
    reusing_cross_fits,
)
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.own import OwnLearner
from pubsubml.methods.pubsub.own_crossfit import make_folds
from pubsubml.schema import FeatureSchema

pytestmark = pytest.mark.usefixtures("one_thread")


def _data(n: int = 90, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.random((n, 3)), columns=["a", "b", "c"])
    return X, (X["a"] - X["b"] + 0.3 * rng.normal(size=n) > 0).astype(int).to_numpy()


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the cross-fits actually computed (not answered from a store)."""
    calls: list[int] = []
    real = own_crossfit._cross_fit

    def counted(*args: object, **kwargs: object) -> own_crossfit.OwnCrossFit:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(own_crossfit, "_cross_fit", counted)
    return calls


def test_a_second_fit_in_a_block_is_the_first_ones_copy_and_its_seconds_are_counted(
    computed: list[int],
) -> None:
    X, y = _data()
    alone = OwnLearner(random_state=0).fit(X, y)
    with reusing_cross_fits() as store:
        first = OwnLearner(random_state=0).fit(X, y)
        second = OwnLearner(random_state=0).fit(X, y)
    assert len(computed) == 2 and store.hits == 1  # `alone`, then `first`; `second` reused
    assert store.reused_seconds == pytest.approx(next(iter(store.results.values()))[1])
    assert store.reused_seconds > 0
    for own in (first, second):
        assert own.choice_ == alone.choice_ and own.cv_scores_ == alone.cv_scores_
        np.testing.assert_array_equal(own.predict_proba(X), alone.predict_proba(X))
    assert second.estimator_ is not first.estimator_  # a copy, not the shared object


def test_the_customizers_own_model_is_the_own_baselines_cross_fit(computed: list[int]) -> None:
    X, y = _data()
    outside = Customizer(models=[], random_state=3).fit(X, y)
    n_outside = len(computed)
    with reusing_cross_fits() as store:
        own = OwnLearner(random_state=3).fit(X, y)
        cust = Customizer(models=[], random_state=3).fit(X, y)
    assert len(computed) == n_outside + 1 and store.hits == 1
    np.testing.assert_array_equal(cust.predict_proba(X), outside.predict_proba(X))
    np.testing.assert_array_equal(cust.own_model_.predict_proba(X), own.predict_proba(X))


def test_a_schema_with_more_features_than_the_subscriber_has_gives_the_same_key(
    computed: list[int],
) -> None:
    X, y = _data()
    full = FeatureSchema.numeric(["a", "b", "c", "d"])
    with reusing_cross_fits() as store:
        own = OwnLearner(schema=full.subset(["a", "b", "c"]), random_state=3).fit(X, y)
        cust = Customizer(models=[], schema=full, random_state=3).fit(X, y)
        wider = FeatureSchema.numeric(["a", "b", "c"], upper=2.0)  # other bounds: other inputs
        OwnLearner(schema=wider, random_state=3).fit(X, y)
    assert len(computed) == 2 and store.hits == 1
    np.testing.assert_array_equal(cust.own_model_.predict_proba(X), own.predict_proba(X))


def test_other_rows_seed_or_targets_are_cross_fitted_again(computed: list[int]) -> None:
    X, y = _data()
    changed = X.copy()
    changed.iloc[5, 1] += 1e-9
    with reusing_cross_fits() as store:
        OwnLearner(random_state=0).fit(X, y)
        OwnLearner(random_state=0).fit(changed, y)
        OwnLearner(random_state=1).fit(X, y)
        OwnLearner(random_state=0).fit(X, 1 - y)
        OwnLearner(random_state=0, candidates=("forest", "logistic")).fit(X, y)
        OwnLearner(random_state=0).fit(X.iloc[::-1].reset_index(drop=True), y[::-1])
    assert len(computed) == 6 and store.hits == 0 and len(store.results) == 6


def test_nothing_is_kept_outside_a_block_or_for_an_estimator_object(computed: list[int]) -> None:
    X, y = _data()
    folds = make_folds(y, 5, "classification", 0)
    args = dict(task="classification", n_classes=2, schema=None, seed=0, target_bounds=None)
    assert active_store() is None
    assert cross_fit_key(X, y, folds, spec="auto", kinds=("mlp",), **args) is None  # type: ignore[arg-type]
    with reusing_cross_fits():
        key = cross_fit_key(X, y, folds, spec="auto", kinds=("mlp",), **args)  # type: ignore[arg-type]
        assert key is not None and len(key) == 64
        assert cross_fit_key(X, y, folds, spec=LogisticRegression(), kinds=(), **args) is None  # type: ignore[arg-type]
        for _ in range(2):
            Customizer(models=[], own_model=LogisticRegression(), random_state=0).fit(X, y)
    assert len(computed) == 2


def test_a_shared_store_spans_blocks_and_blocks_nest() -> None:
    X, y = _data()
    store = CrossFitStore()
    with reusing_cross_fits(store):
        OwnLearner(random_state=0).fit(X, y)
        with reusing_cross_fits() as inner:
            assert active_store() is inner
            OwnLearner(random_state=0).fit(X, y)
        assert active_store() is store and inner.hits == 0
    with reusing_cross_fits(store):
        OwnLearner(random_state=0).fit(X, y)
    assert store.hits == 1 and active_store() is None


@pytest.mark.filterwarnings("ignore:Got `batch_size`")
def test_a_stored_result_is_not_changed_by_what_a_caller_does_with_its_copy() -> None:
    X, y = _data()
    with reusing_cross_fits() as store:
        first = OwnLearner(random_state=0).fit(X, y)
        reference = first.predict_proba(X)
        first.estimator_.fit(X, 1 - y)  # refitted on other targets by its caller
        second = OwnLearner(random_state=0).fit(X, y)
    assert store.hits == 1
    np.testing.assert_array_equal(second.predict_proba(X), reference)
