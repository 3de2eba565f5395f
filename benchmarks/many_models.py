"""Load and run 1,001 published models on one frame: ONNX sessions vs stacked safetensors.

A subscriber of a busy channel receives many models and computes m(x) (pubsub-ml.txt §4 Step 3,
Eqn 2) on its customization data.  This benchmark publishes 1,001 PubSub-ML networks
(10-100-50-2, tanh; pubsub-ml.txt §7.2 Table 4, Hyperplane) in both formats, untimed, then times
for each format:

* load: parse the card JSON, verify the Ed25519 signature and the SHA-256 digest, check the privacy
  record, run the format's safety checks and build the runtime (an ONNX Runtime session per model,
  or the numpy layers);
* predict: :func:`pubsubml.artifacts.predict_many` on 2,000 rows that lack one of the 10 features
  (filled from the public default by feature extension): one session run per ONNX model (the
  reference), one batched matmul per layer over stacked safetensors networks.

Run: ``.venv/bin/python benchmarks/many_models.py`` (``--models``, ``--rows``, ``--repeats``).
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.artifacts import (
    PrivacyRecord,
    PublishedModel,
    generate_signing_key,
    key_id,
    make_artifact,
    predict_many,
)
from pubsubml.artifacts.card import MLPArchitecture
from pubsubml.artifacts.onnx_export import mlp_to_onnx
from pubsubml.artifacts.safetensors_codec import mlp_to_safetensors
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import FeatureSchema

SIZES = (10, 100, 50, 2)


def _networks(n_models: int, seed: int) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Random weights with PyTorch's default Linear initialization U(±1/√fan_in)."""
    rng = np.random.default_rng(seed)
    nets = []
    for _ in range(n_models):
        layers = []
        for n_in, n_out in itertools.pairwise(SIZES):
            bound = 1.0 / np.sqrt(n_in)
            layers.append(
                (
                    rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32),
                    rng.uniform(-bound, bound, n_out).astype(np.float32),
                )
            )
        nets.append(layers)
    return nets


def _time(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and process CPU seconds of one call, and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1001)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    # ---- setup (untimed): publish every network in both formats --------------------------
    schema = FeatureSchema.numeric([f"x{i}" for i in range(SIZES[0])], lower=0.0, upper=1.0)
    event = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.01, count=3000
    )
    start = time.perf_counter()
    epsilon = compute_epsilon([event], 1e-5, backend="pld")
    accountant_s = time.perf_counter() - start
    privacy = PrivacyRecord.from_events([event], epsilon=epsilon, delta=1e-5, accountant="pld")
    architecture = MLPArchitecture(
        layer_sizes=list(SIZES), activation="tanh", output_activation="softmax"
    )
    key = generate_signing_key()
    trusted = {key_id(key.public_key()): key.public_key()}
    encoders = {
        "onnx": lambda layers: mlp_to_onnx(layers, activation="tanh", output_activation="softmax"),
        "safetensors": mlp_to_safetensors,
    }
    published: dict[str, list[tuple[str, bytes]]] = {}
    for fmt, encode in encoders.items():
        items = []
        for i, layers in enumerate(_networks(args.models, args.seed)):
            artifact = make_artifact(
                encode(layers),
                format=fmt,  # type: ignore[arg-type]
                publisher=f"site-{i}",
                schema=schema,
                classes=[0, 1],
                privacy=privacy,
                signing_key=key,
                architecture=architecture if fmt == "safetensors" else None,
            )
            items.append((artifact.card.to_json(), artifact.weights))
        published[fmt] = items
    rng = np.random.default_rng(args.seed + 1)
    X = pd.DataFrame(rng.random((args.rows, SIZES[0])), columns=schema.names).drop(columns="x3")

    # ---- timed: the formats alternate, so both see the same machine load ------------------
    load_before = os.getloadavg()[0]
    samples: dict[str, list[tuple[float, float, float, float]]] = {fmt: [] for fmt in published}
    outputs: dict[str, list[np.ndarray]] = {}
    loaded: dict[str, list[PublishedModel]] = {}
    for repeat in range(args.repeats):
        order = list(published) if repeat % 2 == 0 else list(reversed(published))
        for fmt in order:
            load_wall, load_cpu, loaded[fmt] = _time(
                lambda items=published[fmt]: [PublishedModel.load(c, w, trusted) for c, w in items]
            )
            pred_wall, pred_cpu, outputs[fmt] = _time(
                lambda models=loaded[fmt]: predict_many(models, X)
            )
            samples[fmt].append((load_wall, load_cpu, pred_wall, pred_cpu))
    timings = {
        fmt: tuple(statistics.median(column) for column in zip(*runs, strict=True))
        for fmt, runs in samples.items()
    }
    models = loaded["safetensors"]
    sample = models[:100]  # each model extends X on its own: slow, so a sample
    loop_wall, loop_cpu, _ = _time(lambda: [m.predict_proba(X) for m in sample])
    load_after = os.getloadavg()[0]
    max_diff = max(
        float(np.abs(a - b).max())
        for a, b in zip(outputs["onnx"], outputs["safetensors"], strict=True)
    )

    # ---- report -------------------------------------------------------------------------
    print(
        f"{args.models} models {'-'.join(map(str, SIZES))} tanh, {args.rows} rows, feature x3 "
        f"filled by extension; median of {args.repeats}; {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load_before:.1f} → {load_after:.1f}"
    )
    print("wall seconds (process CPU seconds)")
    print("| format | load | predict | total | load per model (ms) |")
    print("|---|---:|---:|---:|---:|")
    labels = {
        "onnx": "ONNX, one session per model (reference)",
        "safetensors": "safetensors, stacked numpy",
    }
    for fmt, (lw, lc, pw, pc) in timings.items():
        print(
            f"| {labels[fmt]} | {lw:.3f} ({lc:.3f}) | {pw:.3f} ({pc:.3f}) | "
            f"{lw + pw:.3f} ({lc + pc:.3f}) | {1000 * lw / args.models:.2f} |"
        )
    print(
        f"| safetensors, predict_proba one model at a time ({len(sample)} models) | — | "
        f"{loop_wall:.3f} ({loop_cpu:.3f}) | — | — |"
    )
    onnx_t, st_t = timings["onnx"], timings["safetensors"]
    print()
    print(
        f"ratio ONNX / safetensors (wall): load {onnx_t[0] / st_t[0]:.2f}x, "
        f"predict {onnx_t[2] / st_t[2]:.2f}x, total {(onnx_t[0] + onnx_t[2]) / (st_t[0] + st_t[2]):.2f}x"
    )
    print(f"safetensors total {st_t[0] + st_t[2]:.3f} s wall (target <= 2 s)")
    print(f"max |ONNX - safetensors| probability difference: {max_diff:.2e}")
    print(f"first (uncached) PLD accountant call, shared by all models: {accountant_s:.3f} s")


if __name__ == "__main__":
    main()
