"""Fig. 8 at the paper's range: n publishers and n subscribers, n = 5 … 5,000 (pubsub-ml.txt app. B).

"There are n publishers and n subscribers, and we vary n from 5 to 5000.  For each of n
publishers, we report the average performance over all n subscribers."  Each n is its own
simulation of Algorithm 3 on an executor (:mod:`pubsubml.experiments.pubsub.scale.executor_tasks`):
generate the 2n Hyperplane sites (Table 3), train the n publishers' DP networks in batches on the
workers, charge each ledger and publish, then customize every subscriber (All, the paper's
Fig. 8 configuration) in batches on the workers.  One pool serves every n, so the workers
start once; n increases, so a process's peak memory so far is that of the largest n yet.

Besides the accuracy records, each n adds one ``"run"`` record with the seconds of every phase and
the peak resident memory of this process and of the largest worker; :func:`growth` fits the
exponent b of ``seconds ≈ a · n^b``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pubsubml.experiments.base import RunOptions
from pubsubml.experiments.executors import Executor, make_executor
from pubsubml.experiments.pubsub.scale.executor_tasks import (
    customize_subscribers,
    peak_rss_gib,
    train_and_publish,
)
from pubsubml.experiments.pubsub.scale.hyperplane import make_consortium, table3_note
from pubsubml.experiments.pubsub.scale.many_publishers import check_protocol, split_sites
from pubsubml.experiments.pubsub.scale.report_helpers import machine_note
from pubsubml.experiments.pubsub.scale.sizes import SIZES, ScaleSizes
from pubsubml.experiments.reports import markdown_table, summarize, write_results
from pubsubml.experiments.runner import Record, progress_bar

__all__ = [
    "PAPER_COUNTS",
    "growth",
    "protocol_note",
    "report_scale",
    "run_summary",
    "scale_counts",
    "scale_run",
    "scale_table",
]

PAPER_COUNTS: tuple[int, ...] = (5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
"""n of Fig. 8: the paper's range 5 … 5,000 on a 1-2-5 grid."""


def scale_counts(smoke: bool, max_publishers: int) -> list[int]:
    """The n to run: :data:`PAPER_COUNTS` (the smoke size's counts) up to ``max_publishers``."""
    grid = SIZES["smoke"].publisher_counts if smoke else PAPER_COUNTS
    counts = [n for n in grid if n <= max_publishers]
    if not counts:
        raise ValueError(f"--max-publishers {max_publishers} is below the smallest n ({grid[0]})")
    return counts


def scale_run(
    pool: Executor,
    n: int,
    sizes: ScaleSizes,
    *,
    seed: int,
    fold: int,
    subscribers: int | None = None,
    protocol: str = "default",
) -> list[Record]:
    """One simulation with ``n`` publishers and ``n`` subscribers on ``pool`` (an executor).

    ``subscribers`` customizes only the first that many of the n subscribers (a probe of the cost
    per subscriber at a large n; the records say how many ran).  ``protocol`` is the subscribers'
    CUSTOMIZE (:func:`~pubsubml.experiments.pubsub.scale.many_publishers.customize_options`): the
    Customizer's defaults, or ``"paper"``, the paper's Tra/Cus split and fully connected fusion.

    Returns
    -------
    list of dict
        Per subscriber ``"PubSub-ML"`` and ``"Own (M^s)"`` records (``score``: accuracy on its
        held-out 20 %), then one ``"run"`` record: ``generate_s``, ``publishers_s`` (wall:
        train and publish on the workers), ``train_s`` and ``publish_s`` (summed over the
        workers' batches),
        ``customize_s`` (wall), ``load_s`` (summed over the workers' loads), ``total_s``,
        ``parent_peak_gib``, ``worker_peak_gib``.
    """
    check_protocol(protocol)
    t_start = time.perf_counter()
    pubs, subs = make_consortium(n, n, sizes.rows, seed=seed)
    data = split_sites(pubs, subs, folds=sizes.folds, fold=fold, seed=seed)
    t_generate = time.perf_counter() - t_start
    shipment, published = train_and_publish(
        pool, data.publishers, data.names, sizes, seed=seed * 1000 + fold
    )
    chosen = [
        (f"s{j}", fit, test, seed + j)
        for j, (fit, test) in enumerate(zip(data.sub_fit, data.sub_test, strict=True))
    ][:subscribers]
    records, phases = customize_subscribers(pool, shipment, chosen, protocol=protocol, sizes=sizes)
    out: list[Record] = []
    for r in records:
        r = {k: v for k, v in r.items() if k not in ("select_s", "fuse_s")}
        r["method"] = "PubSub-ML" if r["method"] == "All" else r["method"]
        out.append({"n_publishers": n, **r})
    out.append(
        {
            "n_publishers": n,
            "subscriber": "",
            "method": "run",
            "score": np.nan,
            "n_subscribers": len(chosen),
            "generate_s": t_generate,
            "publishers_s": published["seconds"],
            "train_s": published["train_s"],
            "publish_s": published["publish_s"],
            "customize_s": phases["seconds"],
            "load_s": phases["load_s"],
            "total_s": time.perf_counter() - t_start,
            "parent_peak_gib": peak_rss_gib(),
            "worker_peak_gib": max(published["worker_peak_gib"], phases["worker_peak_gib"]),
            "workers": pool.jobs,
            "protocol": protocol,
        }
    )
    return out


