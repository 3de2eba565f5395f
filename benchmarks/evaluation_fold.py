"""One evaluation fold of Own, PubSub-ML and PubSub-ML*: the shared own model cross-fitted once.

``evaluate_fold`` (pubsub-ml.txt §7.3, §7.4; ``docs/evaluation.md``) keeps the own model's
cross-fit in a ``CrossFitStore`` for the fold, so the three methods, which share M^s, cross-fit it
once.  The reference, in the same run, scores each method in its own ``evaluate_fold`` call (a
store each: three cross-fits, as every fold ran before).  Both must give the same records to the
last digit, times aside.  Also timed: ``FeatureSchema.validate_frame`` on numeric columns (one
pass over every numeric column) against the per-column path, which the same frame takes when its
columns hold Python objects.  Data: the §8.2.5 Hyperplane consortium (``make_consortium``, 500
rows per site, seed 0), one subscriber, no noisy publishers.  Run::

    .venv/bin/python benchmarks/evaluation_fold.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import timeit

from pubsubml.data import hyperplane_schema
from pubsubml.experiments.pubsub.compared import MethodConfig, Scenario, SimSite, evaluate_fold
from pubsubml.experiments.pubsub.scale.hyperplane import make_consortium

METHODS = ("PubSub-ML", "PubSub-ML*", "Own")


def scenario() -> Scenario:
    pubs, subs = make_consortium(5, 1, 500, seed=0, n_noisy=0)
    return Scenario(
        publishers=[SimSite(p.data.X, p.data.y) for p in pubs],
        subscriber=SimSite(subs[0].data.X, subs[0].data.y),
        schema=hyperplane_schema(),
        task="classification",
        classes=(0, 1),
        metric="accuracy",
    )


def without_times(records: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sc = scenario()
    config = MethodConfig(hidden_layer_sizes=(100, 50), epochs=30)
    times: dict[str, list[float]] = {"one call per method": [], "one call, shared cross-fit": []}
    results: dict[str, list[dict[str, object]]] = {}
    for _ in range(args.repeats):  # alternating, so both see the same machine
        t0 = time.perf_counter()
        apart = [evaluate_fold(sc, seed=0, fold=0, methods=[m], config=config)[0] for m in METHODS]
        times["one call per method"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        together = evaluate_fold(sc, seed=0, fold=0, methods=METHODS, config=config)
        times["one call, shared cross-fit"].append(time.perf_counter() - t0)
        results = {"apart": without_times(apart), "together": without_times(together)}
    same = results["apart"] == results["together"]

    X = sc.subscriber.X.iloc[:400]
    schema = hyperplane_schema()
    as_objects = X.astype(object)
    assert schema.validate_frame(X).equals(schema.validate_frame(as_objects).astype(float))
    frame_ms = {
        "per-column path (object columns)": as_objects,
        "one pass (float64 columns)": X,
    }
    validate = {
        name: 1e3
        * min(timeit.repeat(lambda f=f: schema.validate_frame(f), number=50, repeat=5))
        / 50
        for name, f in frame_ms.items()
    }

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"\nevaluate_fold of {', '.join(METHODS)} (median of {args.repeats}, alternating)\n")
    print("| form | median s | vs one call per method |")
    print("|---|---:|---:|")
    ref = statistics.median(times["one call per method"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {med:.2f} | {med / ref:.2f} |")
    print(f"\nsame records (scores, AUC, ε, own choice, fallback): {same}")
    print("\nFeatureSchema.validate_frame, 400 rows x 10 numeric features (best of 5 x 50)\n")
    print("| path | ms | vs per-column |")
    print("|---|---:|---:|")
    base = validate["per-column path (object columns)"]
    for name, ms in validate.items():
        print(f"| {name} | {ms:.3f} | {ms / base:.2f} |")
    if not same:
        raise SystemExit("the shared cross-fit changed a record")


if __name__ == "__main__":
    main()
