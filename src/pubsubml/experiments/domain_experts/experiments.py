"""Experiments of FL with private domain experts (fl-domain-experts.txt §4.1, §4.2).

``domain-experts-regression`` (:data:`REGRESSION`) reproduces the synthetic regression of §4.1
(Fig. 4 and the RMSE table of Fig. 5); ``domain-experts-classification`` (:data:`CLASSIFICATION`)
stands in for the spam task of §4.2 (Fig. 6) with many Hyperplane sites (the ECML/PKDD 2006 spam
data is not shipped offline).  Neither is cross-validated: every seed draws its own users with fixed
train/validation/test rows, and each setting (σ, or the privacy level) is one run of that seed.  The
methods compared and the privacy sweep are in :mod:`.compared`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.data import hyperplane_chunks, hyperplane_schema
from pubsubml.experiments.base import Experiment, RunOptions
from pubsubml.experiments.domain_experts.compared import (
    NO_FOLDS,
    Algorithm,
    privacy_fold,
    privacy_grid,
    report_privacy_sweep,
    rmse,
    run_label,
    score_methods,
)
from pubsubml.experiments.domain_experts.figures import gate_figure
from pubsubml.experiments.reports import summarize, write_results
from pubsubml.experiments.runner import Record
from pubsubml.methods.domain_experts.federation import DomainExpertsFL
from pubsubml.schema import FeatureSchema

__all__ = [
    "CLASSIFICATION",
    "GATE_GRID",
    "REGRESSION",
    "classification_fold",
    "classification_size",
    "classification_users",
    "gate_records",
    "regression_fold",
    "regression_size",
    "regression_users",
    "report_classification",
    "report_regression",
    "target",
]

# Paper values of Fig. 5 (fl-domain-experts.txt §4.1), (user 1, user 2) RMSE; Alg 2 and FT-DP-FL
# are not in the paper's table.
PAPER_RMSE: dict[tuple[str, float], tuple[float, float]] = {
    ("Baseline", 0.0): (15.32, 10.95),
    ("FL", 0.0): (12.75, 9.67),
    ("FL", 2.0): (13.79, 12.68),
    ("FL", 4.0): (12.59, 19.49),
    ("Alg 1", 0.0): (12.12, 9.41),
    ("Alg 1", 2.0): (12.05, 9.73),
    ("Alg 1", 4.0): (13.78, 10.95),
}
# Public input bounds of the synthetic inputs (domain knowledge of the generator, not the data).
BOUND = 8.0
# The users' input Gaussians: means and standard deviation (the paper does not give them).
MEANS = ((-1.0, 1.5), (1.0, -1.0))
STD = 1.0
SIGMAS = (0.0, 2.0, 4.0)
"""Noise multipliers of §4.1."""
GATE_GRID = np.round(np.linspace(-4.0, 4.0, 41), 1)
"""x and y of the gate maps (Fig. 4 (c)–(d)): −4 to 4 in steps of 0.2."""
REGRESSION_NAME = "domain-experts-regression"
CLASSIFICATION_NAME = "domain-experts-classification"


def target(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """f(x, y) = 5x − 2y + 0.5y³ (§4.1)."""
    return 5 * x - 2 * y + 0.5 * y**3


def regression_users(
    n_train: int, n_val: int, n_test: int, seed: int
) -> list[dict[str, tuple[pd.DataFrame, np.ndarray]]]:
    """Two users with distinct 2-D Gaussian inputs; train/val/test splits of f(x, y) (§4.1)."""
    rng = np.random.default_rng(seed)
    out = []
    for mean in MEANS:
        splits = {}
        for name, n in (("train", n_train), ("val", n_val), ("test", n_test)):
            xy = rng.normal(mean, STD, size=(n, 2)).clip(-BOUND, BOUND)
            splits[name] = (pd.DataFrame(xy, columns=["x", "y"]), target(xy[:, 0], xy[:, 1]))
        out.append(splits)
    return out


# ---- §4.1: synthetic regression --------------------------------------------------------------
def regression_size(smoke: bool) -> tuple[tuple[int, int, int], int]:
    """(train, validation, test) rows per user and rounds: the paper's, or the smoke run's."""
    return ((200, 50, 100), 60) if smoke else ((2500, 500, 500), 1500)


def gate_records(model: DomainExpertsFL, users: list[dict[str, Any]]) -> list[Record]:
    """Each user's test inputs (``kind="input"``) and gate α_u on :data:`GATE_GRID`² (``"gate"``)."""
    gx, gy = np.meshgrid(GATE_GRID, GATE_GRID)
    grid = pd.DataFrame({"x": gx.ravel(), "y": gy.ravel()})
    out: list[Record] = []
    for i, u in enumerate(users):
        X, _ = u["test"]
        out += [
            {"kind": "input", "user": i + 1, "x": float(a), "y": float(b)}
            for a, b in zip(X["x"], X["y"], strict=True)
        ]
    for i in range(len(users)):
        alpha = model.gate(grid, user=i)
        out += [
            {"kind": "gate", "user": i + 1, "x": float(a), "y": float(b), "alpha": float(v)}
            for a, b, v in zip(grid["x"], grid["y"], alpha, strict=True)
        ]
    return out


