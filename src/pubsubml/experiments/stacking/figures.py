"""Tables and figures of the stacking experiments (pfl-stacking.txt §4).

:func:`summary_table` reduces per-client records to mean ± SE over seeds per setting; the plotting
helpers draw the panels of the paper's Figures 2–6 and ``*_figure`` puts them together for one
experiment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from pubsubml.experiments.reports import mean_se_label, summarize

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "BALANCE_BINS",
    "METRICS",
    "binned_plot",
    "dp_bars",
    "importance_matrix",
    "label_figure",
    "mean_se_by",
    "natural_figure",
    "param_lines",
    "per_seed",
    "quantity_figure",
    "summary_table",
    "vertical_figure",
]


METRICS = ("gain", "gain_auc", "bacc", "private_bacc", "auc", "self_importance")
"""The per-client metrics of the summary tables."""
BALANCE_BINS = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
"""Bins of a client's positive-label share in the importance matrix (Fig. 3f)."""


def per_seed(frame: pd.DataFrame, by: Sequence[str], values: Sequence[str]) -> pd.DataFrame:
    """``values`` averaged over the clients of each federation, then over the repeats of a seed.

    The repeats of one seed share its partition and public models, so they are not independent:
    the seed is the unit of the standard errors.
    """
    per_fed = frame.groupby([*by, "seed", "fold"], sort=False, dropna=False)[list(values)].mean()
    return per_fed.groupby([*by, "seed"], sort=False, dropna=False).mean().reset_index()


