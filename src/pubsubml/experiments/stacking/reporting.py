"""Grids, summaries, figures and contribution graphs of the stacking experiments (pfl-stacking.txt §4).

Each ``run_*`` function runs one experiment's grid with :func:`~pubsubml.experiments.runner.run_grid` and
writes ``stacking-<name>.{csv,md,png}`` (per-client records, mean ± SE table, figure) and
``stacking-<name>-graph.{csv,md,png}`` (the contribution graph of one federation and the centrality
ranking of its clients) with :func:`~pubsubml.experiments.runner.write_results`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pubsubml.experiments.runner import mean_se_label, run_grid, write_results
from pubsubml.experiments.stacking.experiments import (
    STAND_INS,
    StackingConfig,
    label_task,
    natural_task,
    quantity_task,
    vertical_task,
)
from pubsubml.experiments.stacking.figures import (
    binned_plot,
    dp_bars,
    param_lines,
    summary_table,
    write_graph,
)

__all__ = [
    "EXPERIMENTS",
    "result_name",
    "run_label",
    "run_natural",
    "run_quantity",
    "run_vertical",
]


def _run(
    cfg: StackingConfig, task: Callable[..., list[dict[str, Any]]], grid: list[dict[str, Any]]
) -> pd.DataFrame:
    common = cfg.common()
    full = [{**g, **common} for g in grid]
    return run_grid(
        task,
        seeds=cfg.seeds,
        folds=cfg.repeats,
        grid=full,
        jobs=cfg.jobs,
        description=task.__name__,
        progress=not cfg.smoke,
    )


def result_name(cfg: StackingConfig, experiment: str) -> str:
    """``stacking-<experiment>``, with ``-<dataset>`` unless the data set is ``hi`` (Census).

    Examples
    --------
    >>> result_name(StackingConfig(dataset="flchain"), "natural")
    'stacking-natural-flchain'
    """
    suffix = "" if cfg.dataset == "hi" else f"-{cfg.dataset}"
    return f"stacking-{experiment}{suffix}"


def _split(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    clients = table[table.record == "client"].dropna(axis=1, how="all").reset_index(drop=True)
    edges = table[table.record == "edge"].dropna(axis=1, how="all").reset_index(drop=True)
    return clients, edges


def _auc_note(clients: pd.DataFrame) -> str:
    """How many client rows have no ROC AUC (a Test split with one class), left out of its means."""
    missing = int(clients["auc"].isna().sum())
    if missing == 0:
        return ""
    return (
        f"ROC AUC is undefined for {missing} of {len(clients)} client rows (their Test split holds "
        "one class); the AUC means leave them out.  "
    )


def _notes(cfg: StackingConfig, extra: str, clients: pd.DataFrame | None = None) -> str:
    return (
        (_auc_note(clients) if clients is not None else "")
        + f"Data set: `{cfg.dataset}` (offline stand-in for {STAND_INS.get(cfg.dataset, '?')}), "
        f"{cfg.max_rows} rows sampled per seed, {cfg.n_clients} clients unless the partition "
        f"decides; {cfg.seeds} seed(s) × {cfg.repeats} repeat(s) of the 0.6/0.2/0.2 stratified "
        f"split; private and meta-models are random forests with {cfg.trees} trees.  Public models: "
        "`rf` = non-private random forest (the paper's setting, a reference), `dp_rf_e*` / "
        "`dp_lr_e*` / `dp_mlp_e*` = DP random forest / logistic regression / MLP with the ε their "
        "accountant reports (column `epsilon`).  `gain` = personalized − private-only balanced "
        "accuracy, the private-only model being trained on Train ∪ Meta Train (as the paper's "
        "source); `gain_auc` the same for ROC AUC from probabilities.  Mean ± SE over seeds (`n`): "
        "each federation (seed × repeat) is averaged over its clients, then each seed over its "
        "repeats, which share its partition and public models.  The public `rf` is scikit-learn's "
        "100-tree forest whatever `--trees` says, as in the paper; the private and meta-forests "
        f"have {cfg.trees} (the paper: 100), so with fewer than 100 the public forests have more "
        "trees than the private baseline, which can only favour the gain.  " + extra
    )


def run_quantity(cfg: StackingConfig, out_dir: Path) -> pd.DataFrame:
    """§4.1: gain vs ``a``; gain, importance and self-importance vs a client's data share."""
    values = (0.5, 1.0) if cfg.smoke else (0.25, 0.5, 0.75, 1.0)
    grid = [{"a": a, "models": "rf", "n_clients": cfg.n_clients} for a in values]
    if cfg.dp:
        grid.append({"a": values[0], "n_clients": cfg.n_clients, **cfg.dp_grid()})
    grid = [{**g, "min_size": 20 if cfg.smoke else 50} for g in grid]
    clients, edges = _split(_run(cfg, quantity_task, grid))
    rf = clients[clients.models == "rf"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 8), layout="constrained")
    param_lines(axes[0, 0], clients, "a", "power-law a (1 = equal shares)")
    ho = rf[(rf.public == "rf") & (rf.variant == "held_out")]
    binned_plot(axes[0, 1], ho, "share", "gain", "held_out")
    axes[0, 1].set(xlabel="client data share", ylabel="balanced accuracy gain")
    binned_plot(axes[0, 2], ho, "share", "importance", "held_out")
    axes[0, 2].set(xlabel="client data share", ylabel="importance")
    for variant in ("held_out", "pooled"):
        binned_plot(
            axes[1, 0],
            rf[(rf.public == "rf") & (rf.variant == variant)],
            "share",
            "self_importance",
            variant,
        )
    axes[1, 0].set(xlabel="client data share", ylabel="self-importance")
    axes[1, 0].legend(fontsize=7)
    dp_bars(axes[1, 1], clients, f"a = {values[0]}: public model kinds")
    axes[1, 2].set_visible(False)
    fig.suptitle(f"Quantity skew ({cfg.dataset})")
    notes = _notes(
        cfg,
        "Power-law shares (k/K)^a − ((k−1)/K)^a of pubsubml.data.partition, "
        f"at least {grid[0]['min_size']} rows per client; " + _realized_shares(rf, values) + ".",
        clients,
    )
    write_results(
        result_name(cfg, "quantity"),
        out_dir,
        table=clients,
        summary=summary_table(clients, ["models", "a", "public", "variant"]),
        figure=fig,
        notes=notes,
    )
    write_graph(
        result_name(cfg, "quantity"),
        clients,
        edges,
        {"a": values[0], "models": "rf"},
        "share",
        out_dir,
        notes,
    )
    return clients


