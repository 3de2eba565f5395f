"""DP-SGD speed: the pubsubml engine against Opacus 1.6, one model and a thousand at once.

1. One PubSub-ML network (10-100-50-2, tanh, Adam; pubsub-ml.txt §7.2 Table 4, Hyperplane) trained
   for one epoch on 50,000 rows of river's ``synth.Hyperplane`` with σ = 1, C = 1, expected batch
   100 (Poisson sampling, q = 0.002, 500 steps): the engine's ghost-clipping fast path
   (:func:`train_dp_stacked` with S = 1) and its generic ``torch.func`` path (:func:`train_dp`)
   against Opacus' ``PrivacyEngine().make_private`` (hooks, Poisson sampling), timed in the same
   run, in alternating order.  Both runs are the same DP event, accounted by the same accountant.
2. 1,000 sites x 500 rows x 30 epochs (150 steps each) of DP training at once with
   :func:`pubsubml.learners.mlp.fit_many` (encoding, training, accounting), against training the
   sites one by one with Opacus, measured on a few sites and extrapolated (labelled as such).

Each part runs with torch's default intra-op thread count and with one thread (``--threads``).
Timings exclude data generation (river, untimed).  The machine is shared: the 1-minute load
average before and after each part is printed.

Run: ``.venv/bin/python benchmarks/dpsgd_speed.py`` (``--rows``, ``--sites``, ``--site-rows``,
``--epochs``, ``--repeats``, ``--opacus-sites``, ``--threads``).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from pubsubml.data import hyperplane
from pubsubml.learners.mlp import DPMLPClassifier, fit_many
from pubsubml.privacy.accountant import compute_epsilon
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, init_mlp, train_dp, train_dp_stacked
from pubsubml.privacy.events import DPEvent

SIZES = (10, 100, 50, 2)
SIGMA, CLIP, BATCH, LR, DELTA = 1.0, 1.0, 100, 1e-3, 1e-5


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def _opacus_epochs(
    X: torch.Tensor, y: torch.Tensor, epochs: int, seed: int
) -> tuple[nn.Module, float]:
    """Opacus 1.6: hooks, Poisson sampling; returns the model and Opacus' own ε (PRV)."""
    from opacus import PrivacyEngine

    torch.manual_seed(seed)
    model = init_mlp(SIZES, "tanh", torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    loader = DataLoader(TensorDataset(X, y), batch_size=BATCH)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns that its secure RNG is off (as for ours)
        engine = PrivacyEngine()
        model, optimizer, loader = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=SIGMA,
            max_grad_norm=CLIP,
            poisson_sampling=True,
        )
        loss_fn = nn.CrossEntropyLoss()
        for _ in range(epochs):
            for xb, yb in loader:
                optimizer.zero_grad()
                loss_fn(model(xb), yb).backward()
                optimizer.step()
    return model, float(engine.get_epsilon(DELTA))


