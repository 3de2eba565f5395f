"""DP-SGD speed: the pubsubml engine against Opacus 1.6, one model and a thousand at once.

1. One PubSub-ML network (10-100-50-2, tanh, Adam; pubsub-ml.txt §7.2 Table 4, Hyperplane) trained
   for one epoch on 50,000 rows of river's ``synth.Hyperplane`` with σ = 1, C = 1, expected batch
   100 (Poisson sampling, q = 0.002, 500 steps), timed in the same run, in alternating order:

   * the engine's ghost-clipping fast path (:func:`train_dp_stacked` with S = 1) with secure noise
     (``noise=[SecureNoise()]``: what a released model uses) and with seeded noise (drawn from a
     ``torch.Generator``: simulations only);
   * its generic ``torch.func`` path (:func:`train_dp`) with secure noise;
   * Opacus' ``PrivacyEngine().make_private`` (Poisson sampling) in each of its per-sample-gradient
     modes, ``grad_sample_mode`` = "hooks", "functorch", "ew" (expanded weights) and "ghost"
     (ghost clipping; ``make_private`` then also takes the criterion and returns it wrapped).
     A mode that cannot train this network is reported as not supported instead of timed.

   Ratios are to Opacus' fastest mode in the same run; the target for the fast path with secure
   noise is ≤ 0.45 of it.  Every run is the same DP event, accounted by the same accountant.  The
   noise sources are also timed alone (500 noise vectors of the network's 6,252 parameters and
   500 Poisson masks over 50,000 rows).
2. 1,000 sites x 500 rows x 30 epochs (150 steps each) of DP training at once with
   :func:`pubsubml.learners.mlp.fit_many` (encoding, training, accounting), with its default secure
   noise and, for comparison, with ``noise_seed=0``, against training the sites one by one with
   Opacus (each mode) and with the fast path, measured on a few sites and extrapolated (labelled
   as such).

Opacus runs without ``secure_mode``: ``PrivacyEngine(secure_mode=True)`` needs ``torchcsprng``,
which is not installable here (the package index offers no distribution of it; its last release,
0.2.1 of 2021, was built for torch 1.8).  So Opacus draws its Poisson masks and noise from torch's
default generator, without secure mode's cryptographic generator and its four Gaussian draws per
noise value (``opacus/optimizers/optimizer.py``, ``_generate_noise``): a conservative comparison
for pubsubml's secure rows.

Each part runs with torch's default intra-op thread count and with one thread (``--threads``).
Timings exclude data generation (river) and an untimed warm-up of every engine.
The machine is shared: the 1-minute load average before and after each part is printed.

Run: ``.venv/bin/python benchmarks/dpsgd_speed.py`` (``--rows``, ``--sites``, ``--site-rows``,
``--epochs``, ``--repeats``, ``--opacus-sites``, ``--threads``, ``--parts``).
"""

from __future__ import annotations

import argparse
import functools
import math
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
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, init_mlp, train_dp, train_dp_stacked
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.noise import NoiseSource, SecureNoise, SeededNoise

