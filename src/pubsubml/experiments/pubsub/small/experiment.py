"""``pubsub-small``: does a small subscriber gain by subscribing to DP models? (pubsub-ml.txt §1, §8.1.1)

Runs the small-subscriber family (:mod:`pubsubml.experiments.pubsub.small.scenarios`) for every data set, subscriber
size ``n_sub`` and seed, and writes ``<out_dir>/pubsub-small.{csv,md,png}``.  Methods, all at the
same privacy (ε = 1 for every DP release, δ = 1e-4):

* **Own**: the subscriber's own model alone, an :class:`~pubsubml.methods.pubsub.own.OwnLearner` chosen
  by 5-fold cross-validation among a network, a random forest and a logistic / ridge model;
* **PubSub-ML**: :class:`~pubsubml.methods.pubsub.customizer.Customizer` with its defaults (the same own
  learner, cross-fitted fusion) over the publishers' DP models; **PubSub-ML*** the same with
  non-private publishers;
* **FedAvg(V)** and **FedAvg(F)**: DP-FedAvg over the publishers and the subscriber (DP-SGD at
  every client), vanilla and fine-tuned without DP on the subscriber's rows;
* **Joint**: Table 4's network on all sites' rows pooled, non-private.

The publishers' model type is a column, ``publisher``: ``"mlp"`` (Table 4's network trained by
DP-SGD) or ``"sgd_linear"`` (a logistic or linear model trained by DP-SGD).  Own, FedAvg and
Joint do not depend on it and have ``publisher = "—"``.  Each seed draws new sites; the table
gives mean ± standard error over seeds (repeats of one seed are averaged first), the paired
differences PubSub-ML − Own and PubSub-ML − FedAvg(F) with their standard error over seeds, and
how often CUSTOMIZE fell back to the own model alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from pubsubml.data import load_hi
from pubsubml.experiments.base import Experiment, Param, RunOptions
from pubsubml.experiments.pubsub.compared import MethodConfig, evaluate_fold
from pubsubml.experiments.pubsub.consortium import FL_DP, with_learners
from pubsubml.experiments.pubsub.small.scenarios import (
    FULL_SIZES,
    SMALL_DATA,
    SMALL_DATASETS,
    SMOKE_SIZES,
    SmallSizes,
    small_scenario,
)
from pubsubml.experiments.reports import mean_se_label, summarize, write_results
from pubsubml.experiments.runner import Record
from pubsubml.methods.pubsub.own_crossfit import CrossFitStore

__all__ = [
    "NAME",
    "PUBLISHER_KINDS",
    "SHARED",
    "SHARED_METHODS",
    "SMALL_CONFIG",
    "SMALL_EXPERIMENT",
    "SMALL_METHODS",
    "SMOKE_CONFIG",
    "paired_differences",
    "small_task",
    "summarize_small",
]

NAME = "pubsub-small"
SHARED_METHODS = ("Own", "FedAvg(V)", "FedAvg(F)", "Joint")
PUBSUB_METHODS = ("PubSub-ML", "PubSub-ML*")
SMALL_METHODS = (*SHARED_METHODS, *PUBSUB_METHODS)
#: Publisher model types (keys of :data:`~pubsubml.experiments.pubsub.consortium.LEARNERS`).
PUBLISHER_KINDS = ("mlp", "sgd_linear")
#: The ``publisher`` value of the methods that do not depend on the publishers' model type.
SHARED = "—"
#: Table 4's network (100, 50) tanh; the DP publishers' networks with the learner's DP-SGD
#: defaults (batch ≈ n/3, Adam with a learning rate from public inputs, 30 epochs), the DP FL
#: clients with the same rule's learning rate (minibatch 100), everything else with Table 4's
#: schedule (30 epochs, Adam 1e-3, minibatch 100).  Own model: OwnLearner
#: ("auto"); CUSTOMIZE: the Customizer's defaults.
SMALL_CONFIG = MethodConfig(dp_defaults=True)
SMOKE_CONFIG = MethodConfig(
    hidden_layer_sizes=(8,), epochs=1, fl_rounds=1, fine_tune_epochs=1, dp_defaults=True
)
_KEYS = ["dataset", "n_sub", "publisher", "method"]
_DIFFS = {"Own": "row − Own", "FedAvg(F)": "row − FedAvg(F)"}


def _sizes(smoke: bool) -> SmallSizes:
    return SMOKE_SIZES if smoke else FULL_SIZES


def small_task(
    seed: int,
    repeat: int,
    *,
    dataset: str,
    n_sub: int,
    smoke: bool,
    fl_dp: Literal["local", "central"] = "local",
    publishers: Sequence[str] = PUBLISHER_KINDS,
) -> list[Record]:
    """Every method on one scenario of the family (one data set, ``n_sub`` and seed).

    ``repeat`` only reseeds the models: the sites and the test set depend on ``seed``.  The
    shared methods run once; PubSub-ML and PubSub-ML* run once per publisher model type, on the
    same sites.

    Returns
    -------
    list of dict
        :func:`~pubsubml.experiments.pubsub.compared.evaluate_fold`'s records with ``publisher``,
        ``n_publishers``, ``publisher_rows`` (their total) and ``test_rows`` added.
    """
    scenario = small_scenario(dataset, n_sub, seed=seed, sizes=_sizes(smoke))
    config = replace(SMOKE_CONFIG if smoke else SMALL_CONFIG, fl_dp=fl_dp)
    assert scenario.test is not None
    info = {
        "n_publishers": len(scenario.publishers),
        "publisher_rows": int(sum(len(p.y) for p in scenario.publishers)),
        "test_rows": len(scenario.test.y),
    }
    cross_fits = CrossFitStore()  # the same subscriber, seed and repeat: one own model
    shared = evaluate_fold(
        scenario,
        seed=seed,
        fold=repeat,
        methods=SHARED_METHODS,
        config=config,
        cross_fits=cross_fits,
    )
    records = [{**r, "publisher": SHARED, **info} for r in shared]
    for kind in publishers:
        for r in evaluate_fold(
            with_learners(scenario, [kind]),
            seed=seed,
            fold=repeat,
            methods=PUBSUB_METHODS,
            config=config,
            cross_fits=cross_fits,
        ):
            records.append({**r, "publisher": kind, **info})
    return records


def _per_seed(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (data set, n_sub, publisher, method, seed): repeats averaged."""
    frame = table.copy()
    for column in ("auc", "fallback"):
        frame[column] = (
            pd.to_numeric(frame[column], errors="coerce") if column in frame else math.nan
        )
    frame["fallback"] = frame["fallback"].astype(float)
    grouped = frame.groupby([*_KEYS, "seed"], sort=False, dropna=False)
    return grouped[["score", "auc", "fallback"]].mean().reset_index()


