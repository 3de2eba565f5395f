"""The stacking experiments (pfl-stacking.txt §4) and the files they write.

:data:`EXPERIMENTS` holds one :class:`~pubsubml.experiments.base.Experiment` per scenario:
``stacking-quantity`` (§4.1), ``stacking-label`` (§4.2), ``stacking-vertical`` (§4.3, App. A) and
``stacking-natural`` (§4.4).  Each runs the grid of :mod:`pubsubml.experiments.stacking.grids` with
its task of :mod:`pubsubml.experiments.stacking.experiments` (one fold = one random split of a
seed's partition, the paper's repeat), and its ``report_*`` writes ``stacking-<name>.{csv,md,png}``
(per-client records, mean ± SE over seeds, figure) and ``stacking-<name>-graph.{csv,md,png}`` (the
contribution graph of one federation and the centrality ranking of its clients) with
:func:`~pubsubml.experiments.reports.write_results`; a data set other than ``hi`` adds
``-<dataset>`` to every name (:func:`~pubsubml.experiments.stacking.grids.result_name`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.experiments.base import Experiment, RunOptions
from pubsubml.experiments.reports import mean_se_label, summarize, write_results
from pubsubml.experiments.runner import Record
from pubsubml.experiments.stacking.experiments import (
    STAND_INS,
    label_task,
    natural_task,
    quantity_task,
    vertical_task,
)
from pubsubml.experiments.stacking.figures import (
    importance_matrix,
    label_figure,
    natural_figure,
    quantity_figure,
    summary_table,
    vertical_figure,
)
from pubsubml.experiments.stacking.graphs import write_graph
from pubsubml.experiments.stacking.grids import (
    PARAMS,
    check_natural,
    label_grid,
    natural_grid,
    quantity_grid,
    result_name,
    run_sizes,
    vertical_grid,
)

__all__ = [
    "EXPERIMENTS",
    "NATURAL_NOTES",
    "VERTICAL_NOTES",
    "jaccard_table",
    "realized_balance",
    "report_label",
    "report_natural",
    "report_quantity",
    "report_vertical",
]


def _split(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The client records and the edge records of ``table``, each without its all-empty columns."""
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


def _notes(options: RunOptions, extra: str, clients: pd.DataFrame) -> str:
    """The setup shared by every stacking result, then ``extra``."""
    sizes = run_sizes(options)
    dataset = options.params["dataset"]
    return (
        _auc_note(clients)
        + f"Data set: `{dataset}` (offline stand-in for {STAND_INS.get(dataset, '?')}), "
        f"{sizes.max_rows} rows sampled per seed, {sizes.n_clients} clients unless the partition "
        f"decides; {options.seeds} seed(s) × {options.folds} repeat(s) of the 0.6/0.2/0.2 "
        f"stratified split; private and meta-models are random forests with {sizes.trees} trees.  "
        "Public models: `rf` = non-private random forest (the paper's setting, a reference), "
        "`dp_rf_e*` / `dp_lr_e*` / `dp_mlp_e*` = DP random forest / logistic regression / MLP with "
        "the ε their accountant reports (column `epsilon`).  `gain` = personalized − private-only "
        "balanced accuracy, the private-only model being trained on Train ∪ Meta Train (as the "
        "paper's source); `gain_auc` the same for ROC AUC from probabilities.  Mean ± SE over "
        "seeds (`n`): each federation (seed × repeat) is averaged over its clients, then each seed "
        "over its repeats, which share its partition and public models.  The public `rf` is "
        "scikit-learn's 100-tree forest whatever `--trees` says, as in the paper; the private and "
        f"meta-forests have {sizes.trees} (the paper: 100), so with fewer than 100 the public "
        "forests have more trees than the private baseline, which can only favour the gain.  "
        + extra
    )


