"""1,000 DP publishers and 10 subscribers end to end (pubsub-ml.txt §8.2.3, Fig. 4, Table 6).

Times every phase of one fold of ``pubsubml bench pubsub-selection`` (without the FL baselines)
on an executor of ``--jobs`` workers (:mod:`pubsubml.experiments.pubsub.scale.executor_tasks`): generate
the Hyperplane sites (Table 3), train the 1,000 publishers' DP networks (10-100-50-2 tanh, 30
epochs, minibatch 100, Adam; ε = 1, δ = 10⁻⁴) in batches of 250 with
:func:`pubsubml.learners.mlp.fit_many` on the workers, export + charge the ledger + publish each
to a :class:`~pubsubml.hub.LocalHub`, then the 10 subscribers in batches on the workers: pull the
1,000 models once per worker process (Load) and customize with All / Top-100 / Top-50 / Top-10
(``Customizer.fit_top_ms``: the configurations share the own model and the outputs), the
subscribed networks' outputs computed batched (``published_runner``).

References measured in the same run (named in the table, ratio = measured / reference):

* training: a sample of publishers trained one by one with ``clone(est).fit`` in this process,
  extrapolated to all publishers (× n_publishers / sample);
* customization: one subscriber's All customization with the networks run one by one
  (``runner=None``: each model's ``predict_proba`` on its own).

Targets: train the 1,000 publishers and customize for the 10 subscribers within 10 minutes on 2
cores (§8.2.3), and within 40 s (the figure of the paper-protocol customization, not to regress).
Run: ``.venv/bin/python benchmarks/pubsub_publishers.py`` (``--jobs``, ``--executor``,
``--publishers``, ``--subscribers``, ``--sample`` for a quick check).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time

import numpy as np
import torch
from sklearn.base import clone

from pubsubml.data import hyperplane_schema
from pubsubml.experiments.executors import EXECUTORS, make_executor
from pubsubml.experiments.pubsub.scale.executor_tasks import (
    customize_subscribers,
    peak_rss_gib,
    train_and_publish,
)
from pubsubml.experiments.pubsub.scale.hyperplane import make_consortium
from pubsubml.experiments.pubsub.scale.many_publishers import (
    publisher_estimator,
    pull_models,
    split_sites,
)
from pubsubml.experiments.pubsub.scale.sizes import SIZES
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.outputs import published_runner


def _load() -> float:
    return os.getloadavg()[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--publishers", type=int, default=1000)
    parser.add_argument("--subscribers", type=int, default=10)
    parser.add_argument("--sample", type=int, default=10, help="publishers trained one by one")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers")
    parser.add_argument("--executor", choices=sorted(EXECUTORS), default="process")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    logging.getLogger("absl").setLevel(logging.ERROR)
    sizes = SIZES["full"]
    rows: list[tuple[str, float, str]] = []
    load_before = _load()

    t0 = time.perf_counter()
    pubs, subs = make_consortium(args.publishers, args.subscribers, sizes.rows, seed=args.seed)
    data = split_sites(pubs, subs, folds=sizes.folds, fold=0, seed=args.seed)
    rows.append(("generate sites (Table 3)", time.perf_counter() - t0, ""))

    with make_executor(args.executor, args.jobs) as pool:
        list(pool.submit(peak_rss_gib, [()] * pool.jobs))  # start the workers, untimed
        shipment, published = train_and_publish(
            pool, data.publishers, data.names, sizes, seed=args.seed
        )
        t_train = published["seconds"]
        rows.append(
            (
                f"train + publish {args.publishers} DP publishers on {args.jobs} {args.executor} "
                "worker(s) (wall; fit_many in batches of 250, then export + ledger charge + "
                "signature + publish in the worker)",
                t_train,
                f"of which train {published['train_s']:.2f} s, publish "
                f"{published['publish_s']:.2f} s, summed over the batches",
            )
        )

        est = publisher_estimator(sizes, args.seed)
        t0 = time.perf_counter()
        for X, y in data.publishers[: args.sample]:
            clone(est).fit(X, y)
        t_one = (time.perf_counter() - t0) * args.publishers / args.sample
        rows.append(
            (
                f"reference: clone(est).fit one by one in one process ({args.sample} timed, × "
                f"{args.publishers / args.sample:g} extrapolated)",
                t_one,
                f"ratio train (summed) / reference = {published['train_s'] / t_one:.3f}",
            )
        )

        subscribers = [
            (f"s{j}", fit, test, args.seed + j)
            for j, (fit, test) in enumerate(zip(data.sub_fit, data.sub_test, strict=True))
        ]
        t0 = time.perf_counter()
        records, phases = customize_subscribers(pool, shipment, subscribers, sizes.top_ms)
        t_subs = time.perf_counter() - t0
    scores: dict[str, list[float]] = {}
    for r in records:
        scores.setdefault(r["method"], []).append(r["score"])
    rows.append(
        (
            f"{args.subscribers} subscribers: Load (pull all models once per worker, summed over "
            "the workers)",
            phases["load_s"],
            "",
        )
    )
    rows.append(
        (
            f"{args.subscribers} subscribers: Load + customize All, Top-100/50/10 "
            f"(wall, {args.jobs} worker(s))",
            t_subs,
            "",
        )
    )
    hub, keys = shipment.hub()
    received, _ = pull_models(hub, keys, "s0")
    X_fit, y_fit = data.sub_fit[0]
    timings = []
    for runner in (published_runner, None):
        t0 = time.perf_counter()
        Customizer(
            models=received,
            schema=hyperplane_schema(),
            runner=runner,
            random_state=args.seed,
        ).fit(X_fit, y_fit)
        timings.append(time.perf_counter() - t0)
    rows.append(("one subscriber, customize All, batched outputs", timings[0], ""))
    rows.append(
        (
            "reference: same, each network's predict_proba on its own",
            timings[1],
            f"ratio batched / reference = {timings[0] / timings[1]:.3f}",
        )
    )
    total = t_train + t_subs
    rows.append(
        (
            f"TOTAL train + publish + {args.subscribers} subscribers (Load + customize)",
            total,
            f"target <= 600 s: {'met' if total <= 600 else 'missed'}; <= 40 s: "
            f"{'met' if total <= 40 else 'missed'}",
        )
    )

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, torch threads "
        f"{torch.get_num_threads()}, load average {load_before:.1f} -> {_load():.1f}"
    )
    width = max(len(r[0]) for r in rows)
    print(f"| {'phase':<{width}} | {'seconds':>8} | note |")
    print(f"|{'-' * (width + 2)}|{'-' * 10}|------|")
    for phase, seconds, note in rows:
        print(f"| {phase:<{width}} | {seconds:8.2f} | {note} |")
    accs = ", ".join(f"{k} {np.mean(v):.3f}" for k, v in scores.items())
    print(f"mean accuracy over the subscribers' held-out 20%: {accs}")
    print(
        f"publisher ε = {max(published['epsilons']):.4f} (δ = {sizes.delta:g}); peak RSS "
        f"of this process {peak_rss_gib():.2f} GiB"
    )


if __name__ == "__main__":
    main()
