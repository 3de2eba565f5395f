"""Cross-fitting the own model M^s (pubsub-ml.txt §4 Step 1): out-of-fold outputs, folds that
every class can fill, the candidate chosen by out-of-fold loss, the Tra/Cus split, and one
cross-fit of M^s per evaluation through a :class:`CrossFitStore` passed to each fit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from methods.pubsub.conftest import Threshold, _frame
from pubsubml.errors import DataValidationError
from pubsubml.methods import Customizer
from pubsubml.methods.pubsub import own_crossfit
from pubsubml.methods.pubsub.own import OwnLearner
from pubsubml.methods.pubsub.own_crossfit import (
    CrossFitStore,
    check_cv,
    cross_fit_key,
    cross_fit_own,
    holdout_split,
    make_folds,
)
from pubsubml.schema import FeatureSchema

pytestmark = pytest.mark.usefixtures("one_thread")


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
    store = CrossFitStore()
    first = OwnLearner(random_state=0, cross_fits=store).fit(X, y)
    second = OwnLearner(random_state=0, cross_fits=store).fit(X, y)
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
    store = CrossFitStore()
    own = OwnLearner(random_state=3, cross_fits=store).fit(X, y)
    cust = Customizer(models=[], random_state=3, cross_fits=store).fit(X, y)
    assert len(computed) == n_outside + 1 and store.hits == 1
    np.testing.assert_array_equal(cust.predict_proba(X), outside.predict_proba(X))
    np.testing.assert_array_equal(cust.own_model_.predict_proba(X), own.predict_proba(X))


def test_a_schema_with_more_features_than_the_subscriber_has_gives_the_same_key(
    computed: list[int],
) -> None:
    X, y = _data()
    full = FeatureSchema.numeric(["a", "b", "c", "d"])
    store = CrossFitStore()
    own = OwnLearner(schema=full.subset(["a", "b", "c"]), random_state=3, cross_fits=store)
    own.fit(X, y)
    cust = Customizer(models=[], schema=full, random_state=3, cross_fits=store).fit(X, y)
    wider = FeatureSchema.numeric(["a", "b", "c"], upper=2.0)  # other bounds: other inputs
    OwnLearner(schema=wider, random_state=3, cross_fits=store).fit(X, y)
    assert len(computed) == 2 and store.hits == 1
    np.testing.assert_array_equal(cust.own_model_.predict_proba(X), own.predict_proba(X))


def test_other_rows_seed_or_targets_are_cross_fitted_again(computed: list[int]) -> None:
    X, y = _data()
    changed = X.copy()
    changed.iloc[5, 1] += 1e-9
    store = CrossFitStore()
    OwnLearner(random_state=0, cross_fits=store).fit(X, y)
    OwnLearner(random_state=0, cross_fits=store).fit(changed, y)
    OwnLearner(random_state=1, cross_fits=store).fit(X, y)
    OwnLearner(random_state=0, cross_fits=store).fit(X, 1 - y)
    OwnLearner(random_state=0, candidates=("forest", "logistic"), cross_fits=store).fit(X, y)
    flipped = X.iloc[::-1].reset_index(drop=True)
    OwnLearner(random_state=0, cross_fits=store).fit(flipped, y[::-1])
    assert len(computed) == 6 and store.hits == 0 and len(store.results) == 6


def test_nothing_is_kept_without_a_store_or_for_an_estimator_object(computed: list[int]) -> None:
    X, y = _data()
    folds = make_folds(y, 5, "classification", 0)
    args = dict(task="classification", n_classes=2, schema=None, seed=0, target_bounds=None)
    key = cross_fit_key(X, y, folds, spec="auto", kinds=("mlp",), **args)  # type: ignore[arg-type]
    assert key is not None and len(key) == 64
    assert cross_fit_key(X, y, folds, spec=LogisticRegression(), kinds=(), **args) is None  # type: ignore[arg-type]
    for _ in range(2):
        OwnLearner(random_state=0).fit(X, y)  # no store: computed each time
    store = CrossFitStore()
    for _ in range(2):
        Customizer(models=[], own_model=LogisticRegression(), random_state=0, cross_fits=store).fit(
            X, y
        )
    assert len(computed) == 4 and store.hits == 0 and not store.results


def test_a_store_is_shared_by_clones_and_separate_stores_share_nothing() -> None:
    X, y = _data()
    store, other = CrossFitStore(), CrossFitStore()
    OwnLearner(random_state=0, cross_fits=store).fit(X, y)
    OwnLearner(random_state=0, cross_fits=other).fit(X, y)
    assert other.hits == 0
    clone(OwnLearner(random_state=0, cross_fits=store)).fit(X, y)
    assert store.hits == 1


@pytest.mark.filterwarnings("ignore:Got `batch_size`")
def test_a_stored_result_is_not_changed_by_what_a_caller_does_with_its_copy() -> None:
    X, y = _data()
    store = CrossFitStore()
    first = OwnLearner(random_state=0, cross_fits=store).fit(X, y)
    reference = first.predict_proba(X)
    first.estimator_.fit(X, 1 - y)  # refitted on other targets by its caller
    second = OwnLearner(random_state=0, cross_fits=store).fit(X, y)
    assert store.hits == 1
    np.testing.assert_array_equal(second.predict_proba(X), reference)


def test_holdout_split_is_stratified_and_check_cv_names_the_folds() -> None:
    y = np.array([0] * 30 + [1] * 10)
    tra, cus = holdout_split(y, "classification", 0.75, 0.25, seed=0)
    assert len(tra) == 30 and len(cus) == 10 and not set(tra) & set(cus)
    assert y[cus].sum() in (2, 3)
    with pytest.raises(ValueError, match="train_split and fusion_split"):
        holdout_split(y, "classification", 0.8, 0.5, seed=0)
    assert check_cv("holdout") is None and check_cv(3) == 3
    with pytest.raises(ValueError, match="cv must be"):
        check_cv(True)