def regression_fold(seed: int, fold: int, *, sigma: float, smoke: bool) -> list[Record]:
    """§4.1 for one seed at noise multiplier ``sigma``: test RMSE per user and method
    (``kind="rmse"``); at σ = 0 also Algorithm 1's gate maps (:func:`gate_records`)."""
    rows, rounds = regression_size(smoke)
    users = regression_users(*rows, seed=seed)
    schema = FeatureSchema.numeric(["x", "y"], lower=-BOUND, upper=BOUND)

    def make(alg: Algorithm, noise: float | None, dp: bool) -> DomainExpertsFL:
        return DomainExpertsFL(
            schema=schema, task="regression", algorithm=alg, rounds=rounds, batch_size=50,
            noise_multiplier=noise, max_grad_norm=1.0, lr_general=1.0, lr_private=0.05,
            lr_gate=0.05, dp=dp, random_state=seed,
        )  # fmt: skip

    found, fits = score_methods(users, make, sigma, True, rmse, seed)
    records: list[Record] = []
    for r in found:
        name = "FT-DP-FL" if r["method"] == "FT-FL" and sigma > 0 else r["method"]
        paper = PAPER_RMSE.get((name, 0.0 if name == "Baseline" else sigma))
        records.append(
            {"kind": "rmse", "method": name, "user": r["user"], "rmse": r["score"],
             "paper_rmse": paper[r["user"] - 1] if paper else math.nan,
             "epsilon": r["epsilon"], "guarantee": r["guarantee"]}
        )  # fmt: skip
    if sigma == 0.0:
        records += gate_records(fits[1], users)
    return records


