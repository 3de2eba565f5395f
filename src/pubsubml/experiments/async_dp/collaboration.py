"""Value of collaboration (Fig. 6) and the calibration of the forecast (§6).

``async-dp-map`` measures, on an N × ε grid, whether the private collaboration beats owner 1's
non-private model and draws the boundary forecast by the shipped model; ``async-dp-calibrate`` fits
that model's constants (Eq. 11 with an N^γ dependence, and the alone baseline) and writes its JSON.

References
----------
async-dp-cost-of-privacy.txt §4 (Theorem 2), §5.1.2 (Fig. 6), §6 (forecasts for a data market).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from pubsubml.errors import DataValidationError
from pubsubml.experiments.async_dp.reporting import (
    NO_FOLDS,
    NONPRIVATE_EPSILON,
    figure_layout,
    mean_over_seeds,
    noise_regime,
    run_sizes,
    run_task,
    seeds_note,
)
from pubsubml.experiments.async_dp.tasks import synthetic_task
from pubsubml.experiments.base import Experiment, Param, RunOptions
from pubsubml.experiments.reports import check_out_dir, write_results
from pubsubml.experiments.runner import Record
from pubsubml.methods.async_dp.cost import (
    CostOfPrivacyModel,
    default_model_path,
    fit_alone_fitness,
    fit_cost_of_privacy,
    fit_owner_scaling,
    privacy_term,
)

__all__ = ["CALIBRATE", "MAP", "calibration_fold", "map_fold"]


def _map_sizes(smoke: bool) -> tuple[list[int], list[float], int]:
    """N and ε of the grid of Fig. 6, and n_i of every owner."""
    if smoke:
        return [2, 4], [10.0, 1000.0], 1_000
    return [2, 3, 5, 10, 20, 50, 100], [1, 3, 10, 30, 100, 300, 1000, 3000], 10_000


def _map_grid(opts: RunOptions) -> list[dict[str, Any]]:
    owners, epsilons, _ = _map_sizes(opts.smoke)
    return [
        {"n_owners": n, "epsilon": float(eps), "smoke": opts.smoke}
        for n in owners
        for eps in epsilons
    ]


def map_fold(seed: int, fold: int, *, n_owners: int, epsilon: float, smoke: bool) -> list[Record]:
    """Fig. 6 (§5.1.2): mean ψ of the private collaboration of N owners and ψ of owner 1 alone.

    Parameters
    ----------
    seed, fold : int
        Seed of the synthetic owners and of the runs (up to 20); the fold is always 0.
    n_owners : int
        N, every owner holding n_i = 10,000 records (1,000 at smoke size).
    epsilon : float
        Every owner's budget ε_i.
    smoke : bool
        Smoke sizes.

    Returns
    -------
    list of dict
        One record: ``n_records, psi_collab, psi_alone_owner1, pays``.
    """
    n_records = _map_sizes(smoke)[2]
    task = synthetic_task(n_owners, n_records, seed=seed)
    replicas = min(run_sizes(smoke).replicas, 20)
    res = run_task(task, epsilon, seed=seed, smoke=smoke, replicas=replicas)
    collab, alone = float(res.psi.mean()), float(res.psi_alone[0])
    return [
        {"n_records": n_records, "psi_collab": collab, "psi_alone_owner1": alone,
         "pays": bool(res.psi.mean() < res.psi_alone[0])}
    ]  # fmt: skip


def _forecast_pays(frame: pd.DataFrame, model: CostOfPrivacyModel | None) -> list[bool | None]:
    """Whether the forecast says the collaboration pays, per row (``None`` without a model)."""
    if model is None:
        return [None] * len(frame)
    return [
        model.forecast(n_owners=int(n), n_records=int(r), epsilon=float(e)).pays
        for n, r, e in zip(frame.n_owners, frame.n_records, frame.epsilon, strict=True)
    ]


def _map_report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """The measured map (means over seeds) and the boundary forecast by the shipped model."""
    try:
        model: CostOfPrivacyModel | None = CostOfPrivacyModel.load_default()
    except DataValidationError:
        model = None
    columns = ["n_owners", "n_records", "epsilon", "psi_collab", "psi_alone_owner1", "pays"]
    raw = table[["seed", *columns]].copy()
    raw["forecast_pays"] = _forecast_pays(raw, model)
    summary = mean_over_seeds(
        table, columns[:3], ["psi_collab", "psi_alone_owner1"], se=["psi_collab"]
    )
    summary["pays"] = summary.psi_collab < summary.psi_alone_owner1
    if opts.seeds > 1:
        summary["pays_share"] = mean_over_seeds(table, columns[:3], ["pays"])["pays"].to_numpy()
    summary["forecast_pays"] = _forecast_pays(summary, model)
    sizes = run_sizes(opts.smoke)
    replicas = min(sizes.replicas, 20)
    n_records = _map_sizes(opts.smoke)[2]
    return write_results(
        "async-dp-map",
        out_dir,
        table=raw,
        summary=summary,
        figure=_map_figure(summary, n_records, sizes.horizon, opts.smoke),
        title="Value of collaboration (Fig. 6)",
        notes=f"synthetic owners with heterogeneity; {replicas} runs per cell, T={sizes.horizon}."
        + seeds_note(opts.seeds)
        + (" `pays`: mean ψ_collab < mean ψ_alone; `pays_share`: share of seeds where it pays."
           if opts.seeds > 1 else ""),
        digits=None,
    )  # fmt: skip


def _map_figure(summary: pd.DataFrame, n_records: int, horizon: int, smoke: bool) -> Figure:
    fig = Figure(figsize=(6.5, 4.8), layout=figure_layout(smoke))
    ax = fig.subplots()
    grid = summary.pivot(index="n_owners", columns="epsilon", values="pays").astype(float)
    ax.imshow(grid.to_numpy(), cmap="Greys", vmin=0, vmax=1, origin="lower", aspect="auto")
    if summary.forecast_pays.notna().all():
        pred = summary.pivot(index="n_owners", columns="epsilon", values="forecast_pays")
        ax.contour(pred.astype(float).to_numpy(), levels=[0.5], colors="tab:red", linestyles="--")
    ax.set_xticks(range(len(grid.columns)), [f"{e:g}" for e in grid.columns])
    ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
    ax.set_xlabel("ε_i (all owners)")
    ax.set_ylabel("number of owners N")
    ax.set_title(
        f"black: collaboration beats owner 1 alone (n_i={n_records}, T={horizon})\n"
        "red dashed: boundary forecast by the fitted bound",
        fontsize=9,
    )
    return fig


def _calibration_sizes(smoke: bool) -> tuple[list[int], list[int], list[float]]:
    """N, n_i and ε of the calibration runs."""
    if smoke:
        return [2, 5], [1_000, 3_000], [30.0, 300.0]
    return [2, 5, 10, 20], [3_000, 10_000, 30_000, 100_000], [3.0, 10.0, 30.0, 100.0, 300.0, 1000.0]


def _calibration_grid(opts: RunOptions) -> list[dict[str, Any]]:
    owners, sizes, _ = _calibration_sizes(opts.smoke)
    return [{"n_owners": n, "n_records": r, "smoke": opts.smoke} for n in owners for r in sizes]


def calibration_fold(
    seed: int, fold: int, *, n_owners: int, n_records: int, smoke: bool
) -> list[Record]:
    """§6: mean ψ of Algorithm 1 per ε, of its non-private run, and of an owner alone.

    Parameters
    ----------
    seed, fold : int
        Seed of the synthetic owners and of the runs (up to 20); the fold is always 0.
    n_owners, n_records : int
        N owners of n_i records each.
    smoke : bool
        Smoke sizes (fewer N, n_i and ε).

    Returns
    -------
    list of dict
        One record per ε: ``epsilon, psi_mean, psi_nonprivate, psi_alone, S``.
    """
    epsilons = _calibration_sizes(smoke)[2]
    replicas = min(run_sizes(smoke).replicas, 20)
    task = synthetic_task(n_owners, n_records, seed=seed)
    base = run_task(task, NONPRIVATE_EPSILON, seed=seed, smoke=smoke, replicas=replicas)
    records = []
    for eps in epsilons:
        res = run_task(task, eps, seed=seed, smoke=smoke, replicas=replicas)
        records.append(
            {"epsilon": eps, "psi_mean": float(res.psi.mean()),
             "psi_nonprivate": float(base.psi.mean()), "psi_alone": float(base.psi_alone.mean()),
             "S": privacy_term([n_records] * n_owners, eps)}
        )  # fmt: skip
    return records


def _relative_errors(frame: pd.DataFrame, c1: float, c2: float, gamma: float) -> np.ndarray:
    pred = frame.n_owners.to_numpy() ** gamma * (c1 * np.sqrt(frame.S) + c2 * frame.S)
    return np.abs(pred - frame.psi_mean.to_numpy()) / frame.psi_mean.to_numpy()


def _fit_model(frame: pd.DataFrame, opts: RunOptions) -> tuple[CostOfPrivacyModel, pd.DataFrame]:
    """Fit the constants of Eq. 11 with an N^γ dependence on the noise regime, and the alone
    baseline; the model and the points fitted."""
    owners, sizes, epsilons = _calibration_sizes(opts.smoke)
    sel = frame[frame.noise_regime]
    sel = sel if len(sel) >= 3 else frame
    paper = fit_cost_of_privacy(sel.S, sel.psi_mean)
    c1, c2, gamma = fit_owner_scaling(sel.S, sel.psi_mean, sel.n_owners)
    a, b = fit_alone_fitness(frame.n_records, frame.n_owners, frame.psi_alone)
    model = CostOfPrivacyModel(
        c1=c1, c2=c2, owner_exponent=gamma, alone_a=a, alone_b=b,
        horizon=run_sizes(opts.smoke).horizon,
        calibration={
            "command": "pubsubml bench async-dp-calibrate",
            "data": synthetic_task(2, 2).description,
            "clip_norm": "sup over Θ from public bounds (Assumption 2)",
            "reg": 1e-3, "theta_max": 1.0, "rho": "choose_rho(contraction=5)",
            "replicas": min(run_sizes(opts.smoke).replicas, 20),
            "size": "smoke" if opts.smoke else "full", "seeds": opts.seeds,
            "points_fitted": len(sel),
            "n_owners": [min(owners), max(owners)], "n_records": [min(sizes), max(sizes)],
            "epsilon": [min(epsilons), max(epsilons)],
            "median_relative_error": float(np.median(_relative_errors(sel, c1, c2, gamma))),
            "paper_form_constants": list(paper),
            "paper_form_median_relative_error": float(
                np.median(_relative_errors(sel, paper[0], paper[1], 0.0))
            ),
        },
    )  # fmt: skip
    return model, sel


def _calibration_notes(model: CostOfPrivacyModel, points: int, target: Path | None) -> str:
    c1, c2, gamma, cal = model.c1, model.c2, model.owner_exponent, model.calibration
    paper = cal["paper_form_constants"]
    if target is None:
        written = ""
    elif target == default_model_path():
        written = "  The fitted model is written to the packaged `methods/async_dp/forecast.json`."
    else:
        written = f"  The fitted model is written to `{target}`."
    return (
        f"Fit on the noise regime ({points} points): ψ ≈ N^γ(c̄1√S + c̄2 S) with c̄1={c1:.4g}, "
        f"c̄2={c2:.4g}, γ={gamma:.3g} (median relative error "
        f"{cal['median_relative_error']:.2f}); the paper's N-free form gives "
        f"c̄1={paper[0]:.4g}, c̄2={paper[1]:.4g} (median relative error "
        f"{cal['paper_form_median_relative_error']:.2f}).  Alone: "
        f"ψ(θ*_1) ≈ (a/n_1 + b)(1 − 1/N), a={model.alone_a:.4g}, b={model.alone_b:.4g}." + written
    )


def _model_target(opts: RunOptions) -> Path | None:
    """``--model-path``, else the packaged model at full size and no file at smoke size."""
    given = opts.params["model_path"]
    return Path(given) if given is not None else (None if opts.smoke else default_model_path())


def _calibration_report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """The calibration runs (means over seeds), the fit in the notes, and the model JSON."""
    by = ["n_owners", "n_records", "epsilon"]
    frame = mean_over_seeds(
        table, by, ["psi_mean", "psi_nonprivate", "psi_alone", "S"], se=["psi_mean"]
    )
    frame["noise_regime"] = noise_regime(frame.psi_mean.to_numpy(), frame.psi_nonprivate.to_numpy())
    model, sel = _fit_model(frame, opts)
    gamma = model.owner_exponent
    frame["bound_fit"] = frame.n_owners**gamma * (model.c1 * np.sqrt(frame.S) + model.c2 * frame.S)
    raw = table[["seed", *by, "psi_mean", "psi_nonprivate", "psi_alone", "S"]].copy()
    raw["noise_regime"] = noise_regime(raw.psi_mean.to_numpy(), raw.psi_nonprivate.to_numpy())
    raw["bound_fit"] = raw.n_owners**gamma * (model.c1 * np.sqrt(raw.S) + model.c2 * raw.S)
    target = _model_target(opts)
    written = write_results(
        "async-dp-calibration",
        out_dir,
        table=raw,
        summary=frame,
        title="Calibration runs of the forecast",
        notes=_calibration_notes(model, len(sel), target) + seeds_note(opts.seeds),
        digits=None,
    )
    if target is None:
        return written
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(model.to_json())
    return [*written, target]


def _check_calibration(opts: RunOptions) -> None:
    """Refuse a ``--model-path`` that cannot be written, before anything runs."""
    given = opts.params["model_path"]
    if given is None:
        return
    path = Path(given)
    if path.is_dir():
        raise ValueError(f"--model-path {path} is a folder; give the JSON file to write")
    check_out_dir(path.parent)


MAP = Experiment(
    "async-dp-map",
    "Fig. 6 (async-dp §5.1.2): N × ε map of where the collaboration beats owner 1 alone, "
    "with the forecast boundary.",
    grid=_map_grid,
    run_fold=map_fold,
    report=_map_report,
    **NO_FOLDS,
)
CALIBRATE = Experiment(
    "async-dp-calibrate",
    "§6 (async-dp): fit the forecast's constants (Eq. 11 with N^γ, and the alone baseline) and "
    "write async-dp-calibration.{csv,md} and the model JSON.",
    grid=_calibration_grid,
    run_fold=calibration_fold,
    report=_calibration_report,
    params=(
        Param(
            "model_path",
            None,
            "Where to write the fitted model JSON (default: the packaged forecast.json at full "
            "size, no file with --smoke).",
            kind=Path,
        ),
    ),
    check=_check_calibration,
    **NO_FOLDS,
)
