"""The sizes of the Hyperplane scale experiments: the paper's sizes and a smoke run."""

from __future__ import annotations

from pubsubml.experiments.base import RunOptions
from pubsubml.experiments.pubsub.scale.sizes import SIZES, ScaleSizes, size_name


def test_full_sizes_are_the_papers() -> None:
    full = SIZES["full"]
    assert full == ScaleSizes()
    assert (full.n_publishers, full.rows, full.folds, full.hidden) == (1000, 500, 5, (100, 50))
    assert (full.epsilon, full.delta, full.fl_fraction) == (1.0, 1e-4, 0.1)
    assert full.top_ms == (None, 100, 50, 10)


def test_smoke_sizes_are_smaller_everywhere() -> None:
    full, smoke = SIZES["full"], SIZES["smoke"]
    for field in ("n_publishers", "n_subscribers", "rows", "folds", "epochs", "fl_rounds"):
        assert getattr(smoke, field) < getattr(full, field), field
    assert max(smoke.publisher_counts) <= smoke.n_publishers
    assert all(m is None or m < smoke.n_publishers for m in smoke.top_ms)


def test_size_name_follows_smoke() -> None:
    assert size_name(RunOptions(smoke=True)) == "smoke"
    assert size_name(RunOptions()) == "full"
