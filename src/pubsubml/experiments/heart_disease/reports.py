"""The result files of ``heart-disease``: targets, comparisons, notes and figures.

:func:`flamby_targets` sets our rows of FLamby's protocol beside FLamby's published ones;
:func:`flower_comparison` our federated loop beside Flower's; :func:`report_heart_disease` writes
``heart-disease-flamby.{csv,md,png}`` and ``heart-disease-hospitals.{csv,md,png}``.

References
----------
pubsub-ml.txt §7–8 (protocol, methods); du Terrail et al., "FLamby", NeurIPS 2022.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.data.heart_disease import HOSPITALS
from pubsubml.experiments.base import RunOptions
from pubsubml.experiments.heart_disease.flamby import (
    EPSILON,
    FL_NAMES,
    FLAMBY_FL,
    POOLED,
    TESTS,
)
from pubsubml.experiments.heart_disease.flamby_reference import POOLED_TEST, mean_accuracy
from pubsubml.experiments.heart_disease.flamby_summary import summarize_flamby
from pubsubml.experiments.heart_disease.hospitals import (
    CLINIC_SIZES,
    CLINIC_SOURCES,
    EPSILONS,
    HOSPITAL_METHODS,
    pubsub_label,
    summarize_clinic,
    summarize_hospitals,
    targets,
)
from pubsubml.experiments.heart_disease.methods import (
    DELTA,
    SMOKE_TRAINING,
    TRAINING,
    Training,
)
from pubsubml.experiments.heart_disease.options import NAME, clinic_repeats, protocols
from pubsubml.experiments.heart_disease.splits import TEST_FRACTION, flamby_frames
from pubsubml.experiments.reports import (
    markdown_table,
    mean_se,
    mean_se_label,
    summarize,
    write_results,
)

__all__ = ["flamby_targets", "flower_comparison", "report_heart_disease"]

_TOLERANCE = 0.01


# ---- targets and comparisons ------------------------------------------------------------------
def flamby_targets(table: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """PubSub-ML (ε = 1) on the pooled test against each of FLamby's published FL strategies.

    Returns
    -------
    (DataFrame, bool)
        Per FLamby strategy its published pooled-test accuracy (mean of 5 seeds), ours, the
        difference and whether ours is at least as high; and whether it is for every one.
    """
    ours = table[(table["method"] == "PubSub-ML") & (table["test"] == POOLED)]["accuracy"]
    mean = float(ours.mean())
    published = mean_accuracy()
    rows = []
    for strategy in FLAMBY_FL:
        theirs = published[strategy][POOLED_TEST]
        rows.append(
            {
                "FLamby strategy": strategy,
                "published pooled test": f"{theirs:.3f}",
                "PubSub-ML (ε = 1)": f"{mean:.3f}",
                "difference": f"{mean - theirs:+.3f}",
                "met": "yes" if mean >= theirs - 1e-12 else "no",
            }
        )
    frame = pd.DataFrame(rows)
    return frame, bool((frame["met"] == "yes").all())


def flower_comparison(table: pd.DataFrame) -> pd.DataFrame:
    """Our loop against Flower: pooled-test accuracy and seconds per run, per strategy.

    Returns
    -------
    DataFrame
        ``strategy``, ``DP``, then for ``ours`` and ``Flower``: pooled accuracy (mean ± SE over
        seeds), largest ε, seconds per run (training only for ours; Ray start included for
        Flower) and the number of runs.
    """
    pooled = table[table["test"] == POOLED]
    rows = []
    for dp in (False, True):
        for name in FL_NAMES:
            row: dict[str, Any] = {"strategy": name, "DP": f"ε = {EPSILON:g}" if dp else "none"}
            for label, method in (
                ("ours", f"DP-{name} (V)" if dp else name),
                ("Flower", f"DP-{name} (V), Flower" if dp else f"{name}, Flower"),
            ):
                part = pooled[pooled["method"] == method]
                if part.empty:
                    row |= {f"{label} accuracy": "", f"{label} ε": "", f"{label} s/run": ""}
                    continue
                mean, se, _ = mean_se(part["accuracy"])
                eps = part["epsilon"].astype(float).max()
                row[f"{label} accuracy"] = f"{mean_se_label(mean, se)} (n={len(part)})"
                row[f"{label} ε"] = "—" if math.isinf(eps) else f"{eps:.2f}"
                row[f"{label} s/run"] = f"{part['seconds'].astype(float).mean():.1f}"
            rows.append(row)
    return pd.DataFrame(rows)


# ---- reports ----------------------------------------------------------------------------------
def _test_sizes() -> str:
    frames = flamby_frames()
    sizes = {h: len(s.y_test) for h, s in frames.items()}
    healthy = {h: int((s.y_test == 0).sum()) for h, s in frames.items()}
    total = sum(sizes.values())
    parts = ", ".join(
        f"{h} {n} ({healthy[h]} healthy; one patient = {100 / n:.1f} points)"
        for h, n in sizes.items()
    )
    return f"{parts}; pooled {total} (one patient = {100 / total:.2f} points)"


def _model_note(training: Training, *, flamby: bool) -> str:
    features = (
        "the 10 features FLamby keeps (`HEART_SCHEMA` bounds, never the data's z-scores; "
        "FLamby's one-hot columns decoded back to `cp` and `restecg`, `chol = 0` kept as FLamby "
        "keeps it and clipped to the public lower bound)"
        if flamby
        else "each hospital's recorded features (`HEART_SCHEMA` bounds)"
    )
    return (
        "every shared model is FLamby's model class, a logistic regression, on the public-bound "
        f"encoding of {features}: full batch, {training.steps} Adam steps at learning rate 0.2, "
        "the DP-SGD linear rule of `pubsubml.learners.dp_sgd_defaults` (public inputs only; not "
        "tuned here).  "
    )


def _federated_note(training: Training) -> str:
    return (
        f"Federated: every hospital every round, {training.rounds} rounds × "
        f"{training.local_epochs} local full-batch steps (the same {training.steps} steps per "
        "client), FedProx μ = 0.01 and FedAdam server η = 0.01 (FLamby's tuned values), FedAdam "
        "β2 = 0.99, τ = 1e-9 (Flower's defaults, used in both implementations).  DP: "
        f"record-level DP-SGD, ε = {EPSILON:g}, δ = {DELTA:g} (< 1/30, Switzerland's 30 "
        "training rows in FLamby's split), clipping C = 1, noise seeded (a simulation).  (F): "
        f"{training.fine_tune_epochs} non-private full-batch steps on the hospital's own "
        "training rows."
    )


def _own_note(training: Training) -> str:
    text = f"`OwnLearner('{training.own_kind}')`"
    if training.own_kind == "auto":
        text += ", chosen by 5-fold CV among a network, a random forest and a logistic model"
    return text


def _flower_note(table: pd.DataFrame, opts: RunOptions) -> str:
    seeds = (
        f"Seeds: {opts.seeds} for our rows (model initialisation, DP noise, CV folds; the split "
    )
    seeds += "is fixed)"
    flower = table[table["method"].str.endswith("Flower")]
    if flower.empty:
        return "none in this run (`--no-flower`).  " + seeds + "."
    return (
        "FedAvg, FedProx, FedAdam as Flower 1.42's own strategies over our DP clients "
        "(`pubsubml.methods.flower`, local Ray), same model, rounds, steps and learning rate; "
        "a run's time includes Ray's start.  "
        + seeds
        + f", {flower['seed'].nunique()} for the Flower rows."
    )


def _flamby_notes(table: pd.DataFrame, opts: RunOptions) -> str:
    training = SMOKE_TRAINING if opts.smoke else TRAINING
    frame, met = flamby_targets(table)
    ours = table[(table["method"] == "PubSub-ML") & (table["test"] == POOLED)]["accuracy"]
    best = frame.iloc[int(np.argmax(frame["published pooled test"].astype(float)))]
    lines = [
        "FLamby's Fed-Heart-Disease protocol exactly: FLamby's preprocessing (slope, ca and thal "
        "dropped, rows with a missing value dropped, `num > 0` → 1) and its one fixed split "
        "(`pubsubml.data.heart_disease.flamby_split`); the metric is FLamby's, accuracy at "
        "p > 0.5.  Columns: accuracy on each hospital's test set and on the pooled test (the "
        "four test sets together), mean ± SE over seeds.  **The test sets are small**: "
        f"{_test_sizes()}.  Switzerland's test set holds one healthy patient of 16, and its 30 "
        "training patients none: a model that always predicts disease scores 15/16 = 0.938 "
        "there, so the Switzerland column says little.",
        "",
        "Rows: **FLamby (published)** — FLamby's result files (mean ± SE over its 5 seeds, "
        "`flamby_reference`; logistic regression on per-centre z-scores).  **ours, FLamby's "
        "normalisation** — a non-private replication of FLamby's own training (per-centre "
        "z-scores, Adam 1e-3, batches of 4, 50 epochs) to check the protocol; data-dependent "
        "scaling, so no DP row uses it.  **ours** — "
        + _model_note(training, flamby=True)
        + _federated_note(training)
        + "  Local i / Pooled: that model on one hospital's / the four training sets; Local (own "
        "hospital): each Local model on its own test set.  Own: "
        + _own_note(training)
        + " (at Switzerland, whose training rows are one class, a constant).  PubSub-ML: each hospital subscribes to the other three hospitals' DP "
        "logistic models (ε = 1) and customizes on its training set with the Customizer's "
        "defaults (same own learner); PubSub-ML*: the same over the other three's non-private "
        "Local models; `fallback` in the CSV says when CUSTOMIZE kept the own model alone "
        "(always at Switzerland: one class).  Methods that give each hospital its own model "
        "(Local (own hospital), Own, (F), PubSub-ML) are scored on the pooled test with each "
        "hospital's model on its own patients.  **ours, Flower** — " + _flower_note(table, opts),
        "",
        "**Target** (fixed before the run): PubSub-ML at ε = 1 on the pooled test ≥ every FL "
        f"strategy of FLamby's published table.  PubSub-ML: {ours.mean():.3f} "
        f"({'met' if met else 'not met'}; the best published strategy is "
        f"{best['FLamby strategy']} at {best['published pooled test']}, one pooled-test "
        "patient is 0.39 points).",
        "",
        markdown_table(frame, None),
        "",
        "**Our loop against Flower** (pooled test; seconds per run).  Without DP, FedAvg and "
        "FedProx are deterministic here (full-batch steps from the same seeded initial model), "
        "so the two implementations must give one model; FedAdam differs by design (Flower's "
        "server Adam scales its step by Adam's bias correction, ours follows Reddi et al.'s "
        "Algorithm 2 without it); with DP the noise draws differ.",
        "",
        markdown_table(flower_comparison(table), None),
    ]
    if opts.smoke:
        lines.insert(0, "**Smoke configuration** (`--smoke`): its numbers mean nothing.\n")
    return "\n".join(lines)


def _hospitals_notes(table: pd.DataFrame, opts: RunOptions) -> str:
    training = SMOKE_TRAINING if opts.smoke else TRAINING
    hosp = table[table["part"] == "hospitals"]
    first = hosp.groupby("hospital", sort=False)[["n_train", "n_test"]].first()
    sizes = {str(h): (int(r["n_train"]), int(r["n_test"])) for h, r in first.iterrows()}
    size_text = ", ".join(f"{h} {sizes[h][0]} / {sizes[h][1]}" for h in HOSPITALS if h in sizes)
    check = targets(table, _TOLERANCE)
    met = (check["met"] == "yes").all() if len(check) else False
    clinic = summarize_clinic(table)
    lines = [
        "The four hospitals as they are: each keeps the features it records "
        "(`pubsubml.data.heart_disease.hospital_datasets`: Cleveland all 13; Hungary and VA "
        "without slope, ca, thal; Switzerland without chol, fbs, ca), its few missing cells "
        "filled with the public defaults of `HEART_SCHEMA`.  Every repeat splits every hospital "
        f"again, stratified by the label, {TEST_FRACTION:.0%} test (FLamby's fraction): train / "
        f"test patients {size_text} (Switzerland: 123 patients, 8 healthy, about 3 of them in "
        f"each test part).  {opts.folds} repeats; mean ± SE over repeats; `accuracy − Own` is "
        "paired by repeat.",
        "",
        "Methods: Own — "
        + _own_note(training)
        + ", on the hospital's training part.  PubSub-ML (ε) — the hospital "
        "subscribes to the other three hospitals' DP-SGD logistic models (each on its own "
        f"training part and columns; ε = {', '.join(f'{e:g}' for e in EPSILONS)}, δ = "
        f"{DELTA:g}; the model of the FLamby table) and customizes with the Customizer's "
        "defaults and the same own learner; features it lacks take the public defaults.  "
        "PubSub-ML* — the same with non-private publishers.  DP-FedAvg (V) / (F) — one "
        "federation of the four training parts per repeat at ε = 1 (record-level DP-SGD at "
        "every hospital), the logistic model and training of the FLamby table: "
        + _model_note(training, flamby=False)
        + _federated_note(training)
        + "  Pooled — the own learner on the four training parts together (missing features "
        "filled with the public defaults), non-private: a ceiling reference, not a private "
        "method.  `fallback`: share of repeats in which CUSTOMIZE kept the own model alone "
        "(PubSub-ML then equals Own).",
        "",
        "**Target** (fixed before the run): PubSub-ML at ε = 1 ≥ Own − 1 point of accuracy at "
        f"every hospital — {'met' if met else 'not met'}:",
        "",
        markdown_table(check, None),
        "",
        "**A new small clinic**: 30, 60 or 100 patients drawn from one hospital's training part "
        "(stratified, nested: the 30 are among the 60) subscribe to the other three hospitals' "
        "DP models of the same repeat (ε = 1), against the clinic's own model; scored on that "
        f"hospital's test part.  Sources: {', '.join(CLINIC_SOURCES)} (Switzerland's 81 "
        "training patients, 5 healthy, are too few).  The clinics run in the first "
        f"{clinic_repeats(opts)} repeats only (`--clinic-repeats`): each clinic cross-validates "
        "its own model, the most expensive step of a repeat, and 9 clinics per repeat would "
        "double the run's time.",
        "",
        markdown_table(clinic, None),
    ]
    if opts.smoke:
        lines.insert(0, "**Smoke configuration** (`--smoke`): its numbers mean nothing.\n")
    return "\n".join(lines)


def _bars(ax: Any, summary: pd.DataFrame, methods: Sequence[str], groups: Sequence[str]) -> None:
    width = 0.8 / max(1, len(methods))
    for i, method in enumerate(methods):
        means, errors = [], []
        for group in groups:
            cell = summary[(summary["group"] == group) & (summary["method"] == method)]
            means.append(float(cell["mean"].iloc[0]) if len(cell) else np.nan)
            errors.append(float(cell["se"].iloc[0]) if len(cell) else 0.0)
        x = np.arange(len(groups)) + (i - (len(methods) - 1) / 2) * width
        ax.bar(x, means, width, yerr=errors, capsize=2, label=method)
    ax.set_xticks(np.arange(len(groups)), list(groups))


def _mean_se(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    return summarize(frame.dropna(subset=by), by, "accuracy")


_FIGURE_METHODS = (
    "Local (own hospital)",
    "Own",
    "Pooled",
    "FedAvg",
    "DP-FedAvg (V)",
    "DP-FedAvg (F)",
    "PubSub-ML",
    "PubSub-ML*",
)


def _flamby_figure(table: pd.DataFrame) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = [m for m in _FIGURE_METHODS if m in set(table["method"])]
    summary = _mean_se(table[table["method"].isin(methods)], ["method", "test"])
    summary = summary.rename(columns={"test": "group"})
    published = mean_accuracy()
    fig, ax = plt.subplots(figsize=(11, 4))
    _bars(ax, summary, methods, list(TESTS))
    for name, style in (("Pooled Training", "-"), ("Cyclic100", "--"), ("FedAvg100", ":")):
        ax.axhline(
            published[name][POOLED_TEST],
            ls=style,
            lw=0.8,
            color="black",
            label=f"FLamby {name}, pooled test (published)",
        )
    ax.set_ylabel("accuracy (FLamby's split)")
    ax.set_ylim(0.3, 1.0)
    ax.legend(fontsize=7, ncol=4, loc="lower left")
    fig.tight_layout()
    return fig


def _hospitals_figure(table: pd.DataFrame) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hosp = table[table["part"] == "hospitals"]
    methods = [m for m in HOSPITAL_METHODS if m in set(hosp["method"])]
    summary = _mean_se(hosp, ["method", "hospital"]).rename(columns={"hospital": "group"})
    groups = [h for h in HOSPITALS if h in set(hosp["hospital"])]
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, 4), gridspec_kw={"width_ratios": [3, 2]})
    _bars(a, summary, methods, groups)
    a.set_ylabel("accuracy (test part, mean ± SE over repeats)")
    a.set_ylim(0.5, 1.0)
    a.legend(fontsize=7, ncol=4, loc="lower left")
    clinic = table[table["part"] == "clinic"]
    for (source, method), part in clinic.groupby(["hospital", "method"], sort=False):
        cell = _mean_se(part, ["n_rows"])
        style = "-" if method == "Own" else "--" if method == pubsub_label(1.0) else ":"
        b.errorbar(
            cell["n_rows"], cell["mean"], yerr=cell["se"], ls=style, marker=".", capsize=2,
            label=f"{source}: {method}",
        )  # fmt: skip
    b.set_xlabel("clinic patients")
    b.set_xticks(list(CLINIC_SIZES))
    b.legend(fontsize=6)
    fig.tight_layout()
    return fig


def report_heart_disease(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """Write ``heart-disease-flamby`` and / or ``heart-disease-hospitals`` (the protocols run).

    Each is ``<out_dir>/NAME.{csv,md,png}``: the records of that protocol, its summary table, its
    figure and its notes (:func:`~pubsubml.experiments.reports.write_results`).
    """
    written: list[Path] = []
    if "flamby" in protocols(opts):
        part = table[table["part"] == "flamby"].dropna(axis=1, how="all")
        written += write_results(
            f"{NAME}-flamby",
            out_dir,
            table=part,
            summary=summarize_flamby(part),
            figure=_flamby_figure(part),
            notes=_flamby_notes(part, opts),
            title="Heart Disease, FLamby's protocol: FLamby's published results beside ours",
            digits=None,
        )
    if "hospitals" in protocols(opts):
        part = table[table["part"].isin(["hospitals", "clinic"])].dropna(axis=1, how="all")
        written += write_results(
            f"{NAME}-hospitals",
            out_dir,
            table=part,
            summary=summarize_hospitals(part),
            figure=_hospitals_figure(part),
            notes=_hospitals_notes(part, opts),
            title="Heart Disease, the hospitals as they are: PubSub-ML against Own and DP-FedAvg",
            digits=None,
        )
    return written
