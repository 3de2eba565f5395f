"""Shared pieces of the asynchronous DP experiments: run sizes, tasks by name, runs, seed means.

References
----------
async-dp-cost-of-privacy.txt §5 (T = 1,000 iterations, ψ over 100 runs; Fig. 2, 4–8, 10).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
import pandas as pd

from pubsubml.errors import DataValidationError
from pubsubml.experiments.async_dp.tasks import (
    RegressionTask,
    ReplicaResult,
    diamonds_task,
    doctor_contacts_task,
    run_replicas,
    vietnam_task,
)
from pubsubml.experiments.reports import summarize

__all__ = [
    "NOISE_REGIME",
    "NONPRIVATE_EPSILON",
    "NO_FOLDS",
    "REAL_TASKS",
    "RunSizes",
    "figure_layout",
    "mean_over_seeds",
    "noise_regime",
    "real_task",
    "run_sizes",
    "run_task",
    "seeds_note",
]

#: ε used for the non-private reference runs of the same algorithm (noise scale ~1e-10 of Ξ).
NONPRIVATE_EPSILON = 1e12
#: ψ > 10·ψ(non-private) and ψ < 1: the DP noise dominates and the box Θ is not binding.
NOISE_REGIME = (10.0, 1.0)
#: The fold options of an experiment measured once per seed (its replicate runs are vectorized).
NO_FOLDS: dict[str, Any] = {
    "folds": 1,
    "min_folds": 1,
    "max_folds": 1,
    "folds_help": "No folds: one measurement per seed and setting, whose replicate runs of "
    "Algorithm 1 (100 at full size) are vectorized.",
}
#: Names of the real tasks (:attr:`RegressionTask.name`) that :func:`real_task` builds.
REAL_TASKS = ("diamonds-by-color", "doctorcontacts-by-health", "vietnami-by-commune")


class RunSizes(NamedTuple):
    """Iterations T of Algorithm 1 and replicate runs per measured cell."""

    horizon: int
    replicas: int


def run_sizes(smoke: bool) -> RunSizes:
    """The paper's T = 1,000 and 100 runs (Fig. 2); T = 60 and 6 runs at smoke size.

    Examples
    --------
    >>> run_sizes(False), run_sizes(True)
    (RunSizes(horizon=1000, replicas=100), RunSizes(horizon=60, replicas=6))
    """
    return RunSizes(60, 6) if smoke else RunSizes(1000, 100)


def figure_layout(smoke: bool) -> Literal["constrained"] | None:
    """Constrained layout for full runs; none for smoke runs (it costs seconds on log axes)."""
    return None if smoke else "constrained"


def real_task(name: str, seed: int) -> RegressionTask:
    """The real task whose :attr:`~RegressionTask.name` is ``name`` (one of :data:`REAL_TASKS`).

    Grid settings name their data set by task name, a plain (picklable) string.

    Raises
    ------
    DataValidationError
        On a name not in :data:`REAL_TASKS`.
    """
    if name == "diamonds-by-color":
        return diamonds_task("color", seed=seed)
    if name == "doctorcontacts-by-health":
        return doctor_contacts_task(seed=seed)
    if name == "vietnami-by-commune":
        return vietnam_task(seed=seed)
    raise DataValidationError(f"unknown real task {name!r}; choose one of {', '.join(REAL_TASKS)}")


def run_task(
    task: RegressionTask,
    epsilon: float,
    *,
    seed: int,
    smoke: bool,
    replicas: int | None = None,
    record_path: bool = False,
    clip_norm: float | None = None,
) -> ReplicaResult:
    """:func:`~pubsubml.experiments.async_dp.tasks.run_replicas` with the sizes of
    :func:`run_sizes` (``replicas`` overrides the number of runs)."""
    sizes = run_sizes(smoke)
    return run_replicas(
        task,
        epsilon=epsilon,
        horizon=sizes.horizon,
        replicas=replicas or sizes.replicas,
        seed=seed,
        record_path=record_path,
        clip_norm=clip_norm,
    )


def noise_regime(psi: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Which mean ψ lie in :data:`NOISE_REGIME` relative to the non-private ψ ``floor``.

    Examples
    --------
    >>> noise_regime(np.array([0.5, 0.005, 2.0]), np.array([0.001, 0.001, 0.001])).tolist()
    [True, False, False]
    """
    low, high = NOISE_REGIME
    return (psi > low * floor) & (psi < high)


def mean_over_seeds(
    table: pd.DataFrame, by: Sequence[str], values: Sequence[str], *, se: Sequence[str] = ()
) -> pd.DataFrame:
    """One row per group of ``by``: the mean over seeds of each column of ``values``.

    With several seeds in ``table``, each column of ``se`` is followed by ``<column>_se``, its
    standard error over seeds (:func:`~pubsubml.experiments.reports.summarize`).  An integer
    column stays an integer where all seeds agree (n_i of synthetic owners); with one seed the
    result holds the table's own values.

    Examples
    --------
    >>> t = pd.DataFrame({"seed": [0, 1], "eps": [1.0, 1.0], "psi": [1.0, 3.0], "n": [5, 5]})
    >>> mean_over_seeds(t, ["eps"], ["psi", "n"], se=["psi"]).to_dict("records")
    [{'eps': 1.0, 'psi': 2.0, 'psi_se': 1.0, 'n': 5}]
    """
    several = table["seed"].nunique() > 1
    out = pd.DataFrame()
    for column in values:
        stats = summarize(table, by, column)
        if out.empty:
            out = stats[list(by)].copy()
        mean = stats["mean"]
        if pd.api.types.is_integer_dtype(table[column]) and (mean == mean.round()).all():
            mean = mean.astype(table[column].dtype)
        out[column] = mean.to_numpy()
        if several and column in se:
            out[f"{column}_se"] = stats["se"].to_numpy()
    return out


def seeds_note(seeds: int, how: str = "") -> str:
    """A sentence saying how the tables aggregate several seeds (empty for one seed).

    ``how`` describes the aggregate; by default, means over seeds with standard errors ``_se``.

    Examples
    --------
    >>> seeds_note(1), seeds_note(3)
    ('', ' With 3 seeds (0 … 2): means over seeds; `_se`: their standard error.')
    """
    if seeds == 1:
        return ""
    return f" With {seeds} seeds (0 … {seeds - 1}): {how or 'means over seeds; `_se`: their standard error'}."