def summary_table(clients: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean ± SE of :data:`METRICS` per group of ``by``.

    Each (seed, repeat) federation is first averaged over its clients and each seed over its
    repeats (:func:`per_seed`), so ``n`` counts seeds and the SE is over them.
    """
    seeds = per_seed(clients, by, METRICS)
    out: pd.DataFrame | None = None
    for metric in METRICS:
        s = summarize(seeds, by, value=metric)
        s[metric] = [mean_se_label(m, e) for m, e in zip(s["mean"], s["se"], strict=True)]
        part = s[[*by, metric, "n"]] if out is None else s[[*by, metric]]
        out = part if out is None else out.merge(part, on=list(by), sort=False)
    assert out is not None
    budgets = [c for c in ("epsilon", "total_epsilon", "record_epsilon") if c in clients]
    eps = clients.groupby(list(by), sort=False, dropna=False)[budgets].max().reset_index()
    out = out.merge(eps, on=list(by), sort=False)
    return out[[*by, *budgets, *METRICS, "n"]]


def mean_se_by(frame: pd.DataFrame, by: str | Sequence[str], value: str) -> pd.DataFrame:
    """Mean ± SE of ``value`` per group of ``by`` (:func:`~pubsubml.experiments.reports.summarize`),
    indexed and sorted by the groups; rows with a missing group are left out.

    Examples
    --------
    >>> frame = pd.DataFrame({"p": [0.5, 0.1, 0.5], "gain": [1.0, 2.0, 3.0]})
    >>> mean_se_by(frame, "p", "gain").to_dict("index")
    {0.1: {'mean': 2.0, 'se': 0.0, 'n': 1}, 0.5: {'mean': 2.0, 'se': 1.0, 'n': 2}}
    """
    keys = [by] if isinstance(by, str) else list(by)
    out = summarize(frame.dropna(subset=keys), keys, value).sort_values(keys)
    return out.set_index(keys[0] if len(keys) == 1 else keys)


def binned_plot(
    ax: Any, frame: pd.DataFrame, x: str, y: str, label: str, bins: int = 5, **kw: Any
) -> None:
    """Mean ± SE of ``y`` in (at most ``bins``) quantile bins of ``x``; nothing if ``x`` is fixed."""
    if frame.empty or frame[x].nunique() < 2:
        return
    cut = pd.qcut(frame[x], q=min(bins, frame[x].nunique()), duplicates="drop")
    binned = frame.assign(bin=cut.cat.codes.where(cut.notna()))
    xs, ys = mean_se_by(binned, "bin", x), mean_se_by(binned, "bin", y)
    ax.errorbar(xs["mean"], ys["mean"], yerr=ys["se"], marker="o", capsize=3, label=label, **kw)


def dp_bars(ax: Any, clients: pd.DataFrame, title: str, by: str = "variant") -> None:
    """Mean gain (± SE over seeds) per public model kind, one bar per value of ``by``."""
    dp = clients[clients.models == "dp"]
    if dp.empty:
        ax.set_visible(False)
        return
    seeds = per_seed(dp, ["public", by], ["gain"])
    s = mean_se_by(seeds, ["public", by], "gain").reset_index()
    kinds = list(dict.fromkeys(dp.public))
    levels = list(dict.fromkeys(dp[by]))
    width = 0.8 / len(levels)
    for j, level in enumerate(levels):
        v = s[s[by] == level].set_index("public").reindex(kinds)
        ax.bar(
            np.arange(len(kinds)) + (j - (len(levels) - 1) / 2) * width,
            v["mean"],
            width,
            yerr=v["se"],
            label=f"{by}={level}",
            capsize=2,
        )
    ax.set_xticks(np.arange(len(kinds)), kinds, rotation=45, ha="right")
    ax.axhline(0, color="k", lw=0.5)
    ax.set_ylabel("balanced accuracy gain")
    ax.set_title(title)
    ax.legend(fontsize=7)


def param_lines(ax: Any, clients: pd.DataFrame, param: str, xlabel: str) -> None:
    """Gain vs ``param`` (mean ± SE over seeds), held-out and pooled, public ``rf``."""
    rf = clients[(clients.public == "rf") & (clients.models == "rf")]
    seeds = per_seed(rf, [param, "variant"], ["gain"])
    for variant in ("held_out", "pooled"):
        s = mean_se_by(seeds[seeds.variant == variant], param, "gain")
        ax.errorbar(s.index, s["mean"], yerr=s["se"], marker="o", capsize=3, label=variant)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("balanced accuracy gain")
    ax.legend(fontsize=7)


def quantity_figure(clients: pd.DataFrame, values: Sequence[float], dataset: str) -> Figure:
    """§4.1, Fig. 2: gain vs ``a``; gain, importance and self-importance vs a client's share."""
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
    fig.suptitle(f"Quantity skew ({dataset})")
    return fig


def importance_matrix(edges: pd.DataFrame) -> pd.DataFrame:
    """§4.2, Fig. 3f: mean weight by subscriber (rows) and publisher (columns) label balance.

    Held-out stacking with the public ``rf``; balances binned by 0.2.
    """
    e = edges[(edges.models == "rf") & (edges.public == "rf") & (edges.variant == "held_out")]
    rows = pd.cut(e.client_balance, BALANCE_BINS, include_lowest=True)
    cols = pd.cut(e.publisher_balance, BALANCE_BINS, include_lowest=True)
    return e.groupby([rows, cols], observed=False)["weight"].mean().unstack()


def label_figure(
    clients: pd.DataFrame, matrix: pd.DataFrame, values: Sequence[float], dataset: str
) -> Figure:
    """§4.2, Fig. 3: gain vs α; gain, importance, self-importance vs label balance; ``matrix``."""
    rf = clients[(clients.models == "rf") & (clients.public == "rf")]
    fig, axes = plt.subplots(2, 3, figsize=(14, 8), layout="constrained")
    param_lines(axes[0, 0], clients, "alpha", "Dirichlet α")
    axes[0, 0].set_xscale("log")
    ho = rf[rf.variant == "held_out"]
    binned_plot(axes[0, 1], ho, "balance", "gain", "held_out")
    axes[0, 1].set(xlabel="client positive-label share", ylabel="balanced accuracy gain")
    binned_plot(axes[0, 2], ho, "balance", "importance", "held_out")
    axes[0, 2].set(xlabel="client positive-label share", ylabel="importance")
    im = axes[1, 0].imshow(matrix.to_numpy(dtype=float), origin="lower", cmap="viridis")
    ticks = [f"{b:.1f}" for b in BALANCE_BINS[1:]]
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
    fig.suptitle(f"Label skew ({dataset})")
    return fig


def vertical_figure(
    clients: pd.DataFrame, edges: pd.DataFrame, ps: Sequence[float], dataset: str
) -> Figure:
    """§4.3, Fig. 4, App. A Fig. 6: gain over (p, ε_noise), importance vs Jaccard, self-importance.

    The last panel compares the DP public kinds at the middle ``p`` (held-out), for shared and
    disjoint rows and with DP defaults.
    """
    rf = clients[(clients.models == "rf") & (clients.public == "rf")]
    noisy = rf[(rf.defaults == "noisy") & (rf.rows == "all")]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8), layout="constrained")
    scale = max(0.02, float(noisy.groupby(["variant", "p", "noise"])["gain"].mean().abs().max()))
    for ax, variant in zip(axes[0, :2], ("held_out", "pooled"), strict=True):
        _gain_heatmap(fig, ax, noisy[noisy.variant == variant], variant, scale)
    e = edges[
        (edges.models == "rf")
        & (edges.public == "rf")
        & (edges.variant == "held_out")
        & (edges.defaults == "noisy")
        & (edges.rows == "all")
    ]
    binned_plot(axes[0, 2], e, "jaccard", "weight", "held_out", bins=6)
    axes[0, 2].set(xlabel="Jaccard similarity of feature sets", ylabel="assigned importance")
    for variant in ("held_out", "pooled"):
        v = noisy[noisy.variant == variant]
        s = mean_se_by(v, "p", "self_importance")
        axes[1, 0].errorbar(s.index, s["mean"], yerr=s["se"], marker="o", label=variant)
        s = mean_se_by(v, "noise", "self_importance")
        axes[1, 1].errorbar(s.index, s["mean"], yerr=s["se"], marker="o", label=variant)
    axes[1, 0].set(xlabel="proportion p", ylabel="self-importance")
    axes[1, 1].set(xlabel="ε_noise", ylabel="self-importance")
    axes[1, 0].legend(fontsize=7)
    axes[1, 1].legend(fontsize=7)
    held_out = clients[clients.variant == "held_out"].copy()
    held_out["setting"] = np.where(
        held_out.defaults == "dp", held_out.rows + ", DP defaults", held_out.rows
    )
    dp_bars(axes[1, 2], held_out, f"p = {ps[len(ps) // 2]}, held-out: public kinds", by="setting")
    fig.suptitle(f"Vertical partitioning ({dataset})")
    return fig


