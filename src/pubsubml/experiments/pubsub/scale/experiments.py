"""The Hyperplane experiments of PubSub-ML, registered by name (pubsub-ml.txt §8.2–8.3).

``pubsub-selection`` (§8.2.3, Fig. 4 and Table 6), ``pubsub-publishers`` (§8.2.4, appendix B,
Fig. 8), ``pubsub-noisy`` (§8.2.5, appendix C, Fig. 9) and ``pubsub-streams`` (§8.3.3, Fig. 6):
each :class:`~pubsubml.experiments.base.Experiment` runs its folds
(:mod:`~pubsubml.experiments.pubsub.scale.many_publishers`,
:mod:`~pubsubml.experiments.pubsub.scale.noisy`, :mod:`~pubsubml.experiments.pubsub.scale.streams`)
and writes its files with :mod:`~pubsubml.experiments.pubsub.scale.reports`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from pubsubml.experiments.base import Experiment, Param, RunOptions
from pubsubml.experiments.pubsub.scale.many_publishers import (
    PROTOCOLS,
    publishers_fold,
    selection_fold,
)
from pubsubml.experiments.pubsub.scale.noisy import NOISY_SIZES, noisy_fold
from pubsubml.experiments.pubsub.scale.publishers_scale import scale_counts, scale_table
from pubsubml.experiments.pubsub.scale.reports import (
    report_noisy,
    report_publishers,
    report_selection,
    report_streams,
)
from pubsubml.experiments.pubsub.scale.sizes import SIZES, size_name
from pubsubml.experiments.pubsub.scale.streams import STREAM_SIZES, streams_run
from pubsubml.experiments.runner import Record

__all__ = ["EXPERIMENTS"]


def _split_experiment(
    name: str,
    summary: str,
    grid: Callable[[RunOptions], list[dict[str, Any]]],
    run_fold: Callable[..., list[Record]],
    report: Callable[[pd.DataFrame, Path, RunOptions], list[Path]],
    folds: dict[str, int],
    **extra: Any,
) -> Experiment:
    """A Hyperplane experiment on a K-fold split of ``folds[size]`` folds; ``--folds N`` runs the
    first N of them and more than the split has is refused.  ``extra``: ``params`` and
    ``run_table`` of the :class:`Experiment`."""

    def check(opts: RunOptions) -> None:
        n = folds[size_name(opts)]
        if opts.folds > n:
            raise ValueError(f"--folds must be in 1 … {n} (the split has {n} folds)")
        if "max_publishers" in opts.params:
            scale_counts(opts.smoke, int(opts.params["max_publishers"]))

    return Experiment(
        name,
        summary,
        grid=grid,
        run_fold=run_fold,
        report=report,
        folds=folds["full"],
        smoke_folds=folds["smoke"],
        min_folds=1,
        folds_help=_FOLDS_HELP,
        check=check,
        **extra,
    )


_FOLDS_HELP = "Run only the first N folds of the 5-fold split"
EXPERIMENTS: tuple[Experiment, ...] = (
    _split_experiment(
        "pubsub-noisy",
        "Fig. 9: 5 good and 5 pure-noise publishers, with a control (pubsub-ml.txt app. C).",
        lambda o: [{"size": size_name(o), "noisy": True}, {"size": size_name(o), "noisy": False}],
        noisy_fold,
        report_noisy,
        {size: NOISY_SIZES[size].folds for size in ("smoke", "full")},
    ),
    _split_experiment(
        "pubsub-publishers",
        "Fig. 8: accuracy against the number of publishers (pubsub-ml.txt app. B).",
        lambda o: [
            {
                "size": size_name(o),
                "max_publishers": o.params["max_publishers"],
                "customizer": o.params["customizer"],
            }
        ],
        publishers_fold,
        report_publishers,
        {size: SIZES[size].folds for size in ("smoke", "full")},
        params=(
            Param(
                "subscribers",
                "capped",
                "'capped': min(n, 10) subscribers and nested publisher pools (minutes); 'all': "
                "n publishers and n subscribers for each n, as the paper (hours at n = 5,000), "
                "with the time and peak memory of each n.",
                choices=("capped", "all"),
            ),
            Param(
                "max_publishers",
                5000,
                "The largest n of the paper's grid 5, 10, 20, 50, … 5,000 to run ('capped' stops "
                "at 1,000).",
                minimum=1,
            ),
            Param(
                "customizer",
                "default",
                "The subscribers' CUSTOMIZE: 'default', the Customizer's defaults (cross-fitted "
                "own model and stacked fusion); 'paper', the paper's Tra/Cus split, Table 4's "
                "own network and the fully connected fusion (§4, §7).",
                choices=PROTOCOLS,
            ),
        ),
        run_table=lambda o: scale_table(o) if o.params["subscribers"] == "all" else None,
    ),
    _split_experiment(
        "pubsub-selection",
        "Fig. 4, Table 6: model selection and runtime with many publishers (§8.2.3).",
        lambda o: [{"size": size_name(o)}],
        selection_fold,
        report_selection,
        {size: SIZES[size].folds for size in ("smoke", "full")},
    ),
    Experiment(
        "pubsub-streams",
        "Fig. 6: data streams, accuracy against the ensemble size k (pubsub-ml.txt §8.3.3).",
        grid=lambda o: [
            {"size": size_name(o), "k": k} for k in STREAM_SIZES[size_name(o)].ensemble_sizes
        ],
        run_fold=streams_run,
        report=report_streams,
        folds=1,
        min_folds=1,
        max_folds=1,
        folds_help="streams are scored prequentially, chunk by chunk",
    ),
)
"""The Hyperplane experiments (Fig. 4, 6, 8, 9, Table 6) as
:class:`~pubsubml.experiments.base.Experiment`."""
