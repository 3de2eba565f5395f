"""Experiments of the asynchronous DP learner: Fig. 2/8, Fig. 4/5/10 and Fig. 7; the catalog.

Each is an :class:`~pubsubml.experiments.base.Experiment` with a ``smoke`` configuration (seconds,
run by the tests) and a full one (the paper's T = 1,000 and 100 runs where it uses them).  None is
cross-validated: a grid setting is one task (and ε) measured once per seed, its replicate runs
vectorized with :func:`pubsubml.experiments.async_dp.tasks.run_replicas`.  Fig. 6 and the
calibration of the forecast are in :mod:`.collaboration`; :data:`EXPERIMENTS` lists all five.

References
----------
async-dp-cost-of-privacy.txt §5 (Fig. 2, 4, 5, 6, 7, 8, 10), §6.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from pubsubml.experiments.async_dp.collaboration import CALIBRATE, MAP
from pubsubml.experiments.async_dp.reporting import (
    NO_FOLDS,
    NONPRIVATE_EPSILON,
    figure_layout,
    mean_over_seeds,
    noise_regime,
    real_task,
    run_sizes,
    run_task,
    seeds_note,
)
from pubsubml.experiments.async_dp.tasks import synthetic_task
from pubsubml.experiments.base import Experiment, RunOptions
from pubsubml.experiments.reports import write_results
from pubsubml.experiments.runner import Record
from pubsubml.methods.async_dp.cost import fit_cost_of_privacy, loglog_slope, privacy_term

__all__ = ["BANDS", "EXPERIMENTS", "OWNERS", "SCALING", "bands_fold", "owners_fold", "scaling_fold"]

_SMALL_CLIP = 1.0  # a clipping norm far below Ξ of Assumption 2 (60 for the synthetic data)
_CLIPPED = f"synthetic, Ξ={_SMALL_CLIP:g} (clipped)"
_BAND_CASES = (("synthetic", (1.0, 10.0, 100.0)), ("diamonds-by-color", (10.0, 100.0, 1000.0)))
_BAND_COLUMNS = ["dataset", "n_owners", "epsilon", "iteration", "psi_p25", "psi_median", "psi_p75"]


def _bands_grid(opts: RunOptions) -> list[dict[str, Any]]:
    return [
        {"dataset": dataset, "epsilon": eps, "smoke": opts.smoke}
        for dataset, epsilons in _BAND_CASES
        for eps in epsilons
    ]


def bands_fold(seed: int, fold: int, *, dataset: str, epsilon: float, smoke: bool) -> list[Record]:
    """Fig. 2/8 (§5.1.2, §5.2.2): the 25 %, 50 % and 75 % quantiles of ψ(θ_L,k) over runs per k.

    Parameters
    ----------
    seed : int
        Seed of the data (synthetic owners, or the public reference slice) and of the runs.
    fold : int
        Always 0 (no folds).
    dataset : str
        ``"synthetic"`` (N = 3 owners) or a name of
        :data:`~pubsubml.experiments.async_dp.reporting.REAL_TASKS`.
    epsilon : float
        Every owner's budget ε_i.
    smoke : bool
        Smoke sizes (T = 60, 6 runs, 2,000 synthetic rows per owner instead of 250,000).

    Returns
    -------
    list of dict
        One record per iteration k: ``n_owners, iteration, psi_p25, psi_median, psi_p75``.
    """
    if dataset == "synthetic":
        task = synthetic_task(3, 2_000 if smoke else 250_000, seed=seed)
    else:
        task = real_task(dataset, seed)
    path = run_task(task, epsilon, seed=seed, smoke=smoke, record_path=True).path
    assert path is not None
    q25, q50, q75 = np.percentile(path, [25, 50, 75], axis=1)
    return [
        {"n_owners": len(task.parts), "iteration": k + 1, "psi_p25": q25[k],
         "psi_median": q50[k], "psi_p75": q75[k]}
        for k in range(len(path))
    ]  # fmt: skip


def _bands_report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """Medians over seeds of each seed's quantile curves; the table after T iterations."""
    curves = table[["seed", *_BAND_COLUMNS]]
    bands = curves.groupby(_BAND_COLUMNS[:4], sort=False)[_BAND_COLUMNS[4:]].median().reset_index()
    sizes = run_sizes(opts.smoke)
    last = bands[bands.iteration == sizes.horizon].drop(columns="iteration")
    return write_results(
        "async-dp-bands",
        out_dir,
        table=curves,
        summary=last,
        figure=_bands_figure(bands, opts.smoke),
        title="ψ after T iterations (Fig. 2/8)",
        notes=f"{sizes.replicas} runs, T={sizes.horizon}; full curves in the CSV."
        + seeds_note(opts.seeds, "the median over seeds of each quantile"),
        digits=None,
    )