def _gain_heatmap(fig: Figure, ax: Any, noisy: pd.DataFrame, variant: str, scale: float) -> None:
    """Mean gain over (p, ε_noise): per federation, then over federations."""
    per_fed = noisy.groupby(["p", "noise", "seed", "fold"])["gain"]
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


def natural_figure(clients: pd.DataFrame, dataset: str) -> Figure:
    """§4.4, Fig. 5: data share, gain and self-importance per client; the DP public kinds."""
    rf = clients[(clients.models == "rf") & (clients.public == "rf")]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4), layout="constrained")
    names = list(dict.fromkeys(rf.client))
    share = rf.groupby("client")["share"].mean().reindex(names)
    axes[0].bar(range(len(names)), share)
    axes[0].set(title="data share", ylabel="share of rows")
    for ax, metric in ((axes[1], "gain"), (axes[2], "self_importance")):
        for j, variant in enumerate(("held_out", "pooled")):
            s = mean_se_by(rf[rf.variant == variant], "client", metric).reindex(names)
            ax.bar(
                np.arange(len(names)) + (j - 0.5) * 0.4,
                s["mean"],
                0.4,
                yerr=s["se"],
                label=variant,
                capsize=2,
            )
        ax.set(title=metric)
        ax.axhline(0, color="k", lw=0.5)
        ax.legend(fontsize=7)
    for ax in axes[:3]:
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=7)
    dp_bars(axes[3], clients, "public model kinds")
    fig.suptitle(f"Natural partitioning ({dataset})")
    return fig
