"""Vectorized replicate runs of Algorithm 1 against one run at a time.

The experiments of async-dp-cost-of-privacy.txt §5 average ψ over 100 runs of T = 1,000 iterations.
:func:`pubsubml.experiments.async_dp.tasks.run_replicas` runs all replicates at once (the learner's update
and the owners' answers act on a replica axis); the reference is the same function called once per
replicate (``replicas=1``), i.e. a Python loop over runs.  Both use the same algorithm code and the
same data; the reference is timed on ``--reference-runs`` runs and scaled to the full count.

Settings: synthetic owners (p = 10) with N = 3 (Fig. 2/4/5) and N = 50 (Fig. 6), n_i = 10,000.
The table gives both wall times, the speed ratio (reference / ours) and ψ of both, which agree in
distribution (different random streams).  Timings are single runs on a shared machine.

Run: ``.venv/bin/python benchmarks/async_dp_replicas.py`` (``--runs``, ``--reference-runs``).
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from pubsubml.experiments.async_dp.tasks import run_replicas, synthetic_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--reference-runs", type=int, default=10)
    parser.add_argument("--horizon", type=int, default=1000)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(
        f"{'owners':>6} {'ε':>6} {'ours s':>8} {'reference s':>12} {'ratio':>7} {'ψ ours':>9} {'ψ ref':>9}"
    )
    for n_owners in (3, 50):
        task = synthetic_task(n_owners, 10_000, seed=0)
        eps = 100.0
        start = time.perf_counter()
        ours = run_replicas(task, epsilon=eps, horizon=args.horizon, replicas=args.runs, seed=1)
        t_ours = time.perf_counter() - start
        start = time.perf_counter()
        ref = [
            run_replicas(task, epsilon=eps, horizon=args.horizon, replicas=1, seed=100 + r).psi[0]
            for r in range(args.reference_runs)
        ]
        t_ref = (time.perf_counter() - start) * args.runs / args.reference_runs
        print(
            f"{n_owners:>6} {eps:>6g} {t_ours:>8.2f} {t_ref:>12.2f} {t_ref / t_ours:>7.1f} "
            f"{float(np.mean(ours.psi)):>9.4f} {float(np.mean(ref)):>9.4f}"
        )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
