"""The small-subscriber family: sizes, nested and disjoint sites, the external test set."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.pubsub.small.scenarios import (
    FULL_SIZES,
    SMALL_DATASETS,
    SMOKE_SIZES,
    SmallSizes,
    publisher_sizes,
    small_scenario,
    small_split,
    stratified_order,
)

HI_PUBLISHER_ROWS = 22_272 - 2_000 - 2_000  # HI's rows less the subscriber pool and the test set


def _rows(frame: pd.DataFrame) -> set[tuple[float, ...]]:
    """Hyperplane rows as tuples: continuous features, so equal tuples are the same row."""
    return set(map(tuple, frame.to_numpy(dtype=float)))


# ---- sizes and splits ------------------------------------------------------------------------
def test_publisher_sizes_are_drawn_in_range_and_fixed_by_the_seed() -> None:
    counts = set()
    for seed in range(30):
        drawn = publisher_sizes(seed)
        counts.add(len(drawn))
        assert 5 <= len(drawn) <= 10
        assert ((drawn >= 1000) & (drawn <= 3000)).all()
        np.testing.assert_array_equal(drawn, publisher_sizes(seed))
    assert len(counts) > 1  # the number of publishers varies with the seed
    assert not np.array_equal(publisher_sizes(0), publisher_sizes(1))


def test_split_is_disjoint_sized_nested_and_stratified() -> None:
    y = np.repeat(np.arange(4), [400, 300, 200, 100])  # 1,000 rows, shares .4 .3 .2 .1
    sizes = np.array([150, 250])
    splits = {
        n: small_split(
            y, n_sub=n, pub_sizes=sizes, test_rows=300, pool_rows=200, seed=3, stratify=True
        )
        for n in (20, 50, 200)
    }
    for n, split in splits.items():
        parts = [*split.publishers, split.subscriber, split.test]
        assert [len(p) for p in parts] == [150, 250, n, 300]
        together = np.concatenate(parts)
        assert len(np.unique(together)) == len(together)  # pairwise disjoint
        # the subscriber has the class shares of the rows outside the test set, to within one
        rest = np.setdiff1d(np.arange(len(y)), split.test)
        shares = np.bincount(y[rest], minlength=4) / len(rest)
        counts = np.bincount(y[split.subscriber], minlength=4)
        assert np.all(np.abs(counts - n * shares) < 1.0)
    # only the subscriber depends on n_sub, and its rows are nested
    for split in (splits[50], splits[200]):
        np.testing.assert_array_equal(split.test, splits[20].test)
        for a, b in zip(split.publishers, splits[20].publishers, strict=True):
            np.testing.assert_array_equal(a, b)
    assert set(splits[20].subscriber) <= set(splits[50].subscriber) <= set(splits[200].subscriber)


def test_split_refuses_impossible_sizes() -> None:
    y = np.zeros(100)
    with pytest.raises(ValueError, match="n_sub"):
        small_split(y, n_sub=30, pub_sizes=np.array([10]), test_rows=10, pool_rows=20, seed=0,
                    stratify=False)  # fmt: skip
    with pytest.raises(ValueError, match="population has 100"):
        small_split(y, n_sub=5, pub_sizes=np.array([80]), test_rows=20, pool_rows=10, seed=0,
                    stratify=False)  # fmt: skip


def test_stratified_order_keeps_every_prefix_stratified() -> None:
    labels = np.random.default_rng(0).integers(0, 3, 500)
    order = stratified_order(labels, seed=1)
    assert sorted(order.tolist()) == list(range(500))
    shares = np.bincount(labels) / len(labels)
    for k in (10, 37, 100, 250):
        assert np.all(np.abs(np.bincount(labels[order[:k]], minlength=3) - k * shares) < 1.0)


# ---- scenarios -------------------------------------------------------------------------------
@pytest.mark.parametrize("dataset", ["hyperplane", "hi", "diamonds"])
def test_full_scenario_sizes_and_external_test(dataset: str) -> None:
    for seed in range(3):
        sc = small_scenario(dataset, 100, seed=seed)
        assert sc.test is not None
        sizes = [len(p.y) for p in sc.publishers]
        drawn = publisher_sizes(seed)
        assert len(sizes) == len(drawn) and 5 <= len(sizes) <= 10
        assert len(sc.subscriber.y) == 100
        if dataset == "hi":  # short: a 2,000-row test set, publishers scaled down if needed
            assert len(sc.test.y) == 2000
            assert sum(sizes) <= HI_PUBLISHER_ROWS
            if drawn.sum() <= HI_PUBLISHER_ROWS:
                assert sizes == drawn.tolist()
        else:
            assert len(sc.test.y) == 5000
            assert sizes == drawn.tolist()
        assert list(sc.test.X.columns) == list(sc.subscriber.X.columns) == sc.schema.names
    assert sc.task == ("regression" if dataset == "diamonds" else "classification")


def test_hi_scales_publishers_down_when_a_seed_draws_too_many_rows() -> None:
    seed = next(s for s in range(100) if publisher_sizes(s).sum() > HI_PUBLISHER_ROWS)
    drawn = publisher_sizes(seed)
    sizes = np.array([len(p.y) for p in small_scenario("hi", 100, seed=seed).publishers])
    assert HI_PUBLISHER_ROWS - len(drawn) <= sizes.sum() <= HI_PUBLISHER_ROWS
    np.testing.assert_allclose(sizes / sizes.sum(), drawn / drawn.sum(), atol=1e-3)


def test_sites_and_test_rows_are_disjoint_and_deterministic() -> None:
    small, large = (small_scenario("hyperplane", n, seed=4) for n in (200, 2000))
    parts = [*(p.X for p in large.publishers), large.subscriber.X]
    assert large.test is not None and small.test is not None
    seen = _rows(large.test.X)
    assert len(seen) == len(large.test.y)
    for frame in parts:  # no row is in two sites, none in the test set
        rows = _rows(frame)
        assert len(rows) == len(frame) and not rows & seen
        seen |= rows
    # the same seed gives the same sites; a larger subscriber keeps the smaller one's rows
    again = small_scenario("hyperplane", 200, seed=4)
    pd.testing.assert_frame_equal(again.subscriber.X, small.subscriber.X)
    assert again.test is not None
    pd.testing.assert_frame_equal(again.test.X, small.test.X)
    pd.testing.assert_frame_equal(small.test.X, large.test.X)
    for a, b in zip(small.publishers, large.publishers, strict=True):
        pd.testing.assert_frame_equal(a.X, b.X)
    assert _rows(small.subscriber.X) <= _rows(large.subscriber.X)
    other = small_scenario("hyperplane", 200, seed=5)
    assert not _rows(other.subscriber.X) & _rows(small.subscriber.X)


@pytest.mark.parametrize("dataset", SMALL_DATASETS)
def test_smoke_scenarios_give_every_class_rows_for_five_folds(dataset: str) -> None:
    sc = small_scenario(dataset, 60, seed=0, sizes=SMOKE_SIZES)
    assert sc.test is not None and len(sc.test.y) in (SMOKE_SIZES.test_rows, 200)
    if sc.task == "classification":
        assert sc.classes is not None
        assert np.bincount(sc.subscriber.y, minlength=len(sc.classes)).min() >= 5


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown data set"):
        small_scenario("nela", 100, seed=0)
    with pytest.raises(ValueError, match="n_sub"):
        small_scenario("hyperplane", 2001, seed=0)
    with pytest.raises(ValueError, match="bad ranges"):
        publisher_sizes(0, SmallSizes(publishers=(3, 2)))
    assert FULL_SIZES.pool_rows == 2000