def scale_table(opts: RunOptions) -> pd.DataFrame:
    """Every n of :func:`scale_counts` (increasing) for every seed and fold, on one pool."""
    sizes = SIZES["smoke" if opts.smoke else "full"]
    counts = scale_counts(opts.smoke, int(opts.params["max_publishers"]))
    protocol = str(opts.params.get("customizer", "default"))
    rows: list[Record] = []
    pool = make_executor(opts.executor, opts.jobs, opts.address)
    with pool, progress_bar(opts.progress) as bar:
        # Each n weighs about n² (every subscriber runs every model): the bar advances by that.
        task = bar.add_task(
            "pubsub-publishers, n × n", total=opts.seeds * opts.folds * sum(n * n for n in counts)
        )
        list(pool.submit(peak_rss_gib, [()] * pool.jobs))  # start the workers, untimed
        for seed in range(opts.seeds):
            for fold in range(opts.folds):
                for n in counts:
                    for r in scale_run(pool, n, sizes, seed=seed, fold=fold, protocol=protocol):
                        rows.append({"seed": seed, "fold": fold, **r})
                    bar.advance(task, n * n)
    return pd.DataFrame(rows)


def protocol_note(protocol: str) -> str:
    """One sentence on the subscribers' CUSTOMIZE protocol of a run."""
    if protocol == "paper":
        return (
            "CUSTOMIZE as the paper runs it (`--customizer paper`, pubsub-ml.txt §4, §7): M^s is "
            "Table 4's network without DP on Tra (75 % of the subscriber's fit part), the fully "
            "connected fusion layer is fitted on Cus (the other 25 %)."
        )
    return (
        "CUSTOMIZE with the Customizer's defaults (`--customizer default`): M^s chosen among "
        "three kinds and cross-fitted over 5 folds, the stacked fusion on every fit row."
    )