def report_quantity(table: pd.DataFrame, out_dir: Path, options: RunOptions) -> list[Path]:
    """§4.1, Fig. 2: gain vs ``a``; gain, importance and self-importance vs a client's share."""
    sizes, dataset = run_sizes(options), options.params["dataset"]
    clients, edges = _split(table)
    rf = clients[clients.models == "rf"]
    figure = quantity_figure(clients, sizes.quantity_a, dataset)
    notes = _notes(
        options,
        "Power-law shares (k/K)^a − ((k−1)/K)^a of pubsubml.data.partition, "
        f"at least {sizes.min_size} rows per client; "
        + _realized_shares(rf, sizes.quantity_a)
        + ".",
        clients,
    )
    name = result_name(dataset, "quantity")
    summary = summary_table(clients, ["models", "a", "public", "variant"])
    where = {"a": sizes.quantity_a[0], "models": "rf"}
    return [
        *write_results(name, out_dir, table=clients, summary=summary, figure=figure, notes=notes),
        *write_graph(name, clients, edges, where, "share", out_dir, notes),
    ]


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
    mixes are reported rather than assumed (pfl-stacking.txt §4.2).
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


def report_label(table: pd.DataFrame, out_dir: Path, options: RunOptions) -> list[Path]:
    """§4.2, Fig. 3: gain vs α; gain and importance vs label balance; the importance matrix (3f)."""
    sizes, dataset = run_sizes(options), options.params["dataset"]
    clients, edges = _split(table)
    rf = clients[(clients.models == "rf") & (clients.public == "rf")]
    matrix = importance_matrix(edges)
    figure = label_figure(clients, matrix, sizes.label_alpha, dataset)
    notes = _notes(
        options,
        "Labels q ~ Dirichlet(α·p) with p the global class frequencies "
        "(pubsubml.data.partition.dirichlet_label_skew, equal client sizes).  "
        + realized_balance(rf, sizes.label_alpha),
        clients,
    )
    matrix.index = [str(i) for i in matrix.index]
    matrix.columns = [str(c) for c in matrix.columns]
    name = result_name(dataset, "label")
    summary = summary_table(clients, ["models", "alpha", "public", "variant"])
    where = {"alpha": sizes.label_alpha[1], "models": "rf"}
    return [
        *write_results(
            result_name(dataset, "label-matrix"),
            out_dir,
            table=matrix.reset_index(names="subscriber"),
            summary=matrix.reset_index(names="subscriber \\ publisher"),
            notes="Mean importance a held-out stacked model (public `rf`) gives another "
            "client's model, by subscriber (rows) and publisher (columns) label balance.",
        ),
        *write_results(name, out_dir, table=clients, summary=summary, figure=figure, notes=notes),
        *write_graph(name, clients, edges, where, "balance", out_dir, notes),
    ]


VERTICAL_NOTES = (
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
    "(a published default must lie within them)."
)
"""The setup of the vertical partition (pfl-stacking.txt §4.3, Appendix A) and its ε columns."""


