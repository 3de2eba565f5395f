"""``heart-disease``: PubSub-ML on real hospitals, UCI Heart Disease (FLamby's Fed-Heart-Disease).

One command, two protocols (``--protocol both``, the default, or one of them):

* ``flamby`` (:mod:`.flamby`): FLamby's fixed split, accuracy on each hospital's test set and on
  the pooled test, FLamby's published rows beside ours, our federated rows through our loop and
  through Flower; ``--seeds`` model seeds (FLamby publishes 5).  Writes
  ``heart-disease-flamby.{csv,md,png}``.
* ``hospitals`` (:mod:`.hospitals`): each hospital with the features it records, ``--repeats``
  stratified train/test splits, Own, PubSub-ML at ε = 0.5 / 1 / 4, PubSub-ML*, DP-FedAvg (V)/(F)
  and Pooled, and a new small clinic of 30 / 60 / 100 patients.  Writes
  ``heart-disease-hospitals.{csv,md,png}``.

The Flower rows (``--flower/--no-flower``; on by default, off with ``--smoke``) start a local Ray
instance per run in this process, after the other tasks.  The options are read by
:mod:`.options`; the files are written by :mod:`.reports`.

References
----------
pubsub-ml.txt §7–8 (protocol, methods); du Terrail et al., "FLamby", NeurIPS 2022.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pubsubml.experiments.base import Experiment, Param, RunOptions
from pubsubml.experiments.heart_disease.flamby import FL_NAMES, flamby_task, flower_task
from pubsubml.experiments.heart_disease.hospitals import hospitals_task
from pubsubml.experiments.heart_disease.methods import SMOKE_TRAINING, TRAINING
from pubsubml.experiments.heart_disease.options import (
    NAME,
    PROTOCOLS,
    clinic_repeats,
    flower_on,
    protocols,
)
from pubsubml.experiments.heart_disease.reports import report_heart_disease
from pubsubml.experiments.runner import Record, progress_bar, run_grid

__all__ = ["HEART_DISEASE_EXPERIMENT", "NAME", "PROTOCOLS", "heart_task", "run_table"]


def _grid(opts: RunOptions) -> list[dict[str, Any]]:
    """One task per hospitals repeat and per FLamby model seed (in one pool)."""
    grid: list[dict[str, Any]] = []
    if "hospitals" in protocols(opts):
        clinics = clinic_repeats(opts)
        grid += [
            {"protocol": "hospitals", "index": r, "smoke": opts.smoke, "clinic": r < clinics}
            for r in range(opts.folds)
        ]
    if "flamby" in protocols(opts):
        grid += [
            {"protocol": "flamby", "index": s, "smoke": opts.smoke, "clinic": False}
            for s in range(opts.seeds)
        ]
    return grid


def heart_task(
    seed: int, fold: int, *, protocol: str, index: int, smoke: bool, clinic: bool = False
) -> list[Record]:
    """One task of the grid: FLamby seed ``index`` or hospitals repeat ``index``.

    ``seed`` and ``fold`` are the runner's (always 0): each task's own index is ``index``;
    ``clinic`` adds the small clinics to a hospitals repeat.
    """
    if protocol == "flamby":
        return [{"part": "flamby", **r} for r in flamby_task(index, smoke=smoke)]
    if protocol == "hospitals":
        return hospitals_task(index, smoke=smoke, seed=seed, clinic=clinic)
    raise ValueError(f"unknown protocol {protocol!r}")


def run_table(opts: RunOptions) -> pd.DataFrame:
    """Every task of both protocols in one pool, then the Flower runs in this process.

    Returns
    -------
    DataFrame
        The records with ``part`` ("flamby", "hospitals", "clinic"), ``seed`` (FLamby rows: the
        model seed) and ``repeat`` (hospitals and clinic rows).
    """
    table = run_grid(
        heart_task,
        seeds=1,
        folds=1,
        grid=_grid(opts),
        jobs=opts.jobs,
        description=NAME,
        progress=opts.progress,
        executor=opts.executor,
        address=opts.address,
    )
    flamby = table["protocol"] == "flamby"
    table["seed"] = np.where(flamby, table["index"], 0)
    table["repeat"] = np.where(flamby, -1, table["index"])
    table = table.drop(columns=["fold", "index", "protocol", "clinic"])
    if "flamby" in protocols(opts) and flower_on(opts):
        table = pd.concat([table, _flower_table(opts)], ignore_index=True)
    return table


def _flower_table(opts: RunOptions) -> pd.DataFrame:
    training = SMOKE_TRAINING if opts.smoke else TRAINING
    seeds = int(opts.params["flower_seeds"])
    runs = [(name, dp, s) for dp in (False, True) for name in FL_NAMES for s in range(seeds)]
    rows: list[Record] = []
    with progress_bar(opts.progress) as bar:
        task = bar.add_task(f"{NAME}, Flower", total=len(runs))
        for name, dp, s in runs:
            rows += [
                {"part": "flamby", "seed": s, "repeat": -1, **r}
                for r in flower_task(s, name, dp=dp, training=training)
            ]
            bar.advance(task)
    return pd.DataFrame(rows)


HEART_DISEASE_EXPERIMENT = Experiment(
    NAME,
    "UCI Heart Disease at four real hospitals: FLamby's protocol and the hospitals as they are "
    "(pubsub-ml.txt §7–8).",
    grid=_grid,
    run_fold=heart_task,
    report=report_heart_disease,
    seeds=5,
    folds=50,
    smoke_seeds=1,
    smoke_folds=2,
    min_folds=1,
    fold_aliases=("repeats",),
    folds_help="Train/test repeats of every hospital (the hospitals protocol; --seeds: model "
    "seeds of FLamby's protocol).",
    params=(
        Param("protocol", "both", "Which protocol to run.", choices=PROTOCOLS),
        Param(
            "flower",
            None,
            "Add the Flower rows to FLamby's protocol (local Ray, ~20 s a run; default: on, "
            "off with --smoke).",
            kind=bool,
        ),
        Param("flower_seeds", 3, "Seeds of every Flower row.", minimum=1),
        Param(
            "clinic_repeats",
            20,
            "The first repeats that also run the small clinics (1 with --smoke).",
            minimum=0,
        ),
    ),
    run_table=run_table,
)
"""``heart-disease``: ``--seeds`` (FLamby's protocol, default 5) and ``--repeats`` (hospitals,
default 50); both protocols run in one pool of ``--jobs`` workers."""
