"""``proxyfl-ablations``: non-IID skew, heterogeneous private models, DP versus non-DP.

The analogue of proxyfl.txt Fig. 5 (§4.2) on digits (image-like inputs, so the 2-D CNNs apply):

(a) every method at ``p_major`` 0.1 (IID), 0.5 and 0.8, with DP-SGD;
(b) ProxyFL with one private architecture per two clients (MLP, LeNet-like, CNN1, CNN2) against
    Regular DP-SGD training of the same architectures;
(c) every method without DP-SGD at ``p_major`` 0.8, against (a)'s DP runs.

One task of the runner is one method under one ablation setting for one seed (seed 0 is the single
run of the recorded results).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from pubsubml.experiments.base import Experiment, RunOptions
from pubsubml.experiments.proxyfl.experiments import (
    MethodRun,
    make_federated,
    run_method,
    run_regular_models,
)
from pubsubml.experiments.proxyfl.setups import (
    METHODS,
    Setup,
    add_model_labels,
    client_spread,
    command_line,
    describe,
    final_rounds,
    setups,
    spread_description,
)
from pubsubml.experiments.reports import markdown_table, mean_se_label, write_results

__all__ = ["ABLATIONS", "mixed_architectures", "run_ablation_fold"]

ARCHITECTURES = ("mlp", "lenet", "cnn1", "cnn2")
COLUMNS = [
    "seed", "method", "dataset", "ablation", "setting", "round", "model", "arch", "client", "test",
    "accuracy", "macro_accuracy",
]  # fmt: skip


def ablation_setup(smoke: bool) -> Setup:
    """The digits setup of :func:`~pubsubml.experiments.proxyfl.setups.setups`."""
    return setups(smoke)[-1]


def mixed_architectures(n_clients: int) -> list[str]:
    """One private architecture per ``n_clients / 4`` clients, in the order of Fig. 5 (b).

    Examples
    --------
    >>> mixed_architectures(8)
    ['mlp', 'mlp', 'lenet', 'lenet', 'cnn1', 'cnn1', 'cnn2', 'cnn2']
    """
    n = len(ARCHITECTURES)
    return [ARCHITECTURES[k * n // n_clients] for k in range(n_clients)]


def ablation_grid(options: RunOptions) -> list[dict[str, Any]]:
    """Settings of (a), (c) and (b), each with the method to run."""
    smoke = options.smoke
    methods = ("Regular", "FML", "ProxyFL") if smoke else METHODS
    skews = (0.5,) if smoke else (0.1, 0.5, 0.8)
    cases: list[tuple[str, float | str, str]] = [
        *(("p_major", p, m) for p in skews for m in methods),
        *(("dp", "non-DP", m) for m in methods),
        ("architectures", "mixed", "ProxyFL"),
        ("architectures", "mixed", "Regular"),
    ]
    return [{"ablation": a, "setting": s, "method": m, "smoke": smoke} for a, s, m in cases]


def run_ablation_fold(
    seed: int, fold: int, *, ablation: str, setting: float | str, method: str, smoke: bool
) -> list[dict[str, Any]]:
    """Train ``method`` under one ablation setting on the digits split of ``seed``.

    ``fold`` is always 0 (no folds).  Records are per round, client, model and test set.
    """
    setup = ablation_setup(smoke)
    p_major = float(setting) if ablation == "p_major" else 0.8
    split = make_federated(setup.dataset, p_major=p_major, seed=seed, **setup.split_kw)  # type: ignore[arg-type]
    run: MethodRun
    if ablation == "p_major":
        run = run_method(method, split, rounds=setup.rounds, config=setup.config, seed=seed)
    elif ablation == "dp":
        no_dp = dataclasses.replace(setup.config, dp=False)
        run = run_method(method, split, rounds=setup.rounds, config=no_dp, seed=seed)
    elif ablation == "architectures":
        mixed = mixed_architectures(len(split.clients))
        kw: dict[str, Any] = {"rounds": setup.rounds, "config": setup.config, "seed": seed}
        if method == "Regular":
            run = run_regular_models(split, mixed, **kw)
        else:
            run = run_method(method, split, private=mixed, **kw)
    else:
        raise ValueError(f"unknown ablation {ablation!r}")
    return [{k: v for k, v in row.items() if k != "method"} for row in run.rows]


@dataclasses.dataclass(frozen=True)
class AblationTables:
    """Final global-test accuracy of the three ablations.

    Attributes
    ----------
    skew, skew_spread : DataFrame
        (a): model label × ``p_major`` (as text), mean and spread.
    architectures : DataFrame
        (b): columns ``arch, label, mean, spread``.
    dp : DataFrame
        (c): model label × ``DP`` (the largest ``p_major`` of (a)), ``non-DP``; means.
    """

    skew: pd.DataFrame
    skew_spread: pd.DataFrame
    architectures: pd.DataFrame
    dp: pd.DataFrame


def ablation_tables(rows: pd.DataFrame, seeds: int) -> AblationTables:
    """Reduce the records to the tables of (a), (b) and (c), as in Fig. 5."""
    last = final_rounds(rows, ["ablation", "setting", "method"])
    last = add_model_labels(last[last["test"] == "global"])
    last = last.assign(setting=last["setting"].astype(str))
    stats = client_spread(last, ["ablation", "setting", "label"], "accuracy", seeds)
    skew_stats = stats[stats["ablation"] == "p_major"]
    skew = skew_stats.pivot(index="label", columns="setting", values="mean")
    skew_spread = skew_stats.pivot(index="label", columns="setting", values="spread")
    no_dp = stats[stats["ablation"] == "dp"].set_index("label")["mean"]
    dp = pd.DataFrame({"DP": skew[skew.columns.max()], "non-DP": no_dp})
    arch_rows = last[last["ablation"] == "architectures"]
    architectures = client_spread(arch_rows, ["arch", "label"], "accuracy", seeds)
    return AblationTables(skew, skew_spread, architectures, dp)


def _markdown(tables: AblationTables, header: str) -> str:
    skew, spread = tables.skew, tables.skew_spread
    table_a = pd.DataFrame({"model": skew.index})
    for c in skew.columns:
        cells = [mean_se_label(m, s) for m, s in zip(skew[c], spread[c], strict=True)]
        table_a[f"p_major = {c}"] = cells
    arch = tables.architectures
    table_b = pd.DataFrame(
        {
            "private architecture": arch["arch"],
            "model": arch["label"],
            "accuracy": [
                mean_se_label(m, s) for m, s in zip(arch["mean"], arch["spread"], strict=True)
            ],
        }
    )
    table_c = tables.dp.rename_axis("model").reset_index()
    return "\n\n".join(
        [
            header,
            "## (a) non-IID skew p_major (DP)",
            markdown_table(table_a),
            "## (b) heterogeneous private architectures (DP proxies)",
            markdown_table(table_b),
            f"## (c) with and without DP-SGD (p_major = {skew.columns.max()})",
            markdown_table(table_c),
        ]
    )


def ablation_figure(tables: AblationTables) -> Figure:
    """Fig. 5 (a)–(c): accuracy against p_major, per architecture, with and without DP."""
    skew, spread = tables.skew, tables.skew_spread
    fig = Figure(figsize=(16, 4.5), layout="tight")
    axes = fig.subplots(1, 3)
    x = np.array([float(c) for c in skew.columns])
    for label in skew.index:
        axes[0].errorbar(x, skew.loc[label], spread.loc[label], marker="o", capsize=2, label=label)
    axes[0].set(xlabel="p_major", ylabel="accuracy", title="(a) non-IID skew (DP)")
    axes[0].legend(fontsize=7)
    arch = tables.architectures.set_index(["arch", "label"])
    arch["mean"].unstack(1).plot.bar(ax=axes[1], yerr=arch["spread"].unstack(1), rot=0, capsize=2)
    axes[1].set(
        title="(b) heterogeneous private models", xlabel="private architecture", ylabel="accuracy"
    )
    axes[1].legend(fontsize=7)
    tables.dp.plot.barh(ax=axes[2])
    axes[2].set(title="(c) with and without DP-SGD", xlabel="accuracy")
    return fig


def ablation_report(table: pd.DataFrame, out_dir: Path, options: RunOptions) -> list[Path]:
    """Write ``proxyfl-ablations.{csv,md,png}``."""
    rows = table[COLUMNS].reset_index(drop=True)
    tables = ablation_tables(rows, options.seeds)
    setup = ablation_setup(options.smoke)
    mixed = mixed_architectures(int(rows["client"].max()) + 1)
    header = (
        f"Command: `{command_line('proxyfl-ablations', options)}`; {setup.dataset}, "
        f"{describe(setup)}.  Private architectures by client: {', '.join(mixed)}; Regular "
        "trains each with DP-SGD on the engine's generic path."
    )
    return write_results(
        "proxyfl-ablations",
        out_dir,
        table=rows,
        figure=ablation_figure(tables),
        notes=_markdown(tables, header),
        title="ProxyFL ablations (global IID test accuracy at the last round, "
        f"{spread_description(options.seeds)})",
    )


ABLATIONS = Experiment(
    "proxyfl-ablations",
    "ProxyFL ablations on digits: non-IID skew, heterogeneous private models, DP vs non-DP "
    "(proxyfl.txt Fig. 5).",
    grid=ablation_grid,
    run_fold=run_ablation_fold,
    report=ablation_report,
    folds=1,
    min_folds=1,
    max_folds=1,
    folds_help="No folds: each seed trains every method once per ablation setting.",
)