SIZES = (10, 100, 50, 2)
SIGMA, CLIP, BATCH, LR, DELTA = 1.0, 1.0, 100, 1e-3, 1e-5
OPACUS_MODES = ("hooks", "functorch", "ew", "ghost")  # make_private's grad_sample_mode
FAST_SECURE = "pubsubml fast path, secure noise"
TARGET = 0.45  # fast path with secure noise / Opacus' fastest mode


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def _opacus_epochs(
    X: torch.Tensor, y: torch.Tensor, epochs: int, seed: int, mode: str = "hooks"
) -> tuple[nn.Module, float]:
    """Opacus 1.6 in per-sample-gradient ``mode``, Poisson sampling; the trained network and ε (PRV).

    ``mode`` is ``make_private``'s ``grad_sample_mode``.  Ghost clipping ("ghost") takes the
    criterion in ``make_private`` and returns it wrapped (``DPLossFastGradientClipping``): its
    ``backward()`` runs Opacus' two backward passes.  ``secure_mode`` stays off (module notes).
    """
    from opacus import PrivacyEngine

    torch.manual_seed(seed)
    model = init_mlp(SIZES, "tanh", torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    loader = DataLoader(TensorDataset(X, y), batch_size=BATCH)
    criterion: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.CrossEntropyLoss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns that its secure RNG is off
        engine = PrivacyEngine()
        private = engine.make_private(
            module=model,
            optimizer=optimizer,
            criterion=criterion,
            data_loader=loader,
            noise_multiplier=SIGMA,
            max_grad_norm=CLIP,
            poisson_sampling=True,
            grad_sample_mode=mode,
        )
        if mode == "ghost":
            wrapped, optimizer, criterion, loader = private
        else:
            wrapped, optimizer, loader = private
        for _ in range(epochs):
            for xb, yb in loader:
                optimizer.zero_grad()
                criterion(wrapped(xb), yb).backward()
                optimizer.step()
    return getattr(wrapped, "_module", model), float(engine.get_epsilon(DELTA))


def _config(epochs: int) -> DPSGDConfig:
    return DPSGDConfig(
        noise_multiplier=SIGMA, max_grad_norm=CLIP, batch_size=BATCH, epochs=epochs, lr=LR
    )


def _ours_fast(
    X: torch.Tensor, y: torch.Tensor, epochs: int, seed: int, *, secure: bool = True
) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    stack = MLPStack.init(SIZES, "tanh", [g])
    noise = [SecureNoise()] if secure else None  # None: seeded draws from ``g``
    results = train_dp_stacked(
        stack, [X], [y], configs=_config(epochs), generators=[g], noise=noise
    )
    return results[0].module


def _ours_generic(
    X: torch.Tensor, y: torch.Tensor, epochs: int, seed: int, *, secure: bool = True
) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    module = init_mlp(SIZES, "tanh", g)
    noise = SecureNoise() if secure else None
    train_dp(module, X, y, config=_config(epochs), generator=g, noise=noise)
    return module


def _accuracy(module: nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((module(X).argmax(1) == y).float().mean())


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _module_of(result: object) -> nn.Module:
    module = result[0] if isinstance(result, tuple) else result
    assert isinstance(module, nn.Module)
    return module


def _reason(error: Exception) -> str:
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:70]}"


def _try_modes(warm_up: dict[str, Callable[[], object]]) -> dict[str, str]:
    """Run each runner once on a small slice, untimed (warm-up); the reasons of those that fail."""
    unsupported: dict[str, str] = {}
    for name, fn in warm_up.items():
        try:
            fn()
        except Exception as error:  # any failure: this engine cannot train the network
            unsupported[name] = _reason(error)
    return unsupported


def _repeat(times: int, fn: Callable[..., object], *args: object) -> None:
    for _ in range(times):
        fn(*args)


def _noise_draws(rows: int, q: float, steps: int) -> None:
    """Time the noise sources alone: ``steps`` Poisson masks over ``rows`` and noise vectors of P."""
    n_params = sum(p.numel() for p in init_mlp(SIZES, "tanh", torch.Generator()).parameters())
    out = torch.empty(n_params)
    sources: tuple[tuple[str, NoiseSource], ...] = (
        ("secure (SecureNoise)", SecureNoise()),
        ("seeded (SeededNoise)", SeededNoise(torch.Generator().manual_seed(0))),
    )
    for label, source in sources:
        normal, _ = _timed(functools.partial(_repeat, steps, source.normal_, out))
        mask, _ = _timed(functools.partial(_repeat, steps, source.poisson_mask, rows, q))
        print(
            f"noise draws alone, {label}: {steps} x normal_({n_params}) {normal:.3f} s, "
            f"{steps} x poisson_mask({rows}, {q:g}) {mask:.3f} s"
        )


