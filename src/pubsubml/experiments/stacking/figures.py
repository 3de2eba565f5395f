"""Tables and figures of the stacking experiments (pfl-stacking.txt §4).

:func:`summary_table` reduces per-client records to mean ± SE per setting; the plotting helpers draw
the panels of the paper's Figures 2–6; :func:`write_graph` writes one federation's contribution
graph with the centrality ranking of its clients.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import pandas as pd

from pubsubml.experiments.runner import mean_se_label, summarize, write_results
from pubsubml.experiments.stacking.protocol import normalized_graph
from pubsubml.methods.pubsub.contributions import rank_publishers

__all__ = [
    "METRICS",
    "binned_plot",
    "dp_bars",
    "param_lines",
    "per_seed",
    "summary_table",
    "write_graph",
]


METRICS = ("gain", "gain_auc", "bacc", "private_bacc", "auc", "self_importance")


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


def binned_plot(
    ax: Any, frame: pd.DataFrame, x: str, y: str, label: str, bins: int = 5, **kw: Any
) -> None:
    if frame.empty or frame[x].nunique() < 2:
        return
    cut = pd.qcut(frame[x], q=min(bins, frame[x].nunique()), duplicates="drop")
    g = frame.groupby(cut, observed=True)
    xm, ym = g[x].mean(), g[y].mean()
    se: pd.Series = g[y].std(ddof=1).fillna(0.0) / np.sqrt(g[y].count())
    ax.errorbar(xm, ym, yerr=se, marker="o", capsize=3, label=label, **kw)


def dp_bars(ax: Any, clients: pd.DataFrame, title: str, by: str = "variant") -> None:
    """Mean gain (± SE over seeds) per public model kind, one bar per value of ``by``."""
    dp = clients[clients.models == "dp"]
    if dp.empty:
        ax.set_visible(False)
        return
    seeds = per_seed(dp, ["public", by], ["gain"])
    s = seeds.groupby(["public", by])["gain"].agg(["mean", "sem"]).reset_index()
    kinds = list(dict.fromkeys(dp.public))
    levels = list(dict.fromkeys(dp[by]))
    width = 0.8 / len(levels)
    for j, level in enumerate(levels):
        v = s[s[by] == level].set_index("public").reindex(kinds)
        ax.bar(
            np.arange(len(kinds)) + (j - (len(levels) - 1) / 2) * width,
            v["mean"],
            width,
            yerr=v["sem"].fillna(0),
            label=f"{by}={level}",
            capsize=2,
        )
    ax.set_xticks(np.arange(len(kinds)), kinds, rotation=45, ha="right")
    ax.axhline(0, color="k", lw=0.5)
    ax.set_ylabel("balanced accuracy gain")
    ax.set_title(title)
    ax.legend(fontsize=7)


def param_lines(ax: Any, clients: pd.DataFrame, param: str, xlabel: str) -> None:
    rf = clients[(clients.public == "rf") & (clients.models == "rf")]
    seeds = per_seed(rf, [param, "variant"], ["gain"])
    for variant in ("held_out", "pooled"):
        s = seeds[seeds.variant == variant].groupby(param)["gain"].agg(["mean", "sem"])
        ax.errorbar(
            s.index, s["mean"], yerr=s["sem"].fillna(0), marker="o", capsize=3, label=variant
        )
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("balanced accuracy gain")
    ax.legend(fontsize=7)


def write_graph(
    name: str,
    clients: pd.DataFrame,
    edges: pd.DataFrame,
    where: dict[str, Any],
    attr: str,
    out_dir: Path,
    notes: str,
) -> None:
    """The contribution graph of seed 0 at ``where`` (rf, held-out), averaged over repeats."""
    sel_c = clients[
        (clients.seed == 0) & (clients.public == "rf") & (clients.variant == "held_out")
    ]
    sel_e = edges[(edges.seed == 0) & (edges.public == "rf") & (edges.variant == "held_out")]
    for key, value in where.items():
        sel_c, sel_e = sel_c[sel_c[key] == value], sel_e[sel_e[key] == value]
    mean_w = sel_e.groupby(["client", "publisher"], sort=False)["weight"].mean()
    reports: dict[str, dict[str, float]] = {}
    for (sub, pub), w in zip(mean_w.index.tolist(), mean_w.to_numpy(), strict=True):
        reports.setdefault(str(sub), {})[str(pub)] = float(w)
    graph = normalized_graph(reports)
    strength = dict(rank_publishers(graph, centrality="in_strength"))
    pagerank = dict(rank_publishers(graph, centrality="pagerank"))
    info = sel_c.groupby("client", sort=False)[[attr, "self_importance", "gain"]].mean()
    ranking = pd.DataFrame(
        [
            {
                "rank": i + 1,
                "client": c,
                attr: info.loc[c, attr],
                "in_strength": s,
                "pagerank": pagerank.get(c, 0.0),
                "self_importance": info.loc[c, "self_importance"],
                "gain": info.loc[c, "gain"],
            }
            for i, (c, s) in enumerate(sorted(strength.items(), key=lambda t: (-t[1], t[0])))
        ]
    )
    table = pd.DataFrame(
        [{"subscriber": a, "publisher": b, "weight": w} for a, b, w in graph.edges(data="weight")]
    )
    fig, ax = plt.subplots(figsize=(7, 5.5))
    pos = nx.circular_layout(graph)
    top = max(strength.values(), default=0.0) or 1.0
    sizes = [200 + 1800 * strength.get(n, 0.0) / top for n in graph.nodes]
    weights = np.array([w for _, _, w in graph.edges(data="weight")], dtype=float)
    heavy = float(weights.max()) if weights.size and weights.max() > 0 else 1.0
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_size=sizes, node_color="#9ecae1")
    nx.draw_networkx_labels(graph, pos, ax=ax, font_size=7)
    nx.draw_networkx_edges(
        graph,
        pos,
        ax=ax,
        node_size=sizes,
        width=list(0.3 + 3.5 * weights / heavy),
        edge_color=list(weights),
        edge_cmap=plt.get_cmap("viridis"),
        arrows=True,
        connectionstyle="arc3,rad=0.1",
    )
    if weights.size:
        mappable = plt.cm.ScalarMappable(cmap="viridis")
        mappable.set_array(weights)
        fig.colorbar(mappable, ax=ax, label="edge weight (subscriber's normalized score)")
    ax.set_title(f"{name}: contribution graph (node size: in-strength)")
    ax.axis("off")
    where_txt = ", ".join(f"{k}={v}" for k, v in where.items())
    write_results(
        f"{name}-graph",
        out_dir,
        table=table,
        summary=ranking,
        figure=fig,
        notes=(
            f"Seed 0, {where_txt}, public `rf`, held-out stacking; edge subscriber → publisher "
            "weighted by the subscriber's MDI scores of the other clients' models (mean over "
            "repeats, renormalized without its private model so each subscriber's out-weights sum "
            "to 1, or to 0 when its meta-models gave no weight to any other model, e.g. a "
            "one-class Meta Train).  Ranking by normalized in-strength of this graph, PageRank "
            "alongside; the `importance` column of the main table is the paper's (scores "
            "normalized with the private model, summed per publisher, normalized), so the two "
            "differ slightly.  " + notes
        ),
    )