def paired_differences(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per seed, each PubSub-ML method's score minus ``baseline``'s, paired by seed.

    Parameters
    ----------
    table : DataFrame
        Records with ``dataset, n_sub, publisher, method, seed, score`` (repeats are averaged).
    baseline : str
        A method of :data:`SHARED_METHODS`.

    Returns
    -------
    DataFrame with columns ``dataset, n_sub, publisher, method, seed, diff``

    Examples
    --------
    >>> t = pd.DataFrame({"dataset": "d", "n_sub": 100, "seed": [0, 0, 1, 1], "fold": 0,
    ...                   "publisher": ["—", "mlp"] * 2, "method": ["Own", "PubSub-ML"] * 2,
    ...                   "score": [0.5, 0.6, 0.7, 0.7]})
    >>> paired_differences(t, "Own")["diff"].round(3).tolist()
    [0.1, 0.0]
    """
    per_seed = _per_seed(table)
    base = per_seed[per_seed["method"] == baseline][["dataset", "n_sub", "seed", "score"]]
    ours = per_seed[per_seed["method"].isin(PUBSUB_METHODS)]
    merged = ours.merge(base, on=["dataset", "n_sub", "seed"], suffixes=("", "_base"))
    merged["diff"] = merged["score"] - merged["score_base"]
    return merged[[*_KEYS, "seed", "diff"]]


def summarize_small(table: pd.DataFrame) -> pd.DataFrame:
    """The Markdown table: mean ± SE over seeds, ROC AUC, paired differences and fallbacks.

    Parameters
    ----------
    table : DataFrame
        :func:`small_task`'s records with ``seed`` and ``fold`` (the repeat), as
        :func:`~pubsubml.experiments.runner.run_grid` returns them.

    Returns
    -------
    DataFrame
        One row per (data set, n_sub, publisher, method) in the order data set, n_sub, shared
        methods, then PubSub-ML and PubSub-ML* per publisher type; ``mean``, ``se``, ``n`` (seeds);
        ``ROC AUC`` (classification); ``row − Own`` and ``row − FedAvg(F)`` (PubSub-ML rows: the
        mean ± SE over seeds of the paired difference); ``fallback`` (PubSub-ML rows: the share of
        runs in which CUSTOMIZE kept the own model alone).
    """
    per_seed = _per_seed(table)
    order = {d: i for i, d in enumerate(SMALL_DATASETS)}
    methods = {m: i for i, m in enumerate(SMALL_METHODS)}
    per_seed = per_seed.assign(
        _d=per_seed["dataset"].map(order).fillna(len(order)),
        _p=(per_seed["publisher"] != SHARED).astype(int),
        _m=per_seed["method"].map(methods),
    ).sort_values(["_d", "n_sub", "_p", "publisher", "_m", "seed"], kind="stable")
    summary = summarize(per_seed, _KEYS)
    auc = summarize(per_seed.dropna(subset=["auc"]), _KEYS, value="auc")
    merged = summary.merge(auc, on=_KEYS, how="left", suffixes=("", "_auc"))
    summary["ROC AUC"] = [
        "" if pd.isna(m) else mean_se_label(m, s)
        for m, s in zip(merged["mean_auc"], merged["se_auc"], strict=True)
    ]
    for baseline, column in _DIFFS.items():
        diffs = paired_differences(table, baseline)
        cell = summarize(diffs, _KEYS, value="diff") if len(diffs) else None
        labels: dict[tuple[Any, ...], str] = {}
        if cell is not None:
            keys = cell[_KEYS].itertuples(index=False, name=None)
            for key, m, se in zip(keys, cell["mean"], cell["se"], strict=True):
                labels[tuple(key)] = mean_se_label(float(m), float(se), 4)
        summary[column] = [
            labels.get(tuple(r), "") for r in summary[_KEYS].itertuples(index=False, name=None)
        ]
    fallback = per_seed.groupby(_KEYS, sort=False, dropna=False)["fallback"].mean()
    summary["fallback"] = [
        "" if pd.isna(v := fallback.get(tuple(r), math.nan)) else f"{v:.0%}"
        for r in summary[_KEYS].itertuples(index=False, name=None)
    ]
    return summary


def _figure(table: pd.DataFrame, summary: pd.DataFrame) -> Any:
    """Top: score vs n_sub per method; bottom: PubSub-ML − Own and − FedAvg(F), paired by seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = [d for d in SMALL_DATASETS if d in set(summary["dataset"])]
    fig, axes = plt.subplots(2, len(datasets), figsize=(4.2 * len(datasets), 7), squeeze=False)
    for col, dataset in enumerate(datasets):
        top, bottom = axes[0][col], axes[1][col]
        part = summary[summary["dataset"] == dataset]
        for (publisher, method), line in part.groupby(["publisher", "method"], sort=False):
            label = method if publisher == SHARED else f"{method} ({publisher})"
            style = "--" if publisher == SHARED else "-"
            top.errorbar(
                line["n_sub"],
                line["mean"],
                yerr=line["se"],
                label=label,
                ls=style,
                marker=".",
                capsize=2,
            )
        top.set_title(f"{dataset} ({SMALL_DATA[dataset].metric})")
        for baseline, marker in (("Own", "o"), ("FedAvg(F)", "s")):
            diffs = paired_differences(table[table["dataset"] == dataset], baseline)
            diffs = diffs[diffs["method"] == "PubSub-ML"]
            for publisher, rows in diffs.groupby("publisher", sort=False):
                cell = summarize(rows, ["n_sub"], value="diff")
                bottom.errorbar(
                    cell["n_sub"],
                    cell["mean"],
                    yerr=cell["se"],
                    marker=marker,
                    capsize=2,
                    label=f"PubSub-ML ({publisher!s}) − {baseline}",
                )
        bottom.axhline(0.0, color="grey", lw=0.8)
        bottom.set_xlabel("subscriber rows n_sub")
        sizes = sorted(set(part["n_sub"]))
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_xticks(sizes, [str(n) for n in sizes])
            ax.minorticks_off()
    axes[0][0].set_ylabel("score on the external test set")
    axes[1][0].set_ylabel("paired difference")
    axes[0][-1].legend(fontsize=7, loc="best")
    axes[1][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def _notes(sizes: SmallSizes, *, seeds: int, repeats: int, fl_dp: str, smoke: bool) -> str:
    lo, hi = sizes.publishers
    rlo, rhi = sizes.publisher_rows
    hi_rows = len(load_hi())
    left = hi_rows - sizes.pool_rows - sizes.short_test_rows
    text = (
        f"Setup: {seeds} seed(s) × {repeats} repeat(s); each seed draws {lo}–{hi} publishers "
        f"with {rlo:,}–{rhi:,} rows each (uniform), a subscriber pool of {sizes.pool_rows:,} rows "
        f"and an external test set ({sizes.test_rows:,} rows; {sizes.short_test_rows:,} for HI) "
        "that no site holds; every site is an IID draw from one population, the subscriber's "
        "rows a stratified sample (see `pubsubml.experiments.pubsub.small`).  Every site trains on all "
        f"its rows.  HI has {hi_rows:,} rows: where a seed draws more than the {left:,} "
        "publisher rows left after the pool and the test set, every publisher is scaled down in "
        "proportion (`publisher_rows` in the CSV).  Metrics: accuracy (Hyperplane, MNIST-1D), F1 "
        "of the minority class (HI), 1 − MSE of log10 price scaled to [0, 1] (diamonds).  DP: "
        "ε = 1, δ = 1e-4 for every publisher and every FL client.  Networks: (100, 50) tanh; the "
        "DP publishers' with the DP-SGD defaults of `pubsubml.learners` (batch ≈ n/3, 30 epochs, "
        "Adam, C = 1, learning rate from public inputs); the DP FL clients with the same rule's "
        "learning rate and minibatches of 100; every other network (Joint, PubSub-ML*, the "
        "fine-tuning of (F)) with Table 4's schedule: Adam 1e-3, 30 epochs, minibatch 100.  Own: "
        "OwnLearner(kind='auto'), the best of a network, a random forest and a logistic / ridge "
        "model by 5-fold CV on the subscriber's rows; PubSub-ML uses the same own learner inside "
        "CUSTOMIZE (Customizer defaults).  Publishers `mlp`: Table 4's network by DP-SGD; "
        "`sgd_linear`: logistic / linear model by DP-SGD (PubSub-ML*: the same model types "
        "without DP).  FedAvg: 30 rounds, every client every round, one local epoch; (F): 30 "
        "epochs of non-private fine-tuning on the subscriber's rows.  SE over seeds; the "
        "differences are paired by seed; `fallback` is the share of runs in which CUSTOMIZE kept "
        "the own model alone."
    )
    if smoke:
        text = (
            "**Smoke configuration** (`--smoke`): the tiny sites below, networks of 8 units, 1 "
            "epoch, 1 FL round; the numbers only show that the pipeline runs (the networks and "
            "schedules described below are the full run's).  " + text
        )
    if fl_dp == "central":
        text += (
            "  FL baselines here use central DP (--fl-dp central): the unit of privacy is the "
            "client, about 2ε per record."
        )
    return text


def _grid(opts: RunOptions) -> list[dict[str, Any]]:
    # the largest subscribers first, so that the slowest tasks do not finish last
    dataset = opts.params.get("dataset")
    return [
        {"dataset": d, "n_sub": n, "smoke": opts.smoke, "fl_dp": opts.params["fl_dp"]}
        for n in sorted(_sizes(opts.smoke).subscriber_sizes, reverse=True)
        for d in ([dataset] if dataset else SMALL_DATASETS)
    ]


def _report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    summary = summarize_small(table)
    notes = _notes(
        _sizes(opts.smoke),
        seeds=opts.seeds,
        repeats=opts.folds,
        fl_dp=opts.params["fl_dp"],
        smoke=opts.smoke,
    )
    return write_results(
        NAME,
        out_dir,
        table=table,
        summary=summary,
        figure=_figure(table, summary),
        notes=notes,
        title="A small subscriber: PubSub-ML vs its own model, DP-FedAvg and Joint",
        digits=4,
    )


SMALL_EXPERIMENT = Experiment(
    NAME,
    "A small subscriber on an external test set (pubsub-ml.txt §1, §8.1.1).",
    grid=_grid,
    run_fold=small_task,
    report=_report,
    seeds=5,
    folds=1,
    min_folds=1,
    fold_aliases=("repeats",),
    folds_help="Model seeds per data seed (no cross-validation: the test set is external).",
    params=(
        FL_DP,
        Param("dataset", None, "Only this data set (default: all).", SMALL_DATASETS, kind=str),
    ),
)
"""``pubsub-small``: each seed draws new sites and a new test set; ``--folds`` (``--repeats``)
reseeds only the models (the ``fold`` column of the CSV)."""