def _realized_shares(rf: pd.DataFrame, values: tuple[float, ...]) -> str:
    """The largest client's mean realized data share per ``a`` beside the pure power law's."""
    parts = []
    for a in values:
        fed = rf[(rf.a == a) & (rf.variant == "held_out")]
        if fed.empty:
            continue
        n = int(fed.groupby(["seed", "fold"])["client"].nunique().max())
        largest = fed.groupby(["seed", "fold"])["share"].max().mean()
        parts.append(f"a = {a:g}: {largest:.3f} (pure power law {(1 / n) ** a:.3f})")
    return (
        "largest client's realized share (the row floor shifts shares towards equal) "
        + ", ".join(parts)
    )


def realized_balance(clients: pd.DataFrame, values: Sequence[float]) -> str:
    """The label mixes a run got: clients' positive-label share (10th–90th percentile) per α.

    The partition rescales the Dirichlet draws so that every row is used once, so the realized
    mixes are reported rather than assumed.
    """
    one = clients.drop_duplicates(["alpha", "seed", "client"])
    parts = []
    for a in values:
        share = one.loc[one.alpha == a, "balance"]
        if len(share):
            lo, hi = np.percentile(share, [10, 90])
            parts.append(f"α = {a:g}: {lo:.2f}–{hi:.2f}")
    return (
        "Realized positive-label share of the clients (10th–90th percentile over clients and "
        "seeds): " + "; ".join(parts) + "."
    )


