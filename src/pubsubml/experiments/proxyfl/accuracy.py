"""``proxyfl-accuracy``: every method on mnist1d and digits, and each client's (ε, δ).

The analogue of proxyfl.txt Fig. 3 (§4.1): ProxyFL and the baselines Regular, Joint, FedAvg,
AvgPush, CWT and FML, scored after every round on the global IID test set and on each client's
skewed test set.  Each run also gives the per-client ε of the PLD accountant over the DP-SGD steps
actually run (``proxyfl-epsilon``), and one more ProxyFL run per data set gives the clients
budgets 2, 4, 6, …: a client stops sharing before a round that would exceed its budget (§3.3).

One task of the runner is one method on one data set for one seed (the seed of the split, the
models and the DP noise; seed 0 is the single run of the recorded results).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from pubsubml.errors import PaperAccountingWarning
from pubsubml.experiments.base import Experiment, RunOptions
from pubsubml.experiments.proxyfl.experiments import (
    FederatedSplit,
    MethodRun,
    make_federated,
    run_method,
)
from pubsubml.experiments.proxyfl.setups import (
    METHODS,
    Setup,
    add_model_labels,
    client_spread,
    command_line,
    describe,
    final_rounds,
    setup_for,
    setups,
    spread_description,
)
from pubsubml.experiments.reports import mean_se_label, write_results
from pubsubml.methods.proxyfl.architectures import private_factory
from pubsubml.methods.proxyfl.protocol import ProxyFL

__all__ = ["ACCURACY", "epsilon_rows", "run_accuracy_fold"]

ACCURACY_COLUMNS = [
    "seed", "method", "dataset", "round", "model", "arch", "client", "test", "accuracy",
    "macro_accuracy",
]  # fmt: skip
EPSILON_COLUMNS = [
    "seed", "dataset", "method", "client", "n_records", "sample_rate", "dp_steps", "budget",
    "epsilon", "guarantee", "delta", "run_seconds",
]  # fmt: skip
_SETTING_KEYS = ("dataset", "method")


def accuracy_grid(options: RunOptions) -> list[dict[str, Any]]:
    """One setting per (data set, method), then the per-client budget run of each data set."""
    return [
        {"dataset": s.dataset, "method": m, "per_client_budgets": budgets, "smoke": options.smoke}
        for s in setups(options.smoke)
        for m, budgets in [*((m, False) for m in METHODS), ("ProxyFL", True)]
    ]


def run_accuracy_fold(
    seed: int, fold: int, *, dataset: str, method: str, per_client_budgets: bool, smoke: bool
) -> list[dict[str, Any]]:
    """Train ``method`` on ``dataset``'s split of ``seed``; its metric and ε records.

    ``fold`` is always 0 (no folds).  Metric records (``kind == "accuracy"``) are per round, client,
    model and test set; ε records (``kind == "epsilon"``) are per client.  With
    ``per_client_budgets`` only the ε records of ProxyFL with budgets 2, 4, 6, … are returned.
    """
    setup = setup_for(dataset, smoke)
    split = make_federated(dataset, seed=seed, **setup.split_kw)  # type: ignore[arg-type]
    if per_client_budgets:
        rows = budget_rows(split, setup, seed)
    else:
        run = run_method(method, split, rounds=setup.rounds, config=setup.config, seed=seed)
        metrics = [{"kind": "accuracy", **row} for row in run.rows]
        rows = metrics + epsilon_rows(method, split, setup, run)
    return [{k: v for k, v in row.items() if k not in _SETTING_KEYS} for row in rows]


def epsilon_rows(
    method: str, split: FederatedSplit, setup: Setup, run: MethodRun
) -> list[dict[str, Any]]:
    """Per-client ε of a run without budgets, with the sampling rate, steps and what ε covers."""
    sizes = (
        [sum(len(X) for X, _ in split.clients)]
        if method == "Joint"
        else [len(X) for X, _ in split.clients]
    )
    cfg = setup.config.dpsgd()
    return [
        {
            "kind": "epsilon",
            "dataset": split.name,
            "method": method,
            "client": k,
            "n_records": n,
            "sample_rate": cfg.sample_rate_for(n),
            "dp_steps": setup.rounds * cfg.steps_for(n),
            "budget": "none",
            "epsilon": e,
            "guarantee": run.guarantee,
            "delta": setup.config.delta,
            "run_seconds": run.seconds,
        }
        for k, (n, e) in enumerate(zip(sizes, run.epsilons, strict=True))
    ]


def budget_rows(split: FederatedSplit, setup: Setup, seed: int) -> list[dict[str, Any]]:
    """ProxyFL with per-client budgets 2, 4, 6, … (§3.3): each client's steps and final ε."""
    n_clients = len(split.clients)
    budgets = tuple(2.0 + 2.0 * k for k in range(n_clients))
    cfg = dataclasses.replace(setup.config, epsilon_budget=budgets)
    with warnings.catch_warnings():  # the table's guarantee column says what ε covers
        warnings.simplefilter("ignore", PaperAccountingWarning)
        model = ProxyFL(
            n_classes=split.n_classes,
            rounds=setup.rounds,
            config=cfg,
            private_model=private_factory("mlp", split.input_shape),
            seed=seed,
        ).fit(split.clients)
    steps = model.cohort_.dp_steps()
    return [
        {
            "kind": "epsilon",
            "dataset": split.name,
            "method": "ProxyFL",
            "client": k,
            "n_records": model.cohort_.n[k],
            "sample_rate": model.cohort_.q[k],
            "dp_steps": steps[k],
            "budget": budgets[k],
            "epsilon": model.epsilons_[k],
            "guarantee": model.privacy_guarantee_,
            "delta": cfg.delta,
            "run_seconds": float("nan"),
        }
        for k in range(n_clients)
    ]