def _bands_figure(bands: pd.DataFrame, smoke: bool) -> Figure:
    datasets = list(bands.dataset.unique())
    columns = int(bands.groupby("dataset").epsilon.nunique().max())
    fig = Figure(figsize=(12, 6.5), layout=figure_layout(smoke))
    axes = fig.subplots(len(datasets), columns, sharey="row", squeeze=False)
    for r, dataset in enumerate(datasets):
        for c, (eps, curve) in enumerate(bands[bands.dataset == dataset].groupby("epsilon")):
            ax = axes[r, c]
            ax.fill_between(curve.iteration, curve.psi_p25, curve.psi_p75, color="0.7",
                            label="25–75 %")  # fmt: skip
            ax.plot(curve.iteration, curve.psi_median, color="k", label="median")
            ax.set_yscale("log")
            n_owners = int(curve.n_owners.iloc[0])
            ax.set_title(f"{dataset} (N={n_owners}), ε={eps:g}", fontsize=9)
            ax.set_xlabel("iteration k")
        axes[r, 0].set_ylabel("relative fitness ψ(θ_L,k)")
    axes[0, 0].legend()
    return fig


def _scaling_sizes(smoke: bool) -> tuple[list[int], list[float], list[float]]:
    """n_i of the synthetic sweep, its ε, and the ε of the other sweeps (Fig. 4/5/10)."""
    if smoke:
        return [1_000, 3_000], [10.0, 100.0], [100.0]
    return (
        [3_162, 10_000, 31_623, 100_000, 316_228],
        [0.3, 1, 3, 10, 30, 100, 300, 1000, 3000],
        [0.3, 1, 3, 10, 30, 100, 300, 1000, 3000, 10000],
    )


def _scaling_grid(opts: RunOptions) -> list[dict[str, Any]]:
    sizes, _, _ = _scaling_sizes(opts.smoke)
    sweeps = [("synthetic", n) for n in sizes] + [("diamonds-by-color", 0), (_CLIPPED, sizes[1])]
    return [{"dataset": d, "owner_records": n, "smoke": opts.smoke} for d, n in sweeps]


def scaling_fold(
    seed: int, fold: int, *, dataset: str, owner_records: int, smoke: bool
) -> list[Record]:
    """Fig. 4/5/10 (§5.1.2, Theorem 2): mean ψ after T per ε, and of the non-private run.

    Parameters
    ----------
    seed, fold : int
        Seed of data and runs; the fold is always 0.
    dataset : str
        ``"synthetic"`` (N = 3), the clipped synthetic sweep (Ξ = 1) or a real task's name.
    owner_records : int
        n_i of each synthetic owner (0 for a real data set, whose owners have their own sizes).
    smoke : bool
        Smoke sizes.

    Returns
    -------
    list of dict
        One record per ε: ``n_owners, n_records`` (mean n_i), ``epsilon, psi_mean,
        psi_nonprivate, S`` (S = Σ_i 1/(n²ε_i²), Eq. 10).
    """
    _, synthetic_eps, other_eps = _scaling_sizes(smoke)
    clip = _SMALL_CLIP if dataset == _CLIPPED else None
    if dataset in ("synthetic", _CLIPPED):
        task = synthetic_task(3, owner_records, seed=seed)
    else:
        task = real_task(dataset, seed)
    floor = float(
        run_task(task, NONPRIVATE_EPSILON, seed=seed, smoke=smoke, clip_norm=clip).psi.mean()
    )
    records = []
    for eps in synthetic_eps if dataset == "synthetic" else other_eps:
        res = run_task(task, float(eps), seed=seed, smoke=smoke, clip_norm=clip)
        records.append(
            {"n_owners": len(task.parts), "n_records": int(np.mean(task.n_records)),
             "epsilon": float(eps), "psi_mean": float(res.psi.mean()), "psi_nonprivate": floor,
             "S": privacy_term(task.n_records, float(eps))}
        )  # fmt: skip
    return records