def run_label(cfg: StackingConfig, out_dir: Path) -> pd.DataFrame:
    """§4.2: gain vs α; gain and importance vs label balance; the importance matrix (Fig. 3f)."""
    values = (0.5, 10.0) if cfg.smoke else (0.5, 1.0, 10.0, 100.0)
    grid = [{"alpha": a, "models": "rf", "n_clients": cfg.n_clients} for a in values]
    if cfg.dp:
        grid.append({"alpha": values[1], "n_clients": cfg.n_clients, **cfg.dp_grid()})
    clients, edges = _split(_run(cfg, label_task, grid))
    rf = clients[(clients.models == "rf") & (clients.public == "rf")]
    fig, axes = plt.subplots(2, 3, figsize=(14, 8), layout="constrained")
    param_lines(axes[0, 0], clients, "alpha", "Dirichlet α")
    axes[0, 0].set_xscale("log")
    ho = rf[rf.variant == "held_out"]
    binned_plot(axes[0, 1], ho, "balance", "gain", "held_out")
    axes[0, 1].set(xlabel="client positive-label share", ylabel="balanced accuracy gain")
    binned_plot(axes[0, 2], ho, "balance", "importance", "held_out")
    axes[0, 2].set(xlabel="client positive-label share", ylabel="importance")
    e = edges[(edges.models == "rf") & (edges.public == "rf") & (edges.variant == "held_out")]
    bins = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    rows = pd.cut(e.client_balance, bins, include_lowest=True)
    cols = pd.cut(e.publisher_balance, bins, include_lowest=True)
    matrix = e.groupby([rows, cols], observed=False)["weight"].mean().unstack()
    im = axes[1, 0].imshow(matrix.to_numpy(dtype=float), origin="lower", cmap="viridis")
    ticks = [f"{b:.1f}" for b in bins[1:]]
    axes[1, 0].set_xticks(range(len(ticks)), ticks)
    axes[1, 0].set_yticks(range(len(ticks)), ticks)
    axes[1, 0].set(
        xlabel="publisher label balance (bin upper edge)",
        ylabel="subscriber label balance",
        title="mean assigned importance",
    )
    fig.colorbar(im, ax=axes[1, 0])
    dp_bars(axes[1, 1], clients, f"α = {values[1]}: public model kinds")
    for variant in ("held_out", "pooled"):
        binned_plot(axes[1, 2], rf[rf.variant == variant], "balance", "self_importance", variant)
    axes[1, 2].set(xlabel="client positive-label share", ylabel="self-importance")
    axes[1, 2].legend(fontsize=7)
    fig.suptitle(f"Label skew ({cfg.dataset})")
    notes = _notes(
        cfg,
        "Labels q ~ Dirichlet(α·p) with p the global class frequencies "
        "(pubsubml.data.partition.dirichlet_label_skew, equal client sizes).  "
        + realized_balance(rf, values),
        clients,
    )
    matrix.index = [str(i) for i in matrix.index]
    matrix.columns = [str(c) for c in matrix.columns]
    write_results(
        result_name(cfg, "label-matrix"),
        out_dir,
        table=matrix.reset_index(names="subscriber"),
        summary=matrix.reset_index(names="subscriber \\ publisher"),
        notes="Mean importance a held-out stacked model (public `rf`) gives another "
        "client's model, by subscriber (rows) and publisher (columns) label balance.",
    )
    write_results(
        result_name(cfg, "label"),
        out_dir,
        table=clients,
        summary=summary_table(clients, ["models", "alpha", "public", "variant"]),
        figure=fig,
        notes=notes,
    )
    write_graph(
        result_name(cfg, "label"),
        clients,
        edges,
        {"alpha": values[1], "models": "rf"},
        "balance",
        out_dir,
        notes,
    )
    return clients