def report_regression(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """RMSE per (σ, method, user), mean ± SE over seeds; the gate maps in their own files."""
    scores = table[table["kind"] == "rmse"]
    scores = scores[
        ["seed", "sigma", "method", "user", "rmse", "paper_rmse", "epsilon", "guarantee"]
    ]
    keys = ["sigma", "method", "user"]
    facts = scores.groupby(keys, sort=False).agg(
        paper_rmse=("paper_rmse", "first"),
        epsilon=("epsilon", "max"),
        guarantee=("guarantee", "first"),
    )
    summary = summarize(scores, keys, "rmse").merge(facts.reset_index(), on=keys, how="left")
    (n_train, n_val, n_test), rounds = regression_size(opts.smoke)
    written = write_results(
        REGRESSION_NAME, out_dir, table=scores.reset_index(drop=True), summary=summary,
        title="Synthetic regression (fl-domain-experts.txt §4.1, Fig. 5): test RMSE per user",
        notes=f"{run_label(opts)}: {n_train}/{n_val}/{n_test} train/val/test rows per user, "
        f"{rounds} rounds, batch 50, C = 1, linear models. mean ± SE: test RMSE over seeds (n "
        "seeds). FL is the general model of the Algorithm-2 run (trained exactly as DP-FL, "
        "§3.2.1) on the expert half of the training rows; Baseline is each user's least-squares "
        "linear fit on all its training rows; FT-(DP-)FL fine-tunes M_G on them with early "
        "stopping on the validation rows; paper_rmse is blank where the paper has no number. "
        "The users' Gaussians are not given in the paper "
        f"(here means {MEANS}, std {STD}).",
        digits=None,
    )  # fmt: skip
    gates = table[table["kind"] != "rmse"][["seed", "kind", "user", "x", "y", "alpha"]]
    written += write_results(
        f"{REGRESSION_NAME}-gates", out_dir, table=gates.reset_index(drop=True),
        figure=gate_figure(gates, target),
        title="Gates of Algorithm 1 at σ = 0 (fl-domain-experts.txt §4.1, Fig. 4 (a)–(d))",
        notes=f"{run_label(opts)}. CSV rows: kind = input, each user's test inputs (x, y); kind "
        "= gate, the user's gate α_u(x, y), the weight of the general model, on a grid from −4 "
        "to 4 in steps of 0.2. The figure shows the first seed's test inputs and α averaged "
        "over seeds.",
    )  # fmt: skip
    return written


def _regression_grid(opts: RunOptions) -> list[dict[str, Any]]:
    return [{"sigma": sigma, "smoke": opts.smoke} for sigma in SIGMAS]


# ---- §4.2 stand-in: many-domain classification -----------------------------------------------
def classification_size(smoke: bool) -> tuple[int, int]:
    """Sites and rounds: 15 and 300, or the smoke run's 5 and 30."""
    return (5, 30) if smoke else (15, 300)


def classification_users(n_users: int, seed: int) -> list[dict[str, tuple[pd.DataFrame, Any]]]:
    """``n_users`` Hyperplane sites cut from one drifting stream: 50 labeled rows (train 25 +
    val 25) and 350 test rows each; the shared initial concept rotates from site to site."""
    chunks = hyperplane_chunks(
        n_users, 400, seed=seed, n_features=10, n_drift_features=5, mag_change=0.002
    )
    users = []
    for X, y in chunks:
        users.append({"train": (X[:25], y[:25]), "val": (X[25:50], y[25:50]),
                      "test": (X[50:], y[50:])})  # fmt: skip
    return users


def classification_fold(seed: int, fold: int, *, privacy: str, smoke: bool) -> list[Record]:
    """§4.2 analogue for one seed at one privacy level (no privacy, ε = 4 or ε = 2, δ = 1e-5)."""
    n_users, rounds = classification_size(smoke)
    users = classification_users(n_users, seed)

    # The MoE's gate trains on the validation half (H); FL, baseline and FT use the same 50 rows.
    def make(alg: Algorithm, eps: float | None, dp: bool) -> DomainExpertsFL:
        return DomainExpertsFL(
            schema=hyperplane_schema(10), classes=[0, 1], algorithm=alg, rounds=rounds,
            batch_size=10, gate_fraction=0.5, target_epsilon=eps or 1.0, target_delta=1e-5,
            lr_general=0.5, lr_private=0.05, lr_gate=0.05, dp=dp, random_state=seed,
        )  # fmt: skip

    # "train" (all 50 rows) feeds the federation; "tune" (25) and "val" (25) the local training.
    merged = [{"train": (pd.concat([u["train"][0], u["val"][0]], ignore_index=True),
                         np.concatenate([u["train"][1], u["val"][1]])),
               "tune": u["train"], "val": u["val"], "test": u["test"]} for u in users]  # fmt: skip
    return privacy_fold(merged, make, privacy, seed)


def report_classification(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """Writes ``domain-experts-classification.{csv,md,png}`` (:func:`report_privacy_sweep`)."""
    n_users, rounds = classification_size(opts.smoke)
    return report_privacy_sweep(
        table, out_dir, name=CLASSIFICATION_NAME,
        title="Many-domain classification (stand-in for fl-domain-experts.txt §4.2, Fig. 6)",
        notes=f"{run_label(opts)}: {n_users} Hyperplane sites, 50 labeled rows each "
        "(MoE: 25 expert + 25 gate rows; Baseline: logistic regression on all 50; FT: 25 train + "
        f"25 validation), 350 test rows, {rounds} rounds, batch 10, C = 1, linear models.",
    )  # fmt: skip


REGRESSION = Experiment(
    REGRESSION_NAME,
    "Fig. 4–5: test RMSE per user and gate maps, σ = 0, 2, 4 (fl-domain-experts.txt §4.1).",
    grid=_regression_grid,
    run_fold=regression_fold,
    report=report_regression,
    folds=1,
    min_folds=1,
    max_folds=1,
    folds_help=NO_FOLDS,
)
"""§4.1: two users, f(x, y) = 5x − 2y + 0.5y³, linear models, σ ∈ {0, 2, 4}."""

CLASSIFICATION = Experiment(
    CLASSIFICATION_NAME,
    "Fig. 6 stand-in: accuracy of 15 Hyperplane sites, no DP, ε = 4, 2 "
    "(fl-domain-experts.txt §4.2).",
    grid=privacy_grid,
    run_fold=classification_fold,
    report=report_classification,
    folds=1,
    min_folds=1,
    max_folds=1,
    folds_help=NO_FOLDS,
)
"""§4.2 analogue: 15 related Hyperplane sites of 50 labeled rows, no privacy, ε = 4 and ε = 2."""