def _scaling_report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """Fit Eq. 11 and the log-log slopes per data set on the seed means of the noise regime."""
    frame = mean_over_seeds(
        table,
        ["dataset", "owner_records", "n_owners", "epsilon"],
        ["n_records", "psi_mean", "psi_nonprivate", "S"],
        se=["psi_mean"],
    )
    frame["noise_regime"] = noise_regime(frame.psi_mean.to_numpy(), frame.psi_nonprivate.to_numpy())
    fits = _scaling_fits(frame)
    frame["bound_fit"] = _bound_fit(frame, fits)
    columns = ["dataset", "n_owners", "n_records", "epsilon", "psi_mean", "psi_nonprivate", "S"]
    raw = table[["seed", *columns]].copy()
    raw["noise_regime"] = noise_regime(raw.psi_mean.to_numpy(), raw.psi_nonprivate.to_numpy())
    raw["bound_fit"] = _bound_fit(raw, fits)
    order = dict.fromkeys([*columns[:4], *frame.columns])  # the table's columns first
    summary = frame[[c for c in order if c != "owner_records"]]
    fig = Figure(figsize=(12, 4.2), layout=figure_layout(opts.smoke))
    _plot_scaling(frame, fig.subplots(1, 3))
    sizes = run_sizes(opts.smoke)
    note = seeds_note(opts.seeds)
    written = write_results(
        "async-dp-scaling",
        out_dir,
        table=raw,
        summary=summary,
        figure=fig,
        title="Mean ψ after T vs n and ε (Fig. 4/5/10)",
        notes=f"{sizes.replicas} runs, T={sizes.horizon}. S = Σ_i 1/(n²ε_i²)." + note,
        digits=None,
    )
    return written + write_results(
        "async-dp-scaling-fit",
        out_dir,
        table=fits,
        summary=fits,
        title="Fitted Eq. 11 and log-log slopes",
        notes="Fit and slopes on the noise regime: 10·ψ(non-private) < ψ < 1."
        + (f" Fitted on the means over {opts.seeds} seeds." if opts.seeds > 1 else ""),
        digits=None,
    )


def _scaling_fits(frame: pd.DataFrame) -> pd.DataFrame:
    """c̄1, c̄2 of Eq. 11 and the log-log slopes of every data set, on its noise regime."""
    rows = []
    for name, group in frame.groupby("dataset", sort=False):
        sel = group[group.noise_regime]
        c1, c2 = fit_cost_of_privacy(sel.S, sel.psi_mean) if len(sel) >= 2 else (math.nan, math.nan)
        rows.append(
            {"dataset": name, "c1_bar": c1, "c2_bar": c2, **_slopes(sel), "points_fitted": len(sel)}
        )
    return pd.DataFrame(rows)


def _bound_fit(frame: pd.DataFrame, fits: pd.DataFrame) -> np.ndarray:
    """c̄1√S + c̄2 S with the constants fitted for each row's data set."""
    constants = fits.set_index("dataset")
    c1 = constants.c1_bar.reindex(frame.dataset).to_numpy()
    c2 = constants.c2_bar.reindex(frame.dataset).to_numpy()
    return np.asarray(c1 * np.sqrt(frame.S.to_numpy()) + c2 * frame.S.to_numpy(), dtype=float)


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


def _owners_grid(opts: RunOptions) -> list[dict[str, Any]]:
    datasets = ["diamonds-by-color", "doctorcontacts-by-health"]
    datasets += [] if opts.smoke else ["vietnami-by-commune"]
    epsilons = [100.0] if opts.smoke else [10.0, 100.0, 1000.0]
    return [{"dataset": d, "epsilon": e, "smoke": opts.smoke} for d in datasets for e in epsilons]


def owners_fold(seed: int, fold: int, *, dataset: str, epsilon: float, smoke: bool) -> list[Record]:
    """Fig. 7 (§5.2.2): ψ of every owner's non-private model alone vs ψ of the private collaboration.

    Parameters
    ----------
    seed, fold : int
        Seed of the public reference slice and of the runs (up to 20); the fold is always 0.
    dataset : str
        A name of :data:`~pubsubml.experiments.async_dp.reporting.REAL_TASKS`.
    epsilon : float
        Every owner's budget ε_i.
    smoke : bool
        Smoke sizes.

    Returns
    -------
    list of dict
        One record per owner: ``owner, n_records, psi_alone, psi_collab, benefits``.
    """
    task = real_task(dataset, seed)
    res = run_task(
        task, epsilon, seed=seed, smoke=smoke, replicas=min(run_sizes(smoke).replicas, 20)
    )
    collab = float(res.psi.mean())
    return [
        {"owner": name, "n_records": size, "psi_alone": float(alone), "psi_collab": collab,
         "benefits": bool(collab < alone)}
        for name, size, alone in zip(task.owner_names, task.n_records, res.psi_alone, strict=True)
    ]  # fmt: skip


