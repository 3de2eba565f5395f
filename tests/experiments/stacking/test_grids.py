"""Options, sizes and grids of the stacking experiments (pfl-stacking.txt §4.1–§4.4)."""

from __future__ import annotations

import pytest

from pubsubml.experiments.base import Experiment, RunOptions
from pubsubml.experiments.stacking.experiments import DP_KINDS
from pubsubml.experiments.stacking.grids import (
    FULL_SIZES,
    SMOKE_SIZES,
    check_natural,
    label_grid,
    natural_grid,
    quantity_grid,
    result_name,
    run_sizes,
    vertical_grid,
)
from pubsubml.experiments.stacking.reporting import EXPERIMENTS


def options(smoke: bool = False, **params: object) -> RunOptions:
    values = {"dataset": "hi", "max_rows": 2000, "trees": 50, "dp": True} | params
    return RunOptions(seeds=10, folds=5, smoke=smoke, params=values)


def test_full_sizes_take_rows_and_trees_from_the_options_and_smoke_ignores_them() -> None:
    full = run_sizes(options())
    assert (full.max_rows, full.trees, full.n_clients, full.dp_kinds) == (2000, 50, 10, DP_KINDS)
    assert run_sizes(options(smoke=True)) == SMOKE_SIZES
    assert SMOKE_SIZES.max_rows < FULL_SIZES.max_rows and SMOKE_SIZES.trees < FULL_SIZES.trees


def test_quantity_grid_runs_every_a_and_the_dp_kinds_at_the_smallest() -> None:
    grid = quantity_grid(options())
    rf = [s for s in grid if s["models"] == "rf"]
    assert [s["a"] for s in rf] == [0.25, 0.5, 0.75, 1.0]  # the paper's Fig. 2
    (dp,) = [s for s in grid if s["models"] == "dp"]
    assert dp["a"] == 0.25 and dp["dp_kinds"] == "+".join(DP_KINDS)
    assert all(s["min_size"] == 50 and s["n_clients"] == 10 for s in grid)
    assert all((s["dataset"], s["max_rows"], s["trees"]) == ("hi", 2000, 50) for s in grid)
    assert [s["models"] for s in quantity_grid(options(dp=False))] == ["rf"] * 4


def test_label_grid_runs_every_alpha_and_the_dp_kinds_at_the_second() -> None:
    grid = label_grid(options(dataset="flchain"))
    assert [s["alpha"] for s in grid] == [0.5, 1.0, 10.0, 100.0, 1.0]
    assert [s["models"] for s in grid] == ["rf"] * 4 + ["dp"]
    assert {s["dataset"] for s in grid} == {"flchain"}


def test_vertical_grid_crosses_p_and_noise_and_adds_dp_defaults_and_disjoint_rows() -> None:
    grid = vertical_grid(options(dp=False))
    noisy = [(s["p"], s["noise"]) for s in grid if s["defaults"] == "noisy" and s["rows"] == "all"]
    assert noisy == [(p, e) for p in (0.25, 0.5, 0.75) for e in (0.0, 2.0, 4.0, 8.0, 16.0)]
    dp_defaults = [s for s in grid if s["defaults"] == "dp"]
    assert [(s["p"], s["noise"], s["rows"]) for s in dp_defaults] == [
        (p, 0.0, "all") for p in (0.25, 0.5, 0.75)
    ]
    disjoint = [s for s in grid if s["rows"] == "disjoint"]
    assert [(s["p"], s["noise"], s["defaults"]) for s in disjoint] == [
        (p, 0.0, "noisy") for p in (0.25, 0.5, 0.75)
    ]
    dp = [s for s in vertical_grid(options()) if s["models"] == "dp"]
    assert [(s["p"], s["defaults"], s["rows"]) for s in dp] == [
        (0.5, "noisy", "all"),
        (0.5, "noisy", "disjoint"),
        (0.5, "dp", "all"),
    ]


def test_smoke_grids_are_small() -> None:
    smoke = options(smoke=True)
    assert [s["a"] for s in quantity_grid(smoke)] == [0.5, 1.0, 0.5]
    assert len(vertical_grid(smoke)) == 7
    assert [s["models"] for s in natural_grid(smoke)] == ["rf", "dp"]
    for grid in (quantity_grid, label_grid, vertical_grid, natural_grid):
        assert {(s["max_rows"], s["trees"]) for s in grid(smoke)} == {(400, 10)}


def test_natural_partition_needs_a_categorical_column() -> None:
    check_natural(options(dataset="flchain"))
    with pytest.raises(ValueError, match="no natural partition column"):
        check_natural(options(dataset="shuttle"))


def test_result_names_carry_the_dataset_unless_it_is_census() -> None:
    assert result_name("hi", "quantity") == "stacking-quantity"
    assert result_name("shuttle", "vertical-jaccard") == "stacking-vertical-jaccard-shuttle"


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_smoke_shrinks_only_the_default_counts(exp: Experiment) -> None:
    assert (exp.seeds, exp.folds, exp.fold_aliases, exp.min_folds) == (10, 5, ("repeats",), 1)
    assert (exp.options().seeds, exp.options().folds) == (10, 5)
    smoke = exp.options(smoke=True)
    assert (smoke.seeds, smoke.folds) == (1, 2)
    explicit = exp.options(smoke=True, seeds=10)  # a count given is a count run
    assert (explicit.seeds, explicit.folds) == (10, 2)
    given = exp.options(smoke=True, seeds=3, folds=1)
    assert (given.seeds, given.folds) == (3, 1)
