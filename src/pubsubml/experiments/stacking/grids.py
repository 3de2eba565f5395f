"""Options, sizes and parameter grids of the stacking experiments (pfl-stacking.txt §4).

Each ``*_grid(options)`` lists the settings of one scenario, the keyword arguments of its task in
:mod:`pubsubml.experiments.stacking.experiments`; :func:`run_sizes` gives the sizes they use (the
paper's, or the seconds-long ``--smoke`` ones).  :data:`PARAMS` are the options that every
stacking experiment takes beside the common ones.

Examples
--------
>>> params = {"dataset": "hi", "max_rows": 3000, "trees": 100, "dp": False}
>>> opts = RunOptions(smoke=True, params=params)
>>> [(s["a"], s["max_rows"], s["trees"]) for s in quantity_grid(opts)]
[(0.5, 400, 10), (1.0, 400, 10)]
>>> result_name("flchain", "natural")
'stacking-natural-flchain'
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pubsubml.experiments.base import Param, RunOptions
from pubsubml.experiments.stacking.experiments import DP_KINDS, NATURAL_COLUMNS, STAND_INS

__all__ = [
    "FULL_SIZES",
    "PARAMS",
    "SMOKE_SIZES",
    "StackingSizes",
    "check_natural",
    "label_grid",
    "natural_grid",
    "quantity_grid",
    "result_name",
    "run_sizes",
    "vertical_grid",
]

PARAMS = (
    Param(
        "dataset",
        "hi",
        "hi (Census), shuttle (Cover Type), flchain (Vehicle Loan).",
        choices=tuple(STAND_INS),
    ),
    Param("max_rows", 3000, "Rows sampled per seed (--smoke: 400).", minimum=1),
    Param("trees", 100, "Trees of private and meta forests (--smoke: 10).", minimum=1),
    Param("dp", True, "Also run DP public models (ε = 1, 4)."),
)
"""``--dataset --max-rows --trees --dp/--no-dp``, the options of every stacking experiment."""


@dataclass(frozen=True)
class StackingSizes:
    """The sizes of a run and the values of its grids.

    Attributes
    ----------
    n_clients : int
        Clients of the quantity, label and vertical partitions (natural: one per group).
    max_rows : int
        Rows sampled (per seed) from the data set before partitioning.
    trees : int
        Trees of the private and meta random forests (scikit-learn's default 100 in the paper).
    min_size : int
        Smallest client of the quantity skew, smallest group kept by the natural partition.
    dp_kinds : tuple of str
        The DP public model kinds run with ``--dp`` (:data:`~.experiments.DP_KINDS`).
    quantity_a, label_alpha, vertical_p, vertical_noise : tuple of float
        The power-law ``a`` (§4.1), Dirichlet α (§4.2), proportion ``p`` of predictors and
        ε_noise of the defaults (§4.3) of the grids.
    """

    n_clients: int
    max_rows: int
    trees: int
    min_size: int
    dp_kinds: tuple[str, ...]
    quantity_a: tuple[float, ...]
    label_alpha: tuple[float, ...]
    vertical_p: tuple[float, ...]
    vertical_noise: tuple[float, ...]


FULL_SIZES = StackingSizes(
    n_clients=10,
    max_rows=3000,
    trees=100,
    min_size=50,
    dp_kinds=DP_KINDS,
    quantity_a=(0.25, 0.5, 0.75, 1.0),
    label_alpha=(0.5, 1.0, 10.0, 100.0),
    vertical_p=(0.25, 0.5, 0.75),
    vertical_noise=(0.0, 2.0, 4.0, 8.0, 16.0),
)
"""The paper's grids (pfl-stacking.txt §4.1–§4.3); ``max_rows`` and ``trees`` are the options'."""
SMOKE_SIZES = StackingSizes(
    n_clients=4,
    max_rows=400,
    trees=10,
    min_size=20,
    dp_kinds=("dp_rf_e1", "dp_lr_e1", "dp_mlp_e1"),
    quantity_a=(0.5, 1.0),
    label_alpha=(0.5, 10.0),
    vertical_p=(0.5,),
    vertical_noise=(0.0, 4.0),
)
"""Sizes that run in seconds (``--smoke``); ``--max-rows`` and ``--trees`` do not apply."""


def run_sizes(options: RunOptions) -> StackingSizes:
    """:data:`SMOKE_SIZES` with ``smoke``, else :data:`FULL_SIZES` with the options' rows, trees."""
    if options.smoke:
        return SMOKE_SIZES
    return replace(
        FULL_SIZES, max_rows=int(options.params["max_rows"]), trees=int(options.params["trees"])
    )


def result_name(dataset: str, experiment: str) -> str:
    """``stacking-<experiment>``, with ``-<dataset>`` unless the data set is ``hi`` (Census).

    Examples
    --------
    >>> result_name("hi", "label-matrix")
    'stacking-label-matrix'
    """
    suffix = "" if dataset == "hi" else f"-{dataset}"
    return f"stacking-{experiment}{suffix}"


def check_natural(options: RunOptions) -> None:
    """Refuse a data set without a natural partition column (Shuttle) for §4.4.

    Raises
    ------
    ValueError
        ``--dataset`` is not a key of :data:`~.experiments.NATURAL_COLUMNS`.
    """
    dataset = options.params["dataset"]
    if dataset not in NATURAL_COLUMNS:
        raise ValueError(
            f"{dataset!r} has no natural partition column; use {list(NATURAL_COLUMNS)}"
        )


def _dp_setting(sizes: StackingSizes) -> dict[str, Any]:
    """Grid keys of a setting run with the DP public models."""
    return {"models": "dp", "dp_kinds": "+".join(sizes.dp_kinds)}


def _with_data(
    grid: list[dict[str, Any]], options: RunOptions, sizes: StackingSizes
) -> list[dict[str, Any]]:
    """Every setting of ``grid`` with the data set, its rows and the forests' trees."""
    data = {"dataset": options.params["dataset"], "max_rows": sizes.max_rows, "trees": sizes.trees}
    return [{**setting, **data} for setting in grid]


def quantity_grid(options: RunOptions) -> list[dict[str, Any]]:
    """§4.1: one setting per power-law ``a``; with ``dp`` the DP kinds at the smallest ``a``."""
    sizes = run_sizes(options)
    values = sizes.quantity_a
    grid = [{"a": a, "models": "rf", "n_clients": sizes.n_clients} for a in values]
    if options.params["dp"]:
        grid.append({"a": values[0], "n_clients": sizes.n_clients, **_dp_setting(sizes)})
    grid = [{**setting, "min_size": sizes.min_size} for setting in grid]
    return _with_data(grid, options, sizes)


def label_grid(options: RunOptions) -> list[dict[str, Any]]:
    """§4.2: one setting per Dirichlet α; with ``dp`` the DP kinds at the second α."""
    sizes = run_sizes(options)
    values = sizes.label_alpha
    grid = [{"alpha": a, "models": "rf", "n_clients": sizes.n_clients} for a in values]
    if options.params["dp"]:
        grid.append({"alpha": values[1], "n_clients": sizes.n_clients, **_dp_setting(sizes)})
    return _with_data(grid, options, sizes)


def vertical_grid(options: RunOptions) -> list[dict[str, Any]]:
    """§4.3 / App. A: (p, ε_noise) with noisy defaults, DP defaults and disjoint rows per ``p``.

    With ``dp``, the DP kinds at the middle ``p`` (ε_noise = 0) for both ``rows`` and with DP
    defaults.
    """
    sizes = run_sizes(options)
    ps = sizes.vertical_p
    base = {"models": "rf", "n_clients": sizes.n_clients, "rows": "all"}
    grid = [
        {"p": p, "noise": e, "defaults": "noisy", **base} for p in ps for e in sizes.vertical_noise
    ]
    grid += [{"p": p, "noise": 0.0, "defaults": "dp", **base} for p in ps]
    grid += [
        {**g, "rows": "disjoint"} for g in grid if g["noise"] == 0 and g["defaults"] == "noisy"
    ]
    if options.params["dp"]:
        mid = {
            "p": ps[len(ps) // 2],
            "noise": 0.0,
            "n_clients": sizes.n_clients,
            **_dp_setting(sizes),
        }
        grid += [{**mid, "defaults": "noisy", "rows": rows} for rows in ("all", "disjoint")]
        grid.append({**mid, "defaults": "dp", "rows": "all"})
    return _with_data(grid, options, sizes)


def natural_grid(options: RunOptions) -> list[dict[str, Any]]:
    """§4.4: the natural partition with the public forests; with ``dp`` also the DP kinds."""
    sizes = run_sizes(options)
    grid: list[dict[str, Any]] = [{"models": "rf", "min_size": sizes.min_size}]
    if options.params["dp"]:
        grid.append({"min_size": sizes.min_size, **_dp_setting(sizes)})
    return _with_data(grid, options, sizes)
