"""Stacked fusion with thousands of models: the two-class difference form against the full form.

``StackedFusion`` (pubsub-ml.txt §4, Eq. 3; ``docs/customization.md``) fits one weight per model
on centred log-odds with L-BFGS-B, the penalty chosen by 5-fold CV (31 fits).  With two classes
the loss is computed from the difference of the pooled logits (``pooled_log_loss``); the
reference is the full form (one row per sample and class), run in the same process on the same
data.  Data: ``--models`` synthetic publishers' probabilities on ``--rows`` subscriber rows (a
few informative, the rest noise around 0.5, like the DP publishers of the n × n simulation),
generated untimed with a fixed seed.  Run::

    .venv/bin/python benchmarks/fusion_speed.py [--rows 400] [--models 5000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import time

import numpy as np

from pubsubml.methods.pubsub import fusion
from pubsubml.methods.pubsub.fusion import StackedFusion, centred_log_odds


def meta_features(rows: int, models: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Own model + ``models`` publishers' centred log-odds (rows, (models + 1) · 2), labels."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    signal = 2.0 * y - 1.0
    strength = np.where(rng.random(models + 1) < 0.005, rng.uniform(0.1, 0.5, models + 1), 0.0)
    strength[0] = 0.5  # the own model
    logit = strength * signal[:, None] + rng.normal(0.0, 1.0, (rows, models + 1))
    p = 1.0 / (1.0 + np.exp(-logit))
    return centred_log_odds(np.stack([1.0 - p, p], axis=2)).reshape(rows, -1), y


def fit_seconds(M: np.ndarray, y: np.ndarray) -> tuple[float, StackedFusion]:
    t0 = time.perf_counter()
    est = StackedFusion(block_width=2, random_state=0).fit(M, y)
    return time.perf_counter() - t0, est


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--models", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    M, y = meta_features(args.rows, args.models)
    difference = fusion.pooled_log_loss
    full = functools.partial(difference, difference=False)
    times: dict[str, list[float]] = {"full": [], "difference": []}
    fitted: dict[str, StackedFusion] = {}
    for _ in range(args.repeats):  # alternating, so both see the same machine
        for name, form in (("full", full), ("difference", difference)):
            fusion.pooled_log_loss = form
            try:
                seconds, fitted[name] = fit_seconds(M, y)
            finally:
                fusion.pooled_log_loss = difference
            times[name].append(seconds)
    ref = statistics.median(times["full"])
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}; {args.rows} rows × {args.models + 1} models, "
        f"median of {args.repeats}"
    )
    print("| form | median s | vs full form | penalty | CV log-loss at the penalty |")
    print("|---|---:|---:|---:|---:|")
    for name in ("full", "difference"):
        est = fitted[name]
        med = statistics.median(times[name])
        print(
            f"| {name} | {med:.2f} | {med / ref:.2f} | {est.penalty_:g} | "
            f"{est.cv_losses_[est.penalty_]:.6f} |"
        )
    gap = np.max(np.abs(fitted["full"].predict_proba(M) - fitted["difference"].predict_proba(M)))
    print(f"largest difference of the fitted probabilities: {gap:.2e}")


if __name__ == "__main__":
    main()
