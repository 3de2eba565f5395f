"""Experiments of the asynchronous DP learner: Fig. 2/8, Fig. 4/5/10, Fig. 6, Fig. 7, calibration.

Each experiment has a ``smoke`` configuration (seconds, run by the tests) and a ``full`` one (the
paper's T = 1,000 and 100 runs where it uses them), and writes ``async-dp-<name>.csv``, ``.md`` and
``.png`` into an output folder.  Replicate runs are vectorized with
:func:`pubsubml.experiments.async_dp.tasks.run_replicas`.

References
----------
async-dp-cost-of-privacy.txt §5 (Fig. 2, 4, 5, 6, 7, 8, 10).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from pubsubml.experiments.async_dp.collaboration import run_calibration, run_map
from pubsubml.experiments.async_dp.reporting import (
    NONPRIVATE_EPSILON,
    AsyncDPExperimentConfig,
    figure_layout,
    noise_regime,
    run_task,
    write_table,
)
from pubsubml.experiments.async_dp.tasks import (
    RegressionTask,
    diamonds_task,
    doctor_contacts_task,
    synthetic_task,
    vietnam_task,
)
from pubsubml.methods.async_dp.cost import fit_cost_of_privacy, loglog_slope, privacy_term

__all__ = [
    "EXPERIMENTS",
    "AsyncDPExperimentConfig",
    "run_bands",
    "run_calibration",
    "run_map",
    "run_owners",
    "run_scaling",
]

_SMALL_CLIP = 1.0  # a clipping norm far below Ξ of Assumption 2 (60 for the synthetic data)


def run_bands(cfg: AsyncDPExperimentConfig, out_dir: Path) -> pd.DataFrame:
    """Fig. 2/8: 25–75 % band and median of ψ(θ_L,k) over runs vs k for three ε."""
    n_synth = 2_000 if cfg.smoke else 250_000
    cases: list[tuple[RegressionTask, tuple[float, ...]]] = [
        (synthetic_task(3, n_synth, seed=cfg.seed), (1.0, 10.0, 100.0)),
        (diamonds_task("color", seed=cfg.seed), (10.0, 100.0, 1000.0)),
    ]
    rows = []
    fig = Figure(figsize=(12, 6.5), layout=figure_layout(cfg))
    axes = fig.subplots(len(cases), 3, sharey="row")
    for r, (task, epsilons) in enumerate(cases):
        for c, eps in enumerate(epsilons):
            res = run_task(task, eps, cfg, record_path=True)
            assert res.path is not None
            q25, q50, q75 = np.percentile(res.path, [25, 50, 75], axis=1)
            k = np.arange(1, cfg.horizon + 1)
            for i in range(cfg.horizon):
                rows.append((task.name, len(task.parts), eps, i + 1, q25[i], q50[i], q75[i]))
            ax = axes[r, c]
            ax.fill_between(k, q25, q75, color="0.7", label="25–75 %")
            ax.plot(k, q50, color="k", label="median")
            ax.set_yscale("log")
            ax.set_title(f"{task.name} (N={len(task.parts)}), ε={eps:g}", fontsize=9)
            ax.set_xlabel("iteration k")
        axes[r, 0].set_ylabel("relative fitness ψ(θ_L,k)")
    axes[0, 0].legend()
    frame = pd.DataFrame(
        rows,
        columns=["dataset", "n_owners", "epsilon", "iteration", "psi_p25", "psi_median", "psi_p75"],
    )
    fig.savefig(out_dir / "async-dp-bands.png", dpi=110)
    last = frame[frame.iteration == cfg.horizon].drop(columns="iteration")
    write_table(
        last,
        out_dir / "async-dp-bands.csv",
        title="ψ after T iterations (Fig. 2/8)",
        notes=f"{cfg.replicas} runs, T={cfg.horizon}; full curves in the CSV.",
    )
    frame.to_csv(out_dir / "async-dp-bands.csv", index=False)
    return frame


def run_scaling(cfg: AsyncDPExperimentConfig, out_dir: Path) -> pd.DataFrame:
    """Fig. 4/5/10: mean ψ after T vs owner size n and vs ε, with the fitted Eq. 11 and slopes."""
    sizes = [1_000, 3_000] if cfg.smoke else [3_162, 10_000, 31_623, 100_000, 316_228]
    epsilons = [10.0, 100.0] if cfg.smoke else [0.3, 1, 3, 10, 30, 100, 300, 1000, 3000]
    rows = []
    for n in sizes:
        task = synthetic_task(3, n, seed=cfg.seed)
        floor = float(run_task(task, NONPRIVATE_EPSILON, cfg).psi.mean())
        for eps in epsilons:
            res = run_task(task, float(eps), cfg)
            rows.append(("synthetic", 3, n, float(eps), float(res.psi.mean()), floor))
    real = diamonds_task("color", seed=cfg.seed)
    clipped = synthetic_task(3, sizes[1], seed=cfg.seed)
    sweeps = [
        (real.name, real, None),
        (f"synthetic, Ξ={_SMALL_CLIP:g} (clipped)", clipped, _SMALL_CLIP),
    ]
    for label, task, clip in sweeps:
        floor = float(run_task(task, NONPRIVATE_EPSILON, cfg, clip_norm=clip).psi.mean())
        for eps in [100.0] if cfg.smoke else [0.3, 1, 3, 10, 30, 100, 300, 1000, 3000, 10000]:
            res = run_task(task, float(eps), cfg, clip_norm=clip)
            size = int(np.mean(task.n_records))
            rows.append((label, len(task.parts), size, float(eps), float(res.psi.mean()), floor))
    frame = pd.DataFrame(
        rows, columns=["dataset", "n_owners", "n_records", "epsilon", "psi_mean", "psi_nonprivate"]
    )
    totals = {real.name: real.n_records, sweeps[1][0]: clipped.n_records}
    frame["S"] = [
        privacy_term(totals.get(d, [n] * k), e)
        for d, k, n, e in zip(
            frame.dataset, frame.n_owners, frame.n_records, frame.epsilon, strict=True
        )
    ]
    frame["noise_regime"] = noise_regime(frame.psi_mean.to_numpy(), frame.psi_nonprivate.to_numpy())
    summary, fig = [], Figure(figsize=(12, 4.2), layout=figure_layout(cfg))
    axes = fig.subplots(1, 3)
    for name, group in frame.groupby("dataset", sort=False):
        sel = group[group.noise_regime]
        c1, c2 = fit_cost_of_privacy(sel.S, sel.psi_mean) if len(sel) >= 2 else (math.nan, math.nan)
        bound = c1 * np.sqrt(group.S) + c2 * group.S
        frame.loc[group.index, "bound_fit"] = bound
        slopes = _slopes(sel)
        summary.append(
            {"dataset": name, "c1_bar": c1, "c2_bar": c2, **slopes, "points_fitted": len(sel)}
        )
    frame["bound_fit"] = frame["bound_fit"].astype(float)
    _plot_scaling(frame, axes)
    fig.savefig(out_dir / "async-dp-scaling.png", dpi=110)
    fits = pd.DataFrame(summary)
    write_table(
        frame,
        out_dir / "async-dp-scaling.csv",
        title="Mean ψ after T vs n and ε (Fig. 4/5/10)",
        notes=f"{cfg.replicas} runs, T={cfg.horizon}. S = Σ_i 1/(n²ε_i²).",
    )
    write_table(
        fits,
        out_dir / "async-dp-scaling-fit.csv",
        title="Fitted Eq. 11 and log-log slopes",
        notes="Fit and slopes on the noise regime: 10·ψ(non-private) < ψ < 1.",
    )
    return frame


def _slopes(sel: pd.DataFrame) -> dict[str, float]:
    """Median over fixed-ε (fixed-n) lines of the log-log slope of ψ vs n (vs ε)."""
    out: dict[str, float] = {}
    for var, other, key in (
        ("n_records", "epsilon", "slope_vs_n"),
        ("epsilon", "n_records", "slope_vs_epsilon"),
    ):
        found = []
        for _, line in sel.groupby(other):
            if line[var].nunique() >= 2:
                found.append(loglog_slope(line[var], line.psi_mean - line.psi_nonprivate))
        out[key] = float(np.median(found)) if found else math.nan
    return out


def _plot_scaling(frame: pd.DataFrame, axes: Any) -> None:
    synth = frame[frame.dataset == "synthetic"]
    for eps, line in synth.groupby("epsilon"):
        axes[0].loglog(line.n_records, line.psi_mean, "o", label=f"ε={eps:g}")
        axes[0].loglog(line.n_records, line.bound_fit, "-", color=axes[0].lines[-1].get_color())
    for n, line in synth.groupby("n_records"):
        axes[1].loglog(line.epsilon, line.psi_mean, "s", label=f"n_i={n}")
        axes[1].loglog(line.epsilon, line.bound_fit, "-", color=axes[1].lines[-1].get_color())
    for name, line in frame[frame.dataset != "synthetic"].groupby("dataset"):
        axes[2].loglog(line.epsilon, line.psi_mean, "D", label=str(name))
        axes[2].loglog(line.epsilon, line.bound_fit, "-", color=axes[2].lines[-1].get_color())
    titles = ("synthetic, N=3: ψ vs n_i", "synthetic, N=3: ψ vs ε", "other settings: ψ vs ε")
    low, high = float(frame.psi_mean.min()) / 3, float(frame.psi_mean.max()) * 3
    for ax, title, xlabel in zip(axes, titles, ("n_i", "ε", "ε"), strict=True):
        ax.set_title(title + "\n(markers: mean of runs, lines: fitted Eq. 11)", fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("mean ψ(θ_L,T)")
        ax.set_ylim(low, high)  # the fitted lines leave the plot where the box Θ saturates ψ
        ax.legend(fontsize=7)


def run_owners(cfg: AsyncDPExperimentConfig, out_dir: Path) -> pd.DataFrame:
    """Fig. 7: which owners of a real data set gain from the private collaboration, per ε."""
    tasks = [diamonds_task("color", seed=cfg.seed), doctor_contacts_task(seed=cfg.seed)]
    if not cfg.smoke:
        tasks.append(vietnam_task(seed=cfg.seed))
    epsilons = [100.0] if cfg.smoke else [10.0, 100.0, 1000.0]
    rows = []
    fig = Figure(figsize=(5 * len(tasks), 4.2), layout=figure_layout(cfg))
    axes = np.atleast_1d(fig.subplots(1, len(tasks)))
    for ax, task in zip(axes, tasks, strict=True):
        ax.loglog(
            task.n_records,
            run_task(task, NONPRIVATE_EPSILON, cfg, replicas=1).psi_alone,
            "o",
            color="k",
            label="owner alone (non-private)",
        )
        for style, eps in zip(("-", "--", "-."), epsilons, strict=False):
            res = run_task(task, eps, cfg, replicas=min(cfg.replicas, 20))
            collab = float(res.psi.mean())
            ax.axhline(collab, linestyle=style, color="tab:blue", label=f"collaboration, ε={eps:g}")
            for name, size, alone in zip(
                task.owner_names, task.n_records, res.psi_alone, strict=True
            ):
                rows.append(
                    (task.name, name, size, eps, float(alone), collab, bool(collab < alone))
                )
        ax.set_title(f"{task.name} (N={len(task.parts)})", fontsize=9)
        ax.set_xlabel("owner size n_i")
        ax.set_ylabel("relative fitness ψ")
        ax.legend(fontsize=7)
    fig.savefig(out_dir / "async-dp-owners.png", dpi=110)
    frame = pd.DataFrame(
        rows,
        columns=["dataset", "owner", "n_records", "epsilon", "psi_alone", "psi_collab", "benefits"],
    )
    summary = frame.groupby(["dataset", "epsilon"], as_index=False).agg(
        owners=("owner", "size"), benefit=("benefits", "sum"), psi_collab=("psi_collab", "first")
    )
    write_table(
        summary,
        out_dir / "async-dp-owners.csv",
        title="Owners that gain from collaborating (Fig. 7)",
        notes="Per-owner rows in async-dp-owners-detail.csv.",
    )
    frame.to_csv(out_dir / "async-dp-owners-detail.csv", index=False)
    return frame


EXPERIMENTS: dict[str, Callable[[AsyncDPExperimentConfig, Path], Any]] = {
    "async-dp-bands": run_bands,
    "async-dp-calibrate": run_calibration,
    "async-dp-map": run_map,
    "async-dp-owners": run_owners,
    "async-dp-scaling": run_scaling,
}