def _owners_report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """Per seed, how many owners gain; the mean over seeds in the Markdown."""
    columns = ["dataset", "owner", "n_records", "epsilon", "psi_alone", "psi_collab", "benefits"]
    detail = table[["seed", *columns]]
    per_seed = detail.groupby(["seed", "dataset", "epsilon"], sort=False, as_index=False).agg(
        owners=("owner", "size"), benefit=("benefits", "sum"), psi_collab=("psi_collab", "first")
    )
    summary = mean_over_seeds(
        per_seed,
        ["dataset", "epsilon"],
        ["owners", "benefit", "psi_collab"],
        se=["benefit", "psi_collab"],
    )
    written = write_results(
        "async-dp-owners",
        out_dir,
        table=per_seed,
        summary=summary,
        figure=_owners_figure(detail, summary, opts.smoke),
        title="Owners that gain from collaborating (Fig. 7)",
        notes="Per-owner rows in async-dp-owners-detail.csv." + seeds_note(opts.seeds),
        digits=None,
    )
    return written + write_results(
        "async-dp-owners-detail",
        out_dir,
        table=detail,
        title="Owners that gain from collaborating (Fig. 7), per owner",
        notes="ψ of each owner's non-private model alone (`psi_alone`) and of the private "
        "collaboration (`psi_collab`) per seed and ε; `benefits`: psi_collab < psi_alone.  "
        "Counts in async-dp-owners.md.",
    )


def _owners_figure(detail: pd.DataFrame, summary: pd.DataFrame, smoke: bool) -> Figure:
    datasets = list(detail.dataset.unique())
    fig = Figure(figsize=(5 * len(datasets), 4.2), layout=figure_layout(smoke))
    axes = np.atleast_1d(fig.subplots(1, len(datasets)))
    for ax, dataset in zip(axes, datasets, strict=True):
        rows = detail[detail.dataset == dataset]
        alone = rows[rows.epsilon == rows.epsilon.iloc[0]]  # ψ alone does not depend on ε
        ax.loglog(
            alone.n_records, alone.psi_alone, "o", color="k", label="owner alone (non-private)"
        )
        lines = summary[summary.dataset == dataset]
        for style, eps, collab in zip(
            ("-", "--", "-."), lines.epsilon, lines.psi_collab, strict=False
        ):
            ax.axhline(collab, linestyle=style, color="tab:blue", label=f"collaboration, ε={eps:g}")
        n_owners = rows[rows.seed == rows.seed.iloc[0]].owner.nunique()
        ax.set_title(f"{dataset} (N={n_owners})", fontsize=9)
        ax.set_xlabel("owner size n_i")
        ax.set_ylabel("relative fitness ψ")
        ax.legend(fontsize=7)
    return fig


BANDS = Experiment(
    "async-dp-bands",
    "Fig. 2/8 (async-dp §5.1.2, §5.2.2): 25–75 % band and median of ψ(θ_L,k) over runs vs k, three ε.",
    grid=_bands_grid,
    run_fold=bands_fold,
    report=_bands_report,
    **NO_FOLDS,
)
SCALING = Experiment(
    "async-dp-scaling",
    "Fig. 4/5/10 (async-dp §5.1.2): mean ψ after T vs n_i and ε, fitted Eq. 11, log-log slopes.",
    grid=_scaling_grid,
    run_fold=scaling_fold,
    report=_scaling_report,
    **NO_FOLDS,
)
OWNERS = Experiment(
    "async-dp-owners",
    "Fig. 7 (async-dp §5.2.2): which owners of real data sets gain from collaborating, per ε.",
    grid=_owners_grid,
    run_fold=owners_fold,
    report=_owners_report,
    **NO_FOLDS,
)

#: The five experiments of async-dp-cost-of-privacy.txt §5–6, one ``pubsubml bench`` command each.
EXPERIMENTS: tuple[Experiment, ...] = (BANDS, SCALING, OWNERS, MAP, CALIBRATE)
