"""The contribution graph of a stacking federation and its clients' ranking (pfl-stacking.txt §3).

Each client publishes the normalized importance its meta-model gives the other clients' models;
the scores form a weighted directed graph (subscriber → publisher) whose node centralities
summarize a client's contribution.  :func:`write_graph` draws one federation's graph and ranks its
clients by in-strength, PageRank alongside.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import pandas as pd

from pubsubml.experiments.reports import write_results
from pubsubml.experiments.stacking.protocol import normalized_graph
from pubsubml.methods.pubsub.contributions import rank_publishers

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["write_graph"]


def write_graph(
    name: str,
    clients: pd.DataFrame,
    edges: pd.DataFrame,
    where: dict[str, Any],
    attr: str,
    out_dir: Path,
    notes: str,
) -> list[Path]:
    """Write ``<name>-graph.{csv,md,png}``: the contribution graph of seed 0 at ``where``.

    The contribution graph of pfl-stacking.txt §3 for the public ``rf`` with held-out stacking,
    its weights averaged over the repeats of seed 0 (the edges as CSV, the figure as PNG); the
    Markdown ranks the clients by in-strength, with their ``attr`` (e.g. data share).

    Returns
    -------
    list of Path
        The files written.
    """
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
    table = pd.DataFrame(
        [{"subscriber": a, "publisher": b, "weight": w} for a, b, w in graph.edges(data="weight")]
    )
    where_txt = ", ".join(f"{k}={v}" for k, v in where.items())
    return write_results(
        f"{name}-graph",
        out_dir,
        table=table,
        summary=_ranking(graph, strength, sel_c, attr),
        figure=_draw(graph, strength, name),
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


def _ranking(
    graph: Any, strength: dict[str, float], clients: pd.DataFrame, attr: str
) -> pd.DataFrame:
    """Clients by decreasing in-strength; PageRank and mean ``attr``, gain and self-importance."""
    pagerank = dict(rank_publishers(graph, centrality="pagerank"))
    info = clients.groupby("client", sort=False)[[attr, "self_importance", "gain"]].mean()
    return pd.DataFrame(
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


def _draw(graph: Any, strength: dict[str, float], name: str) -> Figure:
    """The graph on a circle: node size by in-strength, edge width and colour by weight."""
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
    return fig
