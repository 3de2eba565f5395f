"""The multi-site scenarios S1–S4 and regression built from the stand-in data (pubsub-ml.txt §8.1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsubml.data import load_hi
from pubsubml.data.partition import iid
from pubsubml.experiments.pubsub.consortium import with_budgets, with_learners
from pubsubml.experiments.pubsub.tabular.scenarios import (
    S3_GROUPS,
    diamonds_sites,
    distributed_features,
    iid_sites,
    non_iid_sites,
)

A, B, C = (list(S3_GROUPS[g]) for g in "ABC")


# ---- S1 and S2 -------------------------------------------------------------------------------
def test_iid_subscriber_is_the_site_of_its_turn() -> None:
    sc = iid_sites(2, n_sites=4, seed=3)
    data = load_hi()
    parts = iid(len(data), 4, 3)
    assert len(sc.publishers) == 3
    np.testing.assert_array_equal(sc.subscriber.y, data.y[parts[2]])
    pd.testing.assert_frame_equal(sc.subscriber.X, data.X.iloc[parts[2]].reset_index(drop=True))
    for site, rows in zip(sc.publishers, [parts[0], parts[1], parts[3]], strict=True):
        np.testing.assert_array_equal(site.y, data.y[rows])
    # HI's positive class (insured through her own job) is the minority the F1 is scored on
    assert data.classes is not None
    assert sc.metric == "f1_minority" and sc.minority == data.classes[-1]
    assert np.mean(data.y == sc.minority) < 0.5


def test_iid_sites_are_fixed_by_the_seed_and_capped_by_max_rows() -> None:
    a, b = (iid_sites(0, n_sites=5, seed=1, max_rows=40) for _ in range(2))
    other = iid_sites(0, n_sites=5, seed=2, max_rows=40)
    assert [len(s.y) for s in (*a.publishers, a.subscriber)] == [40] * 5
    pd.testing.assert_frame_equal(a.subscriber.X, b.subscriber.X)
    assert not a.subscriber.X.equals(other.subscriber.X)


@pytest.mark.parametrize("turn", [-1, 4])
def test_a_turn_outside_the_sites_is_refused(turn: int) -> None:
    with pytest.raises(ValueError, match=rf"turn must be in \[0, 4\), got {turn}"):
        iid_sites(turn, n_sites=4)
    with pytest.raises(ValueError, match=rf"turn must be in \[0, 4\), got {turn}"):
        diamonds_sites(turn, n_sites=4)


def test_non_iid_subscriber_is_a_ten_percent_donation() -> None:
    sc = non_iid_sites(seed=0)
    kept = sum(len(s.y) for s in sc.publishers)
    assert len(sc.publishers) == 4
    assert len(sc.subscriber.y) / (kept + len(sc.subscriber.y)) == pytest.approx(0.1, abs=0.01)


def test_non_iid_publishers_are_the_census_regions() -> None:
    sc = non_iid_sites(seed=0, max_rows=200)
    regions = [set(s.X["region"].astype(str)) for s in sc.publishers]
    assert all(len(r) == 1 for r in regions)  # one region per publisher
    assert len(set().union(*regions)) == 4
    assert set(sc.subscriber.X["region"].astype(str)) == set().union(*regions)  # every donor
    assert [len(s.y) for s in sc.publishers] == [200] * 4 and len(sc.subscriber.y) == 200


# ---- S3 and S4 -------------------------------------------------------------------------------
def test_same_population_spreads_the_subscribers_features_over_the_publishers() -> None:
    sc = distributed_features(seed=0, max_rows=400)
    first, second = sc.publishers
    assert list(first.X.columns) == A + B and list(second.X.columns) == B + C
    assert list(sc.subscriber.X.columns) == A + C
    assert first.ids is not None and second.ids is not None and sc.subscriber.ids is not None
    np.testing.assert_array_equal(first.ids, second.ids)  # the same patients
    assert len(sc.subscriber.ids) == 40 and set(sc.subscriber.ids) <= set(first.ids)
    # a patient shared by two sites has the same label and the same values of shared columns
    pos = {i: k for k, i in enumerate(first.ids.tolist())}
    rows = [pos[i] for i in sc.subscriber.ids.tolist()]
    np.testing.assert_array_equal(sc.subscriber.y, first.y[rows])
    pd.testing.assert_frame_equal(
        sc.subscriber.X[A].reset_index(drop=True), first.X[A].iloc[rows].reset_index(drop=True)
    )


def test_different_population_splits_the_patients_at_age_55() -> None:
    sc = distributed_features(different_population=True, seed=0, max_rows=300)
    _, with_age = sc.publishers
    assert (sc.subscriber.X["age"] <= 55).all() and (with_age.X["age"] > 55).all()
    assert sc.subscriber.ids is not None and with_age.ids is not None
    assert set(sc.subscriber.ids).isdisjoint(with_age.ids)
    assert len(sc.subscriber.y) == 300


# ---- regression ------------------------------------------------------------------------------
def test_diamonds_target_is_scaled_into_the_unit_interval() -> None:
    sc = diamonds_sites(1, n_sites=3, seed=0, max_rows=500)
    assert sc.task == "regression" and sc.classes is None and sc.metric == "one_minus_mse"
    assert len(sc.publishers) == 2
    targets = np.concatenate([s.y for s in (*sc.publishers, sc.subscriber)])
    assert targets.min() >= 0.0 and targets.max() <= 1.0
    assert targets.std() > 0.05  # scaled, not collapsed


# ---- budgets and model types -----------------------------------------------------------------
def test_with_budgets_sets_each_publishers_own_epsilon() -> None:
    sc = iid_sites(0, n_sites=4, seed=0, max_rows=20)
    changed = with_budgets(sc, [0.25, 1, 2.5])
    assert [s.epsilon for s in changed.publishers] == [0.25, 1.0, 2.5]
    assert all(isinstance(s.epsilon, float) for s in changed.publishers)
    assert [s.epsilon for s in sc.publishers] == [1.0, 1.0, 1.0]  # the input is left as it was
    assert changed.subscriber is sc.subscriber
    with pytest.raises(ValueError, match="need one budget per publisher"):
        with_budgets(sc, [1.0, 1.0])


def test_with_learners_cycles_over_the_model_types() -> None:
    sc = iid_sites(0, n_sites=6, seed=0, max_rows=20)
    changed = with_learners(sc, ["mlp", "forest"])
    assert [s.learner for s in changed.publishers] == ["mlp", "forest"] * 2 + ["mlp"]
    assert [s.learner for s in sc.publishers] == ["mlp"] * 5
    for before, after in zip(sc.publishers, changed.publishers, strict=True):
        assert after.X is before.X and after.epsilon == before.epsilon