def _runners(X: torch.Tensor, y: torch.Tensor) -> dict[str, Callable[[int], object]]:
    """One epoch on (X, y) for every engine, by name; each takes the repeat's seed."""
    runners: dict[str, Callable[[int], object]] = {
        FAST_SECURE: functools.partial(_ours_fast, X, y, 1, secure=True),
        "pubsubml fast path, seeded noise": functools.partial(_ours_fast, X, y, 1, secure=False),
        "pubsubml generic path, secure noise": functools.partial(
            _ours_generic, X, y, 1, secure=True
        ),
    }
    for mode in OPACUS_MODES:
        runners[f"opacus 1.6 {mode}"] = functools.partial(_opacus_epochs, X, y, 1, mode=mode)
    return runners


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
    runners = _runners(X, y)
    opacus = [name for name in runners if name.startswith("opacus")]
    # Warm-up on 500 rows, untimed: torch.func's and Opacus' first calls, and which modes train.
    small = _runners(X[:500], y[:500])
    unsupported = _try_modes({name: functools.partial(fn, 0) for name, fn in small.items()})
    times: dict[str, list[float]] = {k: [] for k in runners}
    last: dict[str, object] = {}
    load_before = _load()
    for r in range(repeats):
        order = list(runners) if r % 2 == 0 else list(reversed(runners))
        for name in order:
            if name in unsupported:
                continue
            try:
                seconds, last[name] = _timed(functools.partial(runners[name], r))
            except Exception as error:  # reported in the table
                unsupported[name] = _reason(error)
                continue
            times[name].append(seconds)
    load_after = _load()
    timed = {name: ts for name, ts in times.items() if name not in unsupported}
    print(
        f"\n## 1. one network, {rows} rows, 1 epoch ({steps} steps, q={q:g}, σ={SIGMA}, C={CLIP})"
    )
    print(
        f"threads={torch.get_num_threads()}  load average before/after: {load_before}/{load_after}"
    )
    opacus_medians = {n: statistics.median(timed[n]) for n in opacus if n in timed}
    fastest = min(opacus_medians, key=opacus_medians.__getitem__) if opacus_medians else None
    ref = opacus_medians[fastest] if fastest else float("nan")
    print(
        f"{'engine':38s} {'median s':>9s} {'min s':>7s} {'vs fastest opacus':>17s} {'test acc':>8s}"
    )
    for name in runners:
        if name in unsupported:
            verdict = "not supported" if name in opacus else "FAILED"
            print(f"{name:38s} {verdict}: {unsupported[name]}")
            continue
        ts, module = timed[name], _module_of(last[name])
        med = statistics.median(ts)
        print(
            f"{name:38s} {med:9.3f} {min(ts):7.3f} {med / ref:17.2f} "
            f"{_accuracy(module, X_test, y_test):8.3f}"
        )
    print(f"same DP event for all: {steps} x PoissonSampled(q={q:g}, Gaussian(σ={SIGMA}))")
    if fastest is not None:
        opacus_eps = last[fastest][1]  # type: ignore[index]
        print(
            f"ε at δ={DELTA:g}: pubsubml PLD {eps_pld:.4f}; Opacus' own PRV accountant {opacus_eps:.4f}"
        )
        ratio = statistics.median(timed[FAST_SECURE]) / ref if FAST_SECURE in timed else math.nan
        print(
            f"check: fast path with secure noise / Opacus' fastest mode ({fastest}) = "
            f"{ratio:.2f} (target ≤ {TARGET})  {'met' if ratio <= TARGET else 'MISSED'}"
        )
    _noise_draws(rows, q, steps)


def _opacus_sites(
    encoded: list[tuple[torch.Tensor, torch.Tensor]], epochs: int, mode: str
) -> list[tuple[nn.Module, float]]:
    return [_opacus_epochs(X, y, epochs, s, mode) for s, (X, y) in enumerate(encoded)]