def report_vertical(table: pd.DataFrame, out_dir: Path, options: RunOptions) -> list[Path]:
    """§4.3 / App. A, Fig. 4 and 6: gain over (p, ε_noise), importance vs Jaccard, DP defaults."""
    sizes, dataset = run_sizes(options), options.params["dataset"]
    ps = sizes.vertical_p
    clients, edges = _split(table)
    figure = vertical_figure(clients, edges, ps, dataset)
    jaccard = jaccard_table(edges)
    notes = _notes(options, VERTICAL_NOTES, clients)
    name = result_name(dataset, "vertical")
    summary = summary_table(
        clients, ["models", "rows", "defaults", "p", "noise", "public", "variant"]
    )
    mid = ps[len(ps) // 2]
    where = {"p": mid, "noise": 0.0, "defaults": "noisy", "rows": "all", "models": "rf"}
    return [
        *write_results(name, out_dir, table=clients, summary=summary, figure=figure, notes=notes),
        *write_results(
            result_name(dataset, "vertical-jaccard"),
            out_dir,
            table=jaccard,
            summary=jaccard,
            notes="Mean importance a held-out stacked model (public `rf`, noisy defaults at "
            "ε_noise = 0) gives another client's model, by the Jaccard similarity of the two "
            "clients' feature sets (pfl-stacking.txt Fig. 4d); mean over the pairs of each seed, "
            "then mean ± SE over seeds; `pairs` counts (subscriber, publisher, repeat) pairs.  "
            + notes,
        ),
        *write_graph(name, clients, edges, where, "n_features", out_dir, notes),
    ]


def jaccard_table(edges: pd.DataFrame) -> pd.DataFrame:
    """Assigned importance by Jaccard similarity of feature sets (held-out, ``rf``, ε_noise = 0).

    One row per (rows, p, Jaccard value): mean ± SE over seeds of the mean weight of each seed's
    pairs (pfl-stacking.txt §4.3, Fig. 4d), the number of pairs and of seeds.
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
    out = summarize(seeds, by, value="mean")
    out["importance"] = [mean_se_label(m, s) for m, s in zip(out["mean"], out["se"], strict=True)]
    out["pairs"] = seeds.groupby(by, sort=False)["size"].sum().to_numpy()
    out["seeds"] = out["n"]
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


def report_natural(table: pd.DataFrame, out_dir: Path, options: RunOptions) -> list[Path]:
    """§4.4, Fig. 5: gain and self-importance per client of a natural partition."""
    sizes, dataset = run_sizes(options), options.params["dataset"]
    clients, edges = _split(table)
    figure = natural_figure(clients, dataset)
    notes = _notes(
        options,
        "One client per value of the partition column (not a feature), groups "
        f"under {sizes.min_size} rows left out.  " + NATURAL_NOTES.get(dataset, ""),
        clients,
    )
    name = result_name(dataset, "natural")
    summary = summary_table(clients, ["models", "client", "public", "variant"])
    return [
        *write_results(name, out_dir, table=clients, summary=summary, figure=figure, notes=notes),
        *write_graph(name, clients, edges, {"models": "rf"}, "share", out_dir, notes),
    ]


def _experiment(
    name: str,
    summary: str,
    grid: Callable[[RunOptions], list[dict[str, Any]]],
    run_fold: Callable[..., list[Record]],
    report: Callable[[pd.DataFrame, Path, RunOptions], list[Path]],
    check: Callable[[RunOptions], None] | None = None,
) -> Experiment:
    """A stacking experiment: the paper's 10 seeds × 5 repeats, the options of :data:`PARAMS`."""
    return Experiment(
        name,
        summary,
        grid=grid,
        run_fold=run_fold,
        report=report,
        seeds=10,
        smoke_seeds=1,
        folds=5,
        smoke_folds=2,
        folds_help="Random splits per seed (paper: 5).",
        min_folds=1,
        fold_aliases=("repeats",),
        params=PARAMS,
        check=check,
    )


EXPERIMENTS: tuple[Experiment, ...] = (
    _experiment(
        "stacking-quantity",
        "Stacking under quantity skew: gain vs power-law a and data share "
        "(pfl-stacking.txt §4.1, Fig. 2).",
        quantity_grid,
        quantity_task,
        report_quantity,
    ),
    _experiment(
        "stacking-label",
        "Stacking under label skew: gain vs Dirichlet α, importance between label mixes "
        "(pfl-stacking.txt §4.2, Fig. 3).",
        label_grid,
        label_task,
        report_label,
    ),
    _experiment(
        "stacking-vertical",
        "Stacking under vertical partitioning: gain over (p, ε_noise), importance vs Jaccard "
        "(pfl-stacking.txt §4.3, Fig. 4, App. A Fig. 6).",
        vertical_grid,
        vertical_task,
        report_vertical,
    ),
    _experiment(
        "stacking-natural",
        "Stacking on a natural partition: gain and self-importance per client "
        "(pfl-stacking.txt §4.4, Fig. 5).",
        natural_grid,
        natural_task,
        report_natural,
        check=check_natural,
    ),
)
"""The four stacking experiments of pfl-stacking.txt §4, in the paper's order."""