def growth(n: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """The exponent b of ``seconds ≈ a · n^b``: least squares on log-log over every n, and
    between the two largest n (the local slope, what extrapolates).

    Examples
    --------
    >>> b_all, b_last = growth([10, 100, 1000], [1.0, 10.0, 1000.0])
    >>> round(b_all, 2), round(b_last, 2)
    (1.5, 2.0)
    """
    x = np.log(np.asarray(n, dtype=np.float64))
    y = np.log(np.asarray(seconds, dtype=np.float64))
    if len(x) < 2:
        return float("nan"), float("nan")
    slope = float(np.polyfit(x, y, 1)[0])
    order = np.argsort(x)
    last = float((y[order[-1]] - y[order[-2]]) / (x[order[-1]] - x[order[-2]]))
    return slope, last


def run_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Seconds per phase and peak memory per n, averaged over the ``"run"`` records."""
    runs = table[table["method"] == "run"]
    cols = [
        "generate_s",
        "publishers_s",
        "train_s",
        "publish_s",
        "load_s",
        "customize_s",
        "total_s",
        "parent_peak_gib",
        "worker_peak_gib",
    ]
    out = runs.groupby("n_publishers", sort=True)[cols].mean().reset_index()
    count = runs.groupby("n_publishers", sort=True)["n_subscribers"].mean().to_numpy()
    out.insert(1, "subscribers", count.astype(int))
    out.insert(2, "s per subscriber", out["customize_s"] / out["subscribers"])
    return out


def report_scale(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """Fig. 8 with n subscribers per n: accuracy, seconds and peak memory against n."""
    import matplotlib.pyplot as plt

    scored = table[table["method"].isin(["PubSub-ML", "Own (M^s)"])]
    summary = summarize(scored, ["n_publishers", "method"])
    runs = run_summary(table)
    b_all, b_last = growth(runs["n_publishers"].tolist(), runs["total_s"].tolist())

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for method, style in (("PubSub-ML", "o-"), ("Own (M^s)", "s:")):
        part = summary[summary["method"] == method]
        ax1.errorbar(
            part["n_publishers"], part["mean"], yerr=part["se"], fmt=style, capsize=3, label=method
        )
    ax1.set_xscale("log")
    ax1.set_xlabel("n (publishers = subscribers)")
    ax1.set_ylabel("accuracy")
    ax1.set_title("Impact of the number of publishers (Fig. 8)")
    ax1.legend()
    ax2.loglog(runs["n_publishers"], runs["total_s"], "o-", label="seconds (total)")
    ax2.loglog(runs["n_publishers"], runs["customize_s"], "s--", label="seconds (subscribers)")
    ax2.set_xlabel("n")
    ax2.set_ylabel("seconds")
    mem = ax2.twinx()
    mem.plot(runs["n_publishers"], runs["parent_peak_gib"], "^:", color="#7f7f7f")
    mem.set_ylabel("peak RSS of the driver process, GiB")
    ax2.set_title(f"Time and memory (growth exponent {b_last:.2f})")
    ax2.legend(fontsize=8)
    fig.tight_layout()

    workers = int(table.loc[table["method"] == "run", "workers"].max())
    notes = "\n\n".join(
        [
            "n publishers and n subscribers for each n, as pubsub-ml.txt appendix B sets Fig. 8 "
            "up; accuracy of every subscriber on its held-out 20 % (mean ± SE over seeds, folds "
            "and the n subscribers). PubSub-ML fuses all n models with the own model (All); "
            "Own (M^s) is the own model inside the customization alone. "
            + protocol_note(str(opts.params.get("customizer", "default"))),
            "## Time and memory per n\n\n"
            + markdown_table(runs, digits=2)
            + f"\n\n{workers} worker(s) on the `{opts.executor}` executor, started once (their "
            "start-up is in no row). "
            "Seconds: generate the 2n sites; publishers = wall time of the publishers' phase on the "
            "workers (batches of 250 trained on the stacked DP-SGD engine, then each publisher's "
            "export, ledger charge, signature and publication), train and publish its two parts "
            "summed over the batches; customize = wall time of every subscriber (Load summed "
            "over the workers: each worker pulls and verifies every model once); total = all of "
            "it, wall time. Peak memory is each process's "
            "peak resident set so far (`getrusage`; n increases, so it is that of this n): the "
            "driver's, and the largest worker's. Growth "
            f"exponent of the total (seconds ≈ a·n^b): b = {b_all:.2f} by least squares over "
            f"every n, b = {b_last:.2f} between the two largest n.",
            "## Differences from the paper\n\n"
            f"* {opts.folds} fold(s) of the 5-fold split and {opts.seeds} seed(s); the paper "
            "does not say how many.\n"
            "* The Own baseline outside the customization is not run at this scale (it would "
            "cost another own-model fit per subscriber); `--subscribers capped` runs it.\n"
            f"* {table3_note()}\n"
            f"* A CPU machine ({machine_note()}), not the paper's GPU machine.",
        ]
    )
    return write_results(
        "pubsub-publishers",
        out_dir,
        table=table,
        summary=summary,
        figure=fig,
        notes=notes,
        title="PubSub-ML: n publishers and n subscribers, n = 5 … 5,000 (Fig. 8)",
    )