def part_two(sites: int, site_rows: int, epochs: int, opacus_sites: int) -> None:
    datasets = [hyperplane(site_rows, seed=1000 + s) for s in range(sites)]

    def estimator(noise_seed: int | None) -> DPMLPClassifier:
        return DPMLPClassifier(
            schema=datasets[0].schema,
            classes=datasets[0].classes,
            hidden_layer_sizes=SIZES[1:-1],
            epochs=epochs,
            batch_size=BATCH,
            learning_rate=LR,
            noise_multiplier=SIGMA,
            max_grad_norm=CLIP,
            delta=DELTA,
            random_state=0,
            noise_seed=noise_seed,
        )

    Xs, ys = [d.X for d in datasets], [d.y for d in datasets]
    for noise_seed in (None, 0):  # warm-up on 2 sites, untimed: first calls, lazy imports
        fit_many(estimator(noise_seed), Xs[:2], ys[:2])
    load_before = _load()
    seconds, models = _timed(lambda: fit_many(estimator(None), Xs, ys))
    load_after = _load()
    seeded_seconds, _ = _timed(lambda: fit_many(estimator(0), Xs, ys))
    load_seeded = _load()
    assert isinstance(models, list)
    eps = sorted({round(m.epsilon_, 6) for m in models})
    acc = statistics.mean(m.score(d.X, d.y) for m, d in zip(models, datasets, strict=True))
    kinds = sorted({m.noise_ for m in models})
    # References, one site after another, measured on a few sites and extrapolated: Opacus in
    # each per-sample-gradient mode, and our fast path with secure noise.
    encoded = [
        (
            torch.from_numpy(d.schema.encode(d.X)).float(),
            torch.from_numpy(np.asarray(d.y, dtype=np.int64)),
        )
        for d in datasets[:opacus_sites]
    ]
    per_site: dict[str, float] = {}
    for mode in OPACUS_MODES:
        try:
            _opacus_sites(encoded[:1], 1, mode)  # warm-up, untimed
            ref_seconds, _ = _timed(functools.partial(_opacus_sites, encoded, epochs, mode))
        except Exception as error:  # reported below
            print(f"opacus 1.6 {mode}: not supported: {_reason(error)}")
            continue
        per_site[f"opacus 1.6 {mode}"] = ref_seconds / opacus_sites
    _ours_fast(*encoded[0], 1, 0)  # warm-up, untimed
    ours_seq, _ = _timed(lambda: [_ours_fast(X, y, epochs, s) for s, (X, y) in enumerate(encoded)])
    fastest = min(per_site, key=per_site.__getitem__)
    ref = per_site[fastest] * sites
    scale = f"x{sites / opacus_sites:g} of {opacus_sites}"
    print(
        f"\n## 2. {sites} sites x {site_rows} rows x {epochs} epochs ({models[0].steps_} steps each)"
    )
    print(
        f"threads={torch.get_num_threads()}  load average before/after fit_many (secure), "
        f"after fit_many (seeded): {load_before}/{load_after}/{load_seeded}"
    )
    print(f"{'run':58s} {'seconds':>9s} {'vs fastest opacus':>17s}")
    rows = [
        ("pubsubml fit_many, all sites stacked, secure noise", seconds),
        ("pubsubml fit_many, all sites stacked, noise_seed=0", seeded_seconds),
        (
            f"pubsubml fast path, secure, one site at a time ({scale})",
            ours_seq / opacus_sites * sites,
        ),
    ]
    rows += [(f"{name}, one site at a time ({scale})", t * sites) for name, t in per_site.items()]
    for label, total in rows:
        print(f"{label:58s} {total:9.2f} {total / ref:17.3f}")
    print(f"fastest Opacus mode: {fastest}; fit_many noise kinds: {', '.join(kinds)}")
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