def run_vertical(cfg: StackingConfig, out_dir: Path) -> pd.DataFrame:
    """§4.3 / App. A: gain over (p, ε_noise), importance vs Jaccard, DP defaults, held-out vs pooled."""
    ps = (0.5,) if cfg.smoke else (0.25, 0.5, 0.75)
    noises = (0.0, 4.0) if cfg.smoke else (0.0, 2.0, 4.0, 8.0, 16.0)
    base = {"models": "rf", "n_clients": cfg.n_clients, "rows": "all"}
    grid = [{"p": p, "noise": e, "defaults": "noisy", **base} for p in ps for e in noises]
    grid += [{"p": p, "noise": 0.0, "defaults": "dp", **base} for p in ps]
    grid += [
        {**g, "rows": "disjoint"} for g in grid if g["noise"] == 0 and g["defaults"] == "noisy"
    ]
    if cfg.dp:
        mid = {"p": ps[len(ps) // 2], "noise": 0.0, "n_clients": cfg.n_clients, **cfg.dp_grid()}
        grid += [{**mid, "defaults": "noisy", "rows": rows} for rows in ("all", "disjoint")]
        grid.append({**mid, "defaults": "dp", "rows": "all"})
    clients, edges = _split(_run(cfg, vertical_task, grid))
    rf = clients[(clients.models == "rf") & (clients.public == "rf")]
    noisy = rf[(rf.defaults == "noisy") & (rf.rows == "all")]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8), layout="constrained")
    scale = max(0.02, float(noisy.groupby(["variant", "p", "noise"])["gain"].mean().abs().max()))
    for ax, variant in zip(axes[0, :2], ("held_out", "pooled"), strict=True):
        per_fed = noisy[noisy.variant == variant].groupby(["p", "noise", "seed", "fold"])["gain"]
        heat = per_fed.mean().groupby(["p", "noise"]).mean().unstack()
        im = ax.imshow(
            heat.to_numpy(dtype=float),
            origin="lower",
            cmap="RdBu",
            vmin=-scale,
            vmax=scale,
            aspect="auto",
        )
        ax.set_xticks(range(heat.shape[1]), [f"{c:g}" for c in heat.columns])
        ax.set_yticks(range(heat.shape[0]), [f"{r:g}" for r in heat.index])
        for (i, j), v in np.ndenumerate(heat.to_numpy(dtype=float)):
            ax.text(j, i, f"{v:+.3f}", ha="center", va="center", fontsize=7)
        ax.set(
            xlabel="ε_noise of the defaults",
            ylabel="proportion p of predictors",
            title=f"gain, {variant}" + (" (Fig. 6)" if variant == "pooled" else ""),
        )
        fig.colorbar(im, ax=ax)
    e = edges[
        (edges.models == "rf")
        & (edges.public == "rf")
        & (edges.variant == "held_out")
        & (edges.defaults == "noisy")
        & (edges.rows == "all")
    ]
    binned_plot(axes[0, 2], e, "jaccard", "weight", "held_out", bins=6)
    jaccard = jaccard_table(edges)
    axes[0, 2].set(xlabel="Jaccard similarity of feature sets", ylabel="assigned importance")
    for variant in ("held_out", "pooled"):
        v = noisy[noisy.variant == variant]
        s = v.groupby("p")["self_importance"].agg(["mean", "sem"])
        axes[1, 0].errorbar(s.index, s["mean"], yerr=s["sem"].fillna(0), marker="o", label=variant)
        s = v.groupby("noise")["self_importance"].agg(["mean", "sem"])
        axes[1, 1].errorbar(s.index, s["mean"], yerr=s["sem"].fillna(0), marker="o", label=variant)
    axes[1, 0].set(xlabel="proportion p", ylabel="self-importance")
    axes[1, 1].set(xlabel="ε_noise", ylabel="self-importance")
    axes[1, 0].legend(fontsize=7)
    axes[1, 1].legend(fontsize=7)
    held_out = clients[clients.variant == "held_out"].copy()
    held_out["setting"] = np.where(
        held_out.defaults == "dp", held_out.rows + ", DP defaults", held_out.rows
    )
    dp_bars(axes[1, 2], held_out, f"p = {ps[len(ps) // 2]}, held-out: public kinds", by="setting")
    fig.suptitle(f"Vertical partitioning ({cfg.dataset})")
    notes = _notes(
        cfg,
        "`rows=all` (the paper): every client holds the same rows and round(p·d) of the d "
        "original columns (drawn without replacement, as the paper's source), so the other "
        "clients' public models were trained on a client's Test rows too (other columns); "
        "`rows=disjoint` (a hybrid partition): each client holds its own as many rows, so "
        "none was.  `defaults=noisy`: the "
        "paper's simulated public defaults computed from each client's data — mode "
        "(categorical), median + N(0, s·ε_noise) (numeric) — not private; "
        "`defaults=dp`: ε-DP medians/modes (exponential mechanism, ε = 1 per client, "
        "charged to its PrivacyLedger; `defaults_epsilon`); with DP public models, "
        "`total_epsilon` is the client's whole publication (DP defaults and DP model) as its "
        "ledger composes it at δ = 1e-5, and `record_epsilon` what one person's record gets: "
        "with `rows=all` every client holds every record, so it composes all the clients' "
        "publications.  Numeric defaults are clipped to the public bounds "
        "(a published default must lie within them).",
        clients,
    )
    write_results(
        result_name(cfg, "vertical"),
        out_dir,
        table=clients,
        summary=summary_table(
            clients, ["models", "rows", "defaults", "p", "noise", "public", "variant"]
        ),
        figure=fig,
        notes=notes,
    )
    write_results(
        result_name(cfg, "vertical-jaccard"),
        out_dir,
        table=jaccard,
        summary=jaccard,
        notes="Mean importance a held-out stacked model (public `rf`, noisy defaults at ε_noise = "
        "0) gives another client's model, by the Jaccard similarity of the two clients' feature "
        "sets (pfl-stacking.txt Fig. 4d); mean over the pairs of each seed, then mean ± SE over "
        "seeds; `pairs` counts (subscriber, publisher, repeat) pairs.  " + notes,
    )
    write_graph(
        result_name(cfg, "vertical"),
        clients,
        edges,
        {"p": ps[len(ps) // 2], "noise": 0.0, "defaults": "noisy", "rows": "all", "models": "rf"},
        "n_features",
        out_dir,
        notes,
    )
    return clients


def jaccard_table(edges: pd.DataFrame) -> pd.DataFrame:
    """Assigned importance by Jaccard similarity of feature sets (held-out, ``rf``, ε_noise = 0).

    One row per (rows, p, Jaccard value): mean ± SE over seeds of the mean weight of each seed's
    pairs, and the number of pairs.
    """
    e = edges[
        (edges.models == "rf")
        & (edges.public == "rf")
        & (edges.variant == "held_out")
        & (edges.defaults == "noisy")
        & (edges.noise == 0)
    ].assign(jaccard=lambda f: f.jaccard.round(3))
    by = ["rows", "p", "jaccard"]
    seeds = e.groupby([*by, "seed"])["weight"].agg(["mean", "size"]).reset_index()
    g = seeds.groupby(by)
    out = g["mean"].agg(["mean", "sem"]).reset_index()
    out["importance"] = [mean_se_label(m, s) for m, s in zip(out["mean"], out["sem"], strict=True)]
    out["pairs"] = g["size"].sum().to_numpy()
    out["seeds"] = g["mean"].count().to_numpy()
    return out[[*by, "importance", "pairs", "seeds"]]


NATURAL_NOTES = {
    "hi": "HI is partitioned on `region` (4 census regions), a geographic grouping; the column "
    "the paper used for Census is in its Fig. 5a, lost from our copy of the text.",
    "flchain": "flchain has no categorical column with more than two values, so it is "
    "partitioned on `flc.grp`, the decile group of the serum free light chain (kappa + "
    "lambda, which stay features): a covariate-defined grouping, not a natural one like the "
    "paper's loan branches, and its groups differ in death rate by construction.",
}
"""What the natural partition of each data set is, and how it departs from the paper's."""


def run_natural(cfg: StackingConfig, out_dir: Path) -> pd.DataFrame:
    """§4.4: gain and self-importance per client of a natural partition."""
    grid: list[dict[str, Any]] = [{"models": "rf", "min_size": 20 if cfg.smoke else 50}]
    if cfg.dp:
        grid.append({"min_size": grid[0]["min_size"], **cfg.dp_grid()})
    clients, edges = _split(_run(cfg, natural_task, grid))
    rf = clients[(clients.models == "rf") & (clients.public == "rf")]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4), layout="constrained")
    names = list(dict.fromkeys(rf.client))
    share = rf.groupby("client")["share"].mean().reindex(names)
    axes[0].bar(range(len(names)), share)
    axes[0].set(title="data share", ylabel="share of rows")
    for ax, metric in ((axes[1], "gain"), (axes[2], "self_importance")):
        for j, variant in enumerate(("held_out", "pooled")):
            s = rf[rf.variant == variant].groupby("client")[metric].agg(["mean", "sem"])
            s = s.reindex(names)
            ax.bar(
                np.arange(len(names)) + (j - 0.5) * 0.4,
                s["mean"],
                0.4,
                yerr=s["sem"].fillna(0),
                label=variant,
                capsize=2,
            )
        ax.set(title=metric)
        ax.axhline(0, color="k", lw=0.5)
        ax.legend(fontsize=7)
    for ax in axes[:3]:
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=7)
    dp_bars(axes[3], clients, "public model kinds")
    fig.suptitle(f"Natural partitioning ({cfg.dataset})")
    notes = _notes(
        cfg,
        "One client per value of the partition column (not a feature), groups "
        f"under {grid[0]['min_size']} rows left out.  " + NATURAL_NOTES.get(cfg.dataset, ""),
        clients,
    )
    write_results(
        result_name(cfg, "natural"),
        out_dir,
        table=clients,
        summary=summary_table(clients, ["models", "client", "public", "variant"]),
        figure=fig,
        notes=notes,
    )
    write_graph(
        result_name(cfg, "natural"), clients, edges, {"models": "rf"}, "share", out_dir, notes
    )
    return clients


EXPERIMENTS: dict[str, Callable[[StackingConfig, Path], pd.DataFrame]] = {
    "stacking-label": run_label,
    "stacking-natural": run_natural,
    "stacking-quantity": run_quantity,
    "stacking-vertical": run_vertical,
}
