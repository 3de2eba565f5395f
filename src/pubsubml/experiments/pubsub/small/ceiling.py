"""``pubsub-small-ceiling``: how much can a small subscriber gain from the DP models it receives?

``pubsub-small`` measures PubSub-ML against Own.  Where the gain is small, this experiment says
whether the fusion leaves gain on the table or the published models do not carry it.  On the
same sites as ``pubsub-small`` (classification data sets, subscribers of 100 and 200 rows, both
publisher model types at ε = 1), each run records on the external test set:

* **Own**: the subscriber's own model (:class:`~pubsubml.methods.pubsub.own.OwnLearner`, ``"auto"``);
* **Publisher (alone)**: the mean score of the DP publishers, each used alone;
* **Publishers (pooled)**: the publishers' centred log-odds averaged with equal weights;
* **PubSub-ML**: :class:`~pubsubml.methods.pubsub.customizer.Customizer` with its defaults;
* **Ceiling (test-chosen)**: the best of ``z_own + k · z̄_pub`` over a grid of ``k`` ≥ 0, chosen
  *on the test labels*.  Not a method (no subscriber can choose with test labels): an upper
  reference for a one-weight fusion of these publishers with the same own model.

The ceiling uses the own model refitted on all the subscriber's rows, as PubSub-ML does.

References
----------
pubsub-ml.txt §1, §8.1.1 (a small subscriber), §4 Step 4 (the fusion).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.experiments.base import Experiment, Param, RunOptions
from pubsubml.experiments.metrics import score
from pubsubml.experiments.pubsub.consortium import Scenario, with_learners
from pubsubml.experiments.pubsub.site_models import own_model, train_publishers
from pubsubml.experiments.pubsub.small.experiment import PUBLISHER_KINDS, SMALL_CONFIG, SMOKE_CONFIG
from pubsubml.experiments.pubsub.small.scenarios import (
    FULL_SIZES,
    SMALL_DATA,
    SMOKE_SIZES,
    small_scenario,
)
from pubsubml.experiments.reports import mean_se_label, summarize, write_results
from pubsubml.experiments.runner import Record
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.fusion import centred_log_odds

__all__ = [
    "CEILING_DATASETS",
    "CEILING_EXPERIMENT",
    "CEILING_KS",
    "CEILING_METHODS",
    "ceiling_task",
]

NAME = "pubsub-small-ceiling"
CEILING_DATASETS = tuple(d for d, spec in SMALL_DATA.items() if spec.task == "classification")
CEILING_SIZES = (100, 200)
CEILING_METHODS = (
    "Own",
    "Publisher (alone)",
    "Publishers (pooled)",
    "PubSub-ML",
    "Ceiling (test-chosen)",
)
#: Weights k of the publishers' pooled log-odds tried by the test-chosen ceiling.
CEILING_KS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


def _metric(scenario: Scenario, logits: np.ndarray, y: np.ndarray) -> float:
    assert scenario.classes is not None
    labels = np.asarray(scenario.classes)[np.argmax(logits, axis=1)]
    return score(scenario.metric, y, labels, minority=scenario.minority)


def ceiling_task(
    seed: int, repeat: int, *, dataset: str, n_sub: int, kind: str, smoke: bool
) -> list[Record]:
    """The five rows of one (data set, ``n_sub``, publisher kind, seed) run.

    ``repeat`` reseeds the models only, as in ``pubsub-small``; the model seeds follow
    :func:`~pubsubml.experiments.pubsub.compared.evaluate_fold` (``seed * 1000 + repeat``), so Own and
    PubSub-ML are the same models as in ``pubsub-small`` for the same seed.
    """
    sizes = SMOKE_SIZES if smoke else FULL_SIZES
    config = SMOKE_CONFIG if smoke else SMALL_CONFIG
    scenario = with_learners(small_scenario(dataset, n_sub, seed=seed, sizes=sizes), [kind])
    assert scenario.test is not None and scenario.task == "classification"
    rs = seed * 1000 + repeat
    sub, test = scenario.subscriber, scenario.test
    trains = [np.arange(len(p.y)) for p in scenario.publishers]
    models = train_publishers(scenario, trains, config, dp=True, seed=rs)
    own = own_model(scenario, config, rs).fit(sub.X, sub.y)
    cust = Customizer(
        models=models,
        task=scenario.task,
        schema=scenario.schema,
        classes=scenario.classes,
        random_state=rs,
    ).fit(sub.X, sub.y)
    z_pub = [centred_log_odds(m.predict_proba(test.X)) for m in models]
    assert cust.own_model_ is not None
    z_own = centred_log_odds(cust.own_model_.predict_proba(test.X))
    pooled = np.mean(z_pub, axis=0)
    y = test.y
    values = {
        "Own": score(scenario.metric, y, own.predict(test.X), minority=scenario.minority),
        "Publisher (alone)": float(np.mean([_metric(scenario, z, y) for z in z_pub])),
        "Publishers (pooled)": _metric(scenario, pooled, y),
        "PubSub-ML": score(scenario.metric, y, cust.predict(test.X), minority=scenario.minority),
        "Ceiling (test-chosen)": max(_metric(scenario, z_own + k * pooled, y) for k in CEILING_KS),
    }
    info = {"publisher": kind}  # run_grid adds dataset, n_sub, kind and smoke
    return [{**info, "method": m, "score": float(v)} for m, v in values.items()]


def summarize_ceiling(table: pd.DataFrame) -> pd.DataFrame:
    """Mean ± SE per (data set, n_sub, publisher, method), with the paired difference to Own."""
    keys = ["dataset", "n_sub", "publisher", "method"]
    per_seed = table.groupby([*keys, "seed"], sort=False)["score"].mean().reset_index()
    base = per_seed[per_seed["method"] == "Own"][["dataset", "n_sub", "publisher", "seed", "score"]]
    paired = per_seed.merge(
        base, on=["dataset", "n_sub", "publisher", "seed"], suffixes=("", "_own")
    )
    paired["score"] = paired["score"] - paired["score_own"]
    diffs = summarize(paired[paired["method"] != "Own"], keys)
    diffs["row − Own"] = [
        mean_se_label(m, s, 4) for m, s in zip(diffs["mean"], diffs["se"], strict=True)
    ]
    out = summarize(per_seed, keys)
    return out.merge(diffs[[*keys, "row − Own"]], on=keys, how="left").fillna({"row − Own": ""})


def _grid(opts: RunOptions) -> list[dict[str, Any]]:
    n_subs = [min(SMOKE_SIZES.subscriber_sizes)] if opts.smoke else list(CEILING_SIZES)
    dataset = opts.params.get("dataset")
    return [
        {"dataset": d, "n_sub": n, "kind": k, "smoke": opts.smoke}
        for d in ([dataset] if dataset else CEILING_DATASETS)
        for n in n_subs
        for k in PUBLISHER_KINDS
    ]


def _report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    notes = (
        f"{opts.seeds} seed(s); the sites, publishers (ε = 1, δ = 1e-4) and test sets of "
        "`pubsub-small` for the same seed.  `Publisher (alone)` is the mean over publishers of "
        "each one's score; `Publishers (pooled)` their centred log-odds averaged; `Ceiling "
        f"(test-chosen)` the best z_own + k · z̄_pub over k ∈ {list(CEILING_KS)} chosen on the "
        "test labels (an upper reference, not a method).  `row − Own` is paired by seed (SE "
        "over seeds)."
    )
    return write_results(
        NAME,
        out_dir,
        table=table,
        summary=summarize_ceiling(table),
        notes=notes,
        title="A small subscriber: what the DP publishers carry (PubSub-ML vs a test-chosen ceiling)",
        digits=4,
    )


CEILING_EXPERIMENT = Experiment(
    NAME,
    "PubSub-ML against what its DP publishers carry (pubsub-ml.txt §1, §4 Step 4).",
    grid=_grid,
    run_fold=ceiling_task,
    report=_report,
    seeds=5,
    folds=1,
    min_folds=1,
    max_folds=1,
    folds_help="one run per seed, scored on pubsub-small's external test set",
    params=(
        Param("dataset", None, "Only this data set (default: all).", CEILING_DATASETS, kind=str),
    ),
)
"""``pubsub-small-ceiling``: the sites of ``pubsub-small``'s seeds; no regression data set (no
class probabilities to pool)."""
