"""Customization at scale: 1,000 DP publishers, one subscriber, against DP-FedAvg (Table 6 layout).

pubsub-ml.txt §8.2.3: 1,000 publishers of 500 Hyperplane rows each publish one DP network
(10-100-50-2 tanh, 30 epochs, minibatch 100, Adam; Table 4) at (ε, δ) = (1, 10⁻⁴); one subscriber
with 500 rows (60% Tra, 20% Cus, 20% test in the paper) customizes with All, Top-100, Top-50 and
Top-10 of the 1,000 models plus its own.  The paper measured 185 s (All) and 135 s (Top-10) against
683 s for DP-FL.

Setup, untimed but reported: one river Hyperplane stream (seed 0, no drift, 5% label noise) dealt
out in consecutive 500-row blocks to the publishers, then the subscriber, then a 2,000-row test set
for a stable accuracy; the 1,000 networks trained at once with ``fit_many`` (stacked DP-SGD
engine); each publisher exports, charges its ledger and publishes to a :class:`LocalHub`.

Timed, per configuration (the subscriber's view):

* Load: pull the 1,000 models from the hub — fetch, verify signature and digest, recompute ε,
  build the runtime (the same for every configuration, measured once);
* Own: M^s with the Customizer's defaults: the best of a network, a forest and a logistic model
  by 5-fold CV, out-of-fold outputs for every row, refit on all rows (non-private);
* Outputs: the 1,000 published models on the subscriber's rows, stacked (``published_runner``);
* Select: the metric of every candidate and the top-m (computed for All too, though unused);
* Fuse: fit f_c on m(x) (the stacked fusion, its penalty chosen by 5-fold CV);
* Total = Load + Own + Outputs + Select + Fuse.

Reference, same run and data: DP-FedAvg over the 1,000 publishers' data, same network, same (ε, δ)
per client, 10% of clients per round (§8.2.3), one local epoch per round, 300 rounds — so each
client trains 30 epochs in expectation, as each publisher does (σ calibrated for its participations).

Run: ``.venv/bin/python benchmarks/customize_scale.py`` (``--publishers``, ``--rows``,
``--fl-rounds``; small values for a quick check; ``--threads`` sets torch's thread count).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import resource
import time

import numpy as np
import pandas as pd
import torch

from pubsubml.hub import LocalHub
from pubsubml.learners.mlp import DPMLPClassifier, fit_many
from pubsubml.methods import (
    Customizer,
    DPFedAvg,
    hyperplane_chunks,
    hyperplane_schema,
    published_runner,
)
from pubsubml.privacy import PrivacyLedger
from pubsubml.sites import Site

CONFIGS: list[tuple[str, int | None]] = [
    ("All", None),
    ("Top-100", 100),
    ("Top-50", 50),
    ("Top-10", 10),
]


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--publishers", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-4)
    parser.add_argument("--fl-rounds", type=int, default=300)
    parser.add_argument("--fl-fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    logging.getLogger("absl").setLevel(logging.ERROR)
    schema = hyperplane_schema(10)
    n_pub, rows = args.publishers, args.rows

    # ---- setup (untimed in the table) ------------------------------------------------------
    t0 = time.perf_counter()
    blocks = list(hyperplane_chunks(n_pub + 1 + 4, rows, seed=args.seed, mag_change=0.0))
    pub_data, (X_sub, y_sub) = blocks[:n_pub], blocks[n_pub]
    X_test = pd.concat([b[0] for b in blocks[n_pub + 1 :]], ignore_index=True)
    y_test = np.concatenate([b[1] for b in blocks[n_pub + 1 :]])
    t_data = time.perf_counter() - t0

    t0 = time.perf_counter()
    config = DPMLPClassifier(
        schema=schema,
        classes=[0, 1],
        hidden_layer_sizes=(100, 50),
        activation="tanh",
        epochs=30,
        batch_size=100,
        learning_rate=1e-3,
        epsilon=args.epsilon,
        delta=args.delta,
        random_state=args.seed,
    )
    models = fit_many(config, [X for X, _ in pub_data], [y for _, y in pub_data])
    t_train = time.perf_counter() - t0

    t0 = time.perf_counter()
    hub = LocalHub()
    keys = []
    for i, model in enumerate(models):
        ledger = PrivacyLedger(site=f"p{i}", epsilon_budget=args.epsilon, delta=args.delta)
        site = Site(f"p{i}", schema, ledger)
        site.publish(model, hub)
        keys.append(site.public_key)
    t_publish = time.perf_counter() - t0
    eps_pub = max(m.epsilon_ for m in models)

    # ---- subscriber (timed) ----------------------------------------------------------------
    sub = Site(
        "subscriber", schema, PrivacyLedger(site="subscriber", epsilon_budget=1.0, delta=args.delta)
    )
    sub.trust(*keys)
    sub.subscribe(hub, "x0", task="classification", classes=[0, 1])
    t0 = time.perf_counter()
    received = sub.pull(hub)
    t_load = time.perf_counter() - t0
    n_fit = round(0.8 * len(X_sub))  # 60/20 of the subscriber's rows; the last 20% are held out
    X_fit, y_fit = X_sub.iloc[:n_fit], y_sub[:n_fit]
    rows_out: dict[str, dict[str, float]] = {}
    for name, top_m in CONFIGS:
        t1 = time.perf_counter()
        c = Customizer(
            models=received,
            top_m=top_m,
            schema=schema,
            runner=published_runner,
            random_state=args.seed,
        ).fit(X_fit, y_fit)
        fit_wall = time.perf_counter() - t1
        tm = c.fit_timings_
        rows_out[name] = {
            "Load": t_load,
            "Own": tm["own"],
            "Outputs": tm["outputs"],
            "Select": tm["select"],
            "Fuse": tm["fuse"],
            "Total": t_load + fit_wall,
            "Accuracy": c.score(X_test, y_test),
            "Accuracy (held-out 20%)": c.score(X_sub.iloc[n_fit:], y_sub[n_fit:]),
        }
        own_acc = float(np.mean(c.own_model_.predict(X_test) == y_test))

    # ---- reference: DP-FedAvg on the publishers' data, same run -----------------------------
    t0 = time.perf_counter()
    fl = DPFedAvg(
        schema=schema,
        classes=[0, 1],
        hidden_layer_sizes=(100, 50),
        activation="tanh",
        rounds=args.fl_rounds,
        local_epochs=1,
        batch_size=100,
        client_fraction=args.fl_fraction,
        lr=1e-3,
        target_epsilon=args.epsilon,
        target_delta=args.delta,
        random_state=args.seed,
    ).fit(pub_data)
    t_fl = time.perf_counter() - t0
    fl_acc = fl.score(X_test, y_test)

    # ---- report --------------------------------------------------------------------------------
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, torch threads "
        f"{torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"setup (untimed): data {t_data:.1f} s; train {n_pub} DP publishers with fit_many "
        f"{t_train:.1f} s (max ε = {eps_pub:.3f}, δ = {args.delta:g}); export + ledger + "
        f"publish {t_publish:.1f} s"
    )
    head = (
        f"| {'time (s)':<24} |" + "".join(f" {n:>8} |" for n, _ in CONFIGS) + f" {'DP-FedAvg':>9} |"
    )
    print(head)
    print("|" + "-" * 26 + "|" + "".join("-" * 10 + "|" for _ in CONFIGS) + "-" * 11 + "|")
    for key in ("Load", "Own", "Outputs", "Select", "Fuse", "Total"):
        fl_cell = f"{t_fl:9.2f}" if key == "Total" else f"{'NA':>9}"
        cells = "".join(f" {rows_out[n][key]:8.2f} |" for n, _ in CONFIGS)
        print(f"| {key:<24} |{cells} {fl_cell} |")
    ratio = "".join(f" {rows_out[n]['Total'] / t_fl:8.3f} |" for n, _ in CONFIGS)
    print(f"| {'Total / DP-FedAvg':<24} |{ratio} {1.0:9.3f} |")
    for key in ("Accuracy", "Accuracy (held-out 20%)"):
        cells = "".join(f" {rows_out[n][key]:8.3f} |" for n, _ in CONFIGS)
        fl_cell = f"{fl_acc:9.3f}" if key == "Accuracy" else f"{'':>9}"
        print(f"| {key:<24} |{cells} {fl_cell} |")
    print(
        f"Own model alone: accuracy {own_acc:.3f} on the {len(y_test)}-row test set; DP-FedAvg "
        f"max client ε = {fl.epsilon_:.3f} ({int(fl.participation_.min())}–"
        f"{int(fl.participation_.max())} rounds per client)"
    )
    print(f"peak RSS: {_peak_rss_gib():.2f} GiB")


if __name__ == "__main__":
    main()