def records_of_kind(
    table: pd.DataFrame, kind: str, columns: Sequence[str], integers: Sequence[str]
) -> pd.DataFrame:
    """The records of one ``kind`` with their ``columns``; ``integers`` back to int (the other kind
    left them missing, which made them float)."""
    part = table.loc[table["kind"] == kind, list(columns)].reset_index(drop=True)
    return part.astype({c: "int64" for c in integers})


def final_accuracy_table(metrics: pd.DataFrame, seeds: int) -> pd.DataFrame:
    """Final accuracy and macro-accuracy per data set and model, global and local test sets."""
    last = add_model_labels(final_rounds(metrics, ["dataset", "method"]))
    parts = []
    for value, short in (("accuracy", "acc"), ("macro_accuracy", "macro")):
        stats = client_spread(last, ["dataset", "label", "test"], value, seeds)
        labels = [mean_se_label(m, s) for m, s in zip(stats["mean"], stats["spread"], strict=True)]
        parts.append(stats.assign(cell=labels, column=[f"{short} ({t})" for t in stats["test"]]))
    table = pd.concat(parts).pivot(index=["dataset", "label"], columns="column", values="cell")
    return table.reset_index().rename_axis(columns=None)


def accuracy_curves(metrics: pd.DataFrame) -> Figure:
    """Global-test accuracy and macro-accuracy per round (mean ± std over clients and seeds)."""
    datasets = list(dict.fromkeys(metrics["dataset"]))
    fig = Figure(figsize=(11, 4 * len(datasets)), layout="tight")
    axes = fig.subplots(len(datasets), 2, squeeze=False)
    rows = add_model_labels(metrics[metrics["test"] == "global"])
    for i, dataset in enumerate(datasets):
        for j, metric in enumerate(["accuracy", "macro_accuracy"]):
            ax = axes[i][j]
            part = rows[rows["dataset"] == dataset].groupby(["label", "round"])[metric]
            stats = part.agg(["mean", "std"])
            for label, sub in stats.groupby(level=0):
                sub = sub.droplevel(0)
                ax.plot(sub.index, sub["mean"], label=label)
                ax.fill_between(
                    sub.index, sub["mean"] - sub["std"], sub["mean"] + sub["std"], alpha=0.15
                )
            ax.set(title=f"{dataset}: {metric} (global IID test)", xlabel="round", ylabel=metric)
    axes[0][0].legend(fontsize=7)
    return fig


def _accuracy_notes(options: RunOptions) -> str:
    runs = "\n".join(f"- {s.dataset}: {describe(s)}" for s in setups(options.smoke))
    seeds = "One seed" if options.seeds == 1 else f"{options.seeds} seeds (0 … {options.seeds - 1})"
    return (
        f"Command: `{command_line('proxyfl-accuracy', options)}`.\n\n{runs}\n\n"
        f"{seeds} (the paper: 5).  FML/ProxyFL: private and proxy models; FedAvg: the central "
        "model; others: each client's DP model.  'global' = the IID test set, 'local' = each "
        "client's skewed test set.  Curves: mean ± std over clients (and seeds)."
    )


def _epsilon_notes(options: RunOptions) -> str:
    shared = (
        f"  The {options.jobs} worker processes (--jobs) shared the cores, so run_seconds include "
        "their contention."
        if options.jobs > 1
        else ""
    )
    return (
        "The budget rows run ProxyFL with per-client budgets: a client drops out before a round "
        "that would exceed its budget (proxyfl.txt §3.3).  run_seconds: wall time of the whole "
        "method run." + shared + "  guarantee: what ε covers — 'dp' (the proxy's own DP-SGD "
        "loss), or 'paper accounting' (β > 0: the proxy's loss uses the private model, trained on "
        "the same rows without noise, so ε is the paper's accounting, not a DP guarantee)."
    )


def accuracy_report(table: pd.DataFrame, out_dir: Path, options: RunOptions) -> list[Path]:
    """Write ``proxyfl-accuracy.{csv,md,png}`` and ``proxyfl-epsilon.{csv,md}``."""
    metrics = records_of_kind(table, "accuracy", ACCURACY_COLUMNS, ["round", "client"])
    eps = records_of_kind(table, "epsilon", EPSILON_COLUMNS, ["client", "n_records", "dp_steps"])
    written = write_results(
        "proxyfl-accuracy",
        out_dir,
        table=metrics,
        summary=final_accuracy_table(metrics, options.seeds),
        figure=accuracy_curves(metrics),
        notes=_accuracy_notes(options),
        title=f"ProxyFL and baselines: final accuracy ({spread_description(options.seeds)})",
    )
    written += write_results(
        "proxyfl-epsilon",
        out_dir,
        table=eps,
        summary=eps if options.seeds > 1 else eps.drop(columns="seed"),
        notes=_epsilon_notes(options),
        title="Per-client (ε, δ) from the PLD accountant over the DP-SGD steps actually run",
        digits=None,
    )
    return written


ACCURACY = Experiment(
    "proxyfl-accuracy",
    "ProxyFL and six baselines on mnist1d and digits: accuracy per round and per-client ε "
    "(proxyfl.txt Fig. 3, §3.3).",
    grid=accuracy_grid,
    run_fold=run_accuracy_fold,
    report=accuracy_report,
    folds=1,
    min_folds=1,
    max_folds=1,
    folds_help="No folds: each seed trains every method once and scores it on held-out test sets.",
)
