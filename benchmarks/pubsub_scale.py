"""n publishers × n subscribers, n = 5 … 5,000: time, memory and growth (pubsub-ml.txt app. B, Fig. 8).

Runs :func:`pubsubml.experiments.pubsub.scale.publishers_scale.scale_run` (what ``pubsubml bench
pubsub-publishers --subscribers all`` runs) on one executor for every n of the paper's grid up to
``--max-publishers``, every subscriber customized (All).  Then, for ``--probe N`` (default 5,000),
the same simulation with only the first ``--probe-subscribers`` subscribers customized: the
publishers' phases are measured in full, the subscribers' cost per subscriber is measured on the
probe and scaled to N subscribers (compute: summed per-subscriber seconds × N / k over the
workers; Load: once per batch of the full run's batching).

Reference in the same run: the smallest n.  The table gives each n's seconds per subscriber and
its ratio to the smallest n's (how much dearer a subscriber gets with n models), and the growth
exponent b of ``total ≈ a·n^b``.  Target (issue): 5,000 × 5,000 within 60 minutes on this
machine.

``--customizer paper`` runs the subscribers' CUSTOMIZE as the paper does (Tra/Cus split, Table 4's
own network, the fully connected fusion; :func:`pubsubml.experiments.pubsub.scale.many_publishers.customize_options`)
instead of the Customizer's defaults; ``--probe-subscribers 0`` customizes every subscriber of the
probe, so its n × n run is measured whole instead of estimated.

Run: ``.venv/bin/python benchmarks/pubsub_scale.py --executor ray --jobs 2`` (``--max-publishers``,
``--probe``, ``--probe-subscribers``, ``--customizer``).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time

import pandas as pd
import torch

from pubsubml.experiments.executors import EXECUTORS, make_executor
from pubsubml.experiments.pubsub.scale.executor_tasks import peak_rss_gib
from pubsubml.experiments.pubsub.scale.many_publishers import PROTOCOLS
from pubsubml.experiments.pubsub.scale.publishers_scale import (
    growth,
    run_summary,
    scale_counts,
    scale_run,
)
from pubsubml.experiments.pubsub.scale.sizes import SIZES


def _estimate(records: list[dict], n: int, jobs: int) -> dict[str, float]:
    """The probe's phases with its subscribers' cost scaled to all n subscribers."""
    frame = pd.DataFrame(records)
    run = frame[frame["method"] == "run"].iloc[0]
    k = int(run["n_subscribers"])
    # one worker's seconds per subscriber: the subscribers' own records (the "run" record's
    # customize_s is the wall time of all of them, not one more subscriber)
    subscribers = frame[frame["method"] != "run"]
    per_subscriber = float(subscribers["customize_s"].dropna().sum()) / k
    batches = min(n, jobs * 4)
    load_per_batch = float(run["load_s"]) / min(k, jobs * 4)
    customize = per_subscriber * n / jobs + load_per_batch * batches / jobs
    publishers = float(run["generate_s"] + run["publishers_s"])
    return {
        "k": k,
        "per_subscriber": per_subscriber,
        "load_per_batch": load_per_batch,
        "publishers": publishers,
        "customize": customize,
        "total": publishers + customize,
        "parent_peak": float(run["parent_peak_gib"]),
        "worker_peak": float(run["worker_peak_gib"]),
        "measured": float(run["total_s"]),
        "measured_customize": float(run["customize_s"]),
    }


def _scores(records: list[dict]) -> str:
    """Mean accuracy of PubSub-ML and of Own (M^s) over the subscribers that ran."""
    frame = pd.DataFrame(records)
    means = frame[frame["method"] != "run"].groupby("method")["score"].mean()
    return ", ".join(f"{method} {value:.3f}" for method, value in means.items())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-publishers", type=int, default=100)
    parser.add_argument("--probe", type=int, default=5000, help="0: no probe")
    parser.add_argument(
        "--probe-subscribers", type=int, default=8, help="0: all of them (the whole n × n run)"
    )
    parser.add_argument(
        "--customizer",
        choices=PROTOCOLS,
        default="default",
        help="the subscribers' CUSTOMIZE: the Customizer's defaults or the paper's protocol",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--executor", choices=sorted(EXECUTORS), default="ray")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    logging.getLogger("absl").setLevel(logging.ERROR)
    sizes = SIZES["full"]
    load_before = os.getloadavg()[0]
    rows: list[dict] = []
    probe: dict[str, float] | None = None
    probe_scores = ""
    with make_executor(args.executor, args.jobs) as pool:
        list(pool.submit(peak_rss_gib, [()] * pool.jobs))  # start the workers, untimed
        for n in scale_counts(False, args.max_publishers):
            t0 = time.perf_counter()
            rows += scale_run(pool, n, sizes, seed=args.seed, fold=0, protocol=args.customizer)
            print(f"n = {n}: {time.perf_counter() - t0:.1f} s", flush=True)
        if args.probe:
            t0 = time.perf_counter()
            records = scale_run(
                pool,
                args.probe,
                sizes,
                seed=args.seed,
                fold=0,
                subscribers=args.probe_subscribers or None,
                protocol=args.customizer,
            )
            probe = _estimate(records, args.probe, args.jobs)
            probe_scores = _scores(records)
            print(f"probe n = {args.probe}: {time.perf_counter() - t0:.1f} s", flush=True)

    runs = run_summary(pd.DataFrame(rows))
    ref = float(runs["s per subscriber"].iloc[0])
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {args.jobs} {args.executor} "
        f"worker(s), load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}; CUSTOMIZE "
        f"protocol: {args.customizer}"
    )
    print(
        "| n | subscribers | publishers s | customize s | total s | s per subscriber | ratio to n = "
        f"{int(runs['n_publishers'].iloc[0])} | peak RSS driver / worker GiB |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for _, r in runs.iterrows():
        print(
            f"| {int(r['n_publishers'])} | {int(r['subscribers'])} | {r['publishers_s']:.1f} | "
            f"{r['customize_s']:.1f} | {r['total_s']:.1f} | {r['s per subscriber']:.2f} | "
            f"{r['s per subscriber'] / ref:.2f} | {r['parent_peak_gib']:.2f} / "
            f"{r['worker_peak_gib']:.2f} |"
        )
    b_all, b_last = growth(runs["n_publishers"].tolist(), runs["total_s"].tolist())
    print(f"growth exponent of the total: {b_all:.2f} (least squares), {b_last:.2f} (last two n)")
    if probe is not None:
        n = args.probe
        per = probe["customize"] / n
        if probe["k"] == n:  # every subscriber ran: measured, not estimated
            print(
                f"n = {n} × {n}, every subscriber run: {probe['measured']:.0f} s "
                f"({probe['measured'] / 60:.1f} min; publishers' phases {probe['publishers']:.1f} "
                f"s, subscribers {probe['measured_customize']:.0f} s wall); target <= 3600 s: "
                f"{'met' if probe['measured'] <= 3600 else 'missed'} (ratio "
                f"{probe['measured'] / 3600:.2f}); peak RSS driver {probe['parent_peak']:.2f} GiB, "
                f"worker {probe['worker_peak']:.2f} GiB; accuracy {probe_scores}"
            )
        print(f"probe n = {n}: accuracy over the subscribers run: {probe_scores}")
        print(
            f"probe n = {n} ({int(probe['k'])} subscribers run): publishers' phases "
            f"{probe['publishers']:.1f} s; one subscriber {probe['per_subscriber']:.2f} s of a "
            f"worker, Load {probe['load_per_batch']:.1f} s per batch; estimated {n} × {n}: "
            f"{probe['total']:.0f} s ({probe['total'] / 60:.1f} min; subscribers "
            f"{probe['customize']:.0f} s, {per:.2f} s each over {args.jobs} workers); target "
            f"<= 3600 s: {'met' if probe['total'] <= 3600 else 'missed'} (ratio "
            f"{probe['total'] / 3600:.2f}); peak RSS driver {probe['parent_peak']:.2f} GiB, "
            f"worker {probe['worker_peak']:.2f} GiB"
        )
        if len(runs) >= 1:
            big = runs.iloc[-1]
            projected = float(big["total_s"]) * (n / float(big["n_publishers"])) ** b_last
            print(
                f"the same projected from n = {int(big['n_publishers'])} with the last growth "
                f"exponent: {projected:.0f} s"
            )


if __name__ == "__main__":
    main()