def _ours_fast(X: torch.Tensor, y: torch.Tensor, epochs: int, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    stack = MLPStack.init(SIZES, "tanh", [g])
    config = DPSGDConfig(
        noise_multiplier=SIGMA, max_grad_norm=CLIP, batch_size=BATCH, epochs=epochs, lr=LR
    )
    return train_dp_stacked(stack, [X], [y], configs=config, generators=[g])[0].module


def _ours_generic(X: torch.Tensor, y: torch.Tensor, epochs: int, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    module = init_mlp(SIZES, "tanh", g)
    config = DPSGDConfig(
        noise_multiplier=SIGMA, max_grad_norm=CLIP, batch_size=BATCH, epochs=epochs, lr=LR
    )
    train_dp(module, X, y, config=config, generator=g)
    return module


def _accuracy(module: nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((module(X).argmax(1) == y).float().mean())


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def part_one(rows: int, repeats: int) -> None:
    data = hyperplane(rows + 10_000, seed=0)
    Z = torch.from_numpy(data.schema.encode(data.X)).float()
    labels = torch.from_numpy(np.asarray(data.y, dtype=np.int64))
    X, y, X_test, y_test = Z[:rows], labels[:rows], Z[rows:], labels[rows:]
    q = BATCH / rows
    steps = round(1 / q)
    event = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=SIGMA, sample_rate=q, count=steps
    )
    eps_pld = compute_epsilon([event], DELTA)
    runners: dict[str, Callable[[int], object]] = {
        "opacus 1.6 (hooks)": lambda s: _opacus_epochs(X, y, 1, s),
        "pubsubml fast path": lambda s: _ours_fast(X, y, 1, s),
        "pubsubml generic path": lambda s: _ours_generic(X, y, 1, s),
    }
    _ours_generic(X[:500], y[:500], 1, 0)  # warm torch.func up, untimed
    times: dict[str, list[float]] = {k: [] for k in runners}
    last: dict[str, object] = {}
    load_before = _load()
    for r in range(repeats):
        order = list(runners) if r % 2 == 0 else list(reversed(runners))
        for name in order:
            seconds, last[name] = _timed(functools.partial(runners[name], r))
            times[name].append(seconds)
    print(
        f"\n## 1. one network, {rows} rows, 1 epoch ({steps} steps, q={q:g}, σ={SIGMA}, C={CLIP})"
    )
    print(f"threads={torch.get_num_threads()}  load average before/after: {load_before}/{_load()}")
    ref = statistics.median(times["opacus 1.6 (hooks)"])
    print(f"{'engine':24s} {'median s':>9s} {'min s':>7s} {'vs opacus':>9s} {'test acc':>8s}")
    for name, ts in times.items():
        result = last[name]
        module = result[0] if isinstance(result, tuple) else result
        assert isinstance(module, nn.Module)
        med = statistics.median(ts)
        print(
            f"{name:24s} {med:9.3f} {min(ts):7.3f} {med / ref:9.2f} {_accuracy(module, X_test, y_test):8.3f}"
        )
    opacus_eps = last["opacus 1.6 (hooks)"][1]  # type: ignore[index]
    print(f"same DP event for all: {steps} x PoissonSampled(q={q:g}, Gaussian(σ={SIGMA}))")
    print(
        f"ε at δ={DELTA:g}: pubsubml PLD {eps_pld:.4f}; Opacus' own PRV accountant {opacus_eps:.4f}"
    )


def part_two(sites: int, site_rows: int, epochs: int, opacus_sites: int) -> None:
    datasets = [hyperplane(site_rows, seed=1000 + s) for s in range(sites)]
    est = DPMLPClassifier(
        schema=datasets[0].schema,
        classes=datasets[0].classes,
        hidden_layer_sizes=SIZES[1:-1],
        epochs=epochs,
        batch_size=BATCH,
        learning_rate=LR,
        noise_multiplier=SIGMA,
        max_grad_norm=CLIP,
        target_delta=DELTA,
        random_state=0,
    )
    load_before = _load()
    seconds, models = _timed(
        lambda: fit_many(est, [d.X for d in datasets], [d.y for d in datasets])
    )
    load_after = _load()
    assert isinstance(models, list)
    eps = sorted({round(m.epsilon_, 6) for m in models})
    acc = statistics.mean(m.score(d.X, d.y) for m, d in zip(models, datasets, strict=True))
    # Reference: Opacus, one site after another (measured on a few sites, extrapolated).
    encoded = [
        (
            torch.from_numpy(d.schema.encode(d.X)).float(),
            torch.from_numpy(np.asarray(d.y, dtype=np.int64)),
        )
        for d in datasets[:opacus_sites]
    ]
    ref_seconds, _ = _timed(
        lambda: [_opacus_epochs(X, y, epochs, s) for s, (X, y) in enumerate(encoded)]
    )
    ours_seq, _ = _timed(lambda: [_ours_fast(X, y, epochs, s) for s, (X, y) in enumerate(encoded)])
    per_site_ref = ref_seconds / opacus_sites
    print(
        f"\n## 2. {sites} sites x {site_rows} rows x {epochs} epochs ({models[0].steps_} steps each)"
    )
    print(
        f"threads={torch.get_num_threads()}  load average before/after fit_many: {load_before}/{load_after}"
    )
    print(f"{'run':44s} {'seconds':>9s} {'vs opacus':>9s}")
    print(
        f"{'pubsubml fit_many, all sites stacked':44s} {seconds:9.2f} {seconds / (per_site_ref * sites):9.3f}"
    )
    print(
        f"{f'pubsubml one site at a time (x{sites / opacus_sites:g} of {opacus_sites})':44s} "
        f"{ours_seq / opacus_sites * sites:9.2f} {ours_seq / ref_seconds:9.3f}"
    )
    print(
        f"{f'opacus one site at a time (x{sites / opacus_sites:g} of {opacus_sites})':44s} {per_site_ref * sites:9.2f} {1.0:9.3f}"
    )
    print(
        f"per-site ε at δ={DELTA:g} (PLD): {', '.join(f'{e:.4f}' for e in eps)}; mean training accuracy {acc:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--site-rows", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--opacus-sites", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads(), 1])
    parser.add_argument("--parts", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    print(
        f"# DP-SGD speed — {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, python {platform.python_version()}"
    )
    for threads in args.threads:
        torch.set_num_threads(threads)
        if 1 in args.parts:
            part_one(args.rows, args.repeats)
        if 2 in args.parts:
            part_two(args.sites, args.site_rows, args.epochs, args.opacus_sites)


if __name__ == "__main__":
    main()
