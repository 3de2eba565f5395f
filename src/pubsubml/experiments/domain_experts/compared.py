"""The compared methods of fl-domain-experts.txt §4 and the privacy sweep of §4.2–4.3.

:func:`score_methods` fits Algorithm 1 and Algorithm 2 (§3.2, §3.2.1) on the users' training rows
and scores, per user, the domain-only Baseline, FL (the general model M_G of the Algorithm-2 run),
the MoE of Alg 1 and Alg 2, and FT-FL (M_G fine-tuned on the user's rows, §3.3).
:func:`privacy_fold` runs them at one level of :data:`PRIVACY_LEVELS` (no privacy, ε = 4, ε = 2 at
δ = 1e-5) and :func:`report_privacy_sweep` writes the table and bars of Fig. 6 and 7; the
classification and mnist1d experiments share them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from pubsubml.errors import PaperAccountingWarning
from pubsubml.experiments.base import RunOptions
from pubsubml.experiments.domain_experts.figures import bar_figure
from pubsubml.experiments.reports import summarize, write_results
from pubsubml.experiments.runner import Record
from pubsubml.methods.domain_experts.early_stopping import train_with_early_stopping
from pubsubml.methods.domain_experts.federation import DomainExpertsFL
from pubsubml.privacy.dpsgd import init_mlp

__all__ = [
    "ALGORITHMS",
    "NO_FOLDS",
    "PRIVACY_LEVELS",
    "Algorithm",
    "Maker",
    "accuracy",
    "linear_baseline",
    "module_predict",
    "privacy_fold",
    "privacy_grid",
    "report_privacy_sweep",
    "rmse",
    "run_label",
    "score_methods",
    "tune",
]

Algorithm = Literal[1, 2]
ALGORITHMS: tuple[Algorithm, ...] = (1, 2)
Maker = Callable[[Algorithm, float | None, bool], DomainExpertsFL]
"""``make(algorithm, privacy, dp)``: an unfitted federation (privacy is σ or a target ε)."""
PRIVACY_LEVELS: dict[str, tuple[float | None, bool]] = {
    "none": (None, False),
    "4": (4.0, True),
    "2": (2.0, True),
}
"""Label → (target ε at δ = 1e-5, DP on) of the privacy sweep of §4.2–4.3."""
DP_NAMES = {"FL": "DP-FL", "FT-FL": "FT-DP-FL"}
NO_FOLDS = "no cross-validation: one run per seed on its users' fixed train/validation/test rows"


def run_label(opts: RunOptions) -> str:
    """``"full run (seed 0)"``, ``"smoke run (seeds 0–4)"``: the start of every note."""
    seeds = "seed 0" if opts.seeds == 1 else f"seeds 0–{opts.seeds - 1}"
    return f"{'smoke' if opts.smoke else 'full'} run ({seeds})"


def rmse(pred: np.ndarray, y: np.ndarray) -> float:
    """Root mean squared error."""
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    """Share of correct labels."""
    return float(np.mean(pred == y))


def module_predict(model: DomainExpertsFL, module: torch.nn.Module, X: pd.DataFrame) -> np.ndarray:
    """Prediction of a stand-alone network (e.g. a fine-tuned M_G) on ``model``'s encoding."""
    with torch.no_grad():
        out = module(model.encode(X))
    if model.task == "regression":
        return out[:, 0].numpy().astype(float)
    return np.asarray(model.classes_[out.argmax(1).numpy()])


def linear_baseline(
    model: DomainExpertsFL, train: tuple[pd.DataFrame, np.ndarray], X: pd.DataFrame
) -> np.ndarray:
    """Domain-only linear model on the user's training rows, predicted at X.

    Least squares for regression (§4.1: "each user fitting a single linear model"), scikit-learn's
    L2 logistic regression (C = 1) for classification.
    """
    Z, Zx = model.encode(train[0]).numpy(), model.encode(X).numpy()
    if model.task == "regression":
        A = np.c_[Z, np.ones(len(Z))]
        coef = np.linalg.lstsq(A, np.asarray(train[1], dtype=float), rcond=None)[0]
        return np.asarray(np.c_[Zx, np.ones(len(Zx))] @ coef)
    from sklearn.linear_model import LogisticRegression

    return np.asarray(LogisticRegression(max_iter=2000).fit(Z, train[1]).predict(Zx))


def tune(model: DomainExpertsFL, start: torch.nn.Module, user: dict[str, Any], seed: int) -> Any:
    """Fine-tune ``start`` on the user's ``tune`` rows (default ``train``), stopping on ``val``
    (FT-(DP-)FL, §3.3)."""
    (X, y), (Xv, yv) = user.get("tune", user["train"]), user["val"]
    return train_with_early_stopping(
        start,
        model.encode(X),
        model.encode_target(y, len(X)),
        model.encode(Xv),
        model.encode_target(yv, len(Xv)),
        task=model.task,
        seed=seed,
    )


def score_methods(
    users: list[dict[str, Any]],
    make: Maker,
    privacy: float | None,
    dp: bool,
    score: Callable[[np.ndarray, np.ndarray], float],
    seed: int,
) -> tuple[list[dict[str, Any]], dict[Algorithm, DomainExpertsFL]]:
    """Scores of Baseline, FL (M_G of Algorithm 2), Alg 1, Alg 2 and FT-FL per user (§4.1–4.3).

    Each user is a dict of ``(X, y)`` splits: ``train`` (given to the federation), ``val``
    (early stopping), ``test``, and optionally ``tune`` (local training rows; default ``train``).
    Returns rows ``{user (1-based), method, score, epsilon, guarantee}`` and the two fits.
    """
    with warnings.catch_warnings():  # Algorithm 1's ε is labelled in the rows instead
        warnings.simplefilter("ignore", PaperAccountingWarning)
        fits = {alg: make(alg, privacy, dp).fit([u["train"] for u in users]) for alg in ALGORITHMS}
    fl = fits[2]
    # What each method released and what its ε is: Baseline releases nothing; FL, FT-FL and
    # Alg 2 release Algorithm 2's noisy gradients; Alg 1 its own, under paper accounting only.
    released = {
        "Baseline": (0.0, "nothing released"),
        "FL": (fl.epsilon_, fl.privacy_guarantee_),
        "Alg 1": (fits[1].epsilon_, fits[1].privacy_guarantee_),
        "Alg 2": (fl.epsilon_, fl.privacy_guarantee_),
        "FT-FL": (fl.epsilon_, fl.privacy_guarantee_),
    }
    weights = [p for k, p in fl.general_.named_parameters() if k.endswith("weight")]
    sizes = (int(weights[0].shape[1]), *(int(w.shape[0]) for w in weights))
    rows = []
    for i, u in enumerate(users):
        X, y = u["test"]
        if not fl.hidden_layer_sizes:  # one linear model per user, fitted to convergence
            base = linear_baseline(fl, u["train"], X)
        else:
            fresh = init_mlp(sizes, fl.activation, torch.Generator().manual_seed(seed + i))
            base = module_predict(fl, tune(fl, fresh, u, seed), X)
        scores = {
            "Baseline": score(base, y),
            "FL": score(fl.predict_general(X), y),
            "Alg 1": score(fits[1].predict(X, user=i), y),
            "Alg 2": score(fits[2].predict(X, user=i), y),
            "FT-FL": score(module_predict(fl, tune(fl, fl.general_, u, seed), X), y),
        }
        for method, value in scores.items():
            eps, guarantee = released[method]
            rows.append(
                {"user": i + 1, "method": method, "score": value, "epsilon": eps,
                 "guarantee": guarantee}
            )  # fmt: skip
    return rows, fits


def privacy_fold(users: list[dict[str, Any]], make: Maker, privacy: str, seed: int) -> list[Record]:
    """Accuracy per user and method at one level of :data:`PRIVACY_LEVELS` (FL and FT-FL are
    named DP-FL and FT-DP-FL with DP): records ``{method, user, accuracy, epsilon, guarantee}``."""
    eps, dp = PRIVACY_LEVELS[privacy]
    found, _ = score_methods(users, make, eps, dp, accuracy, seed)
    return [
        {"method": DP_NAMES.get(r["method"], r["method"]) if dp else r["method"],
         "user": r["user"], "accuracy": r["score"], "epsilon": r["epsilon"],
         "guarantee": r["guarantee"]}
        for r in found
    ]  # fmt: skip


def privacy_grid(opts: RunOptions) -> list[dict[str, Any]]:
    """One setting per level of :data:`PRIVACY_LEVELS`."""
    return [{"privacy": level, "smoke": opts.smoke} for level in PRIVACY_LEVELS]


def report_privacy_sweep(
    table: pd.DataFrame, out_dir: Path, *, name: str, title: str, notes: str
) -> list[Path]:
    """Accuracy per privacy level and method: mean over users per seed, then mean ± SE over
    seeds; ``std`` is the standard deviation over users, averaged over seeds.  Writes
    ``name.{csv,md,png}``."""
    detail = table[["seed", "privacy", "method", "user", "accuracy", "epsilon", "guarantee"]]
    keys = ["privacy", "method"]
    per_seed = (
        detail.groupby(["seed", *keys], sort=False)["accuracy"]
        .agg(accuracy="mean", std="std")
        .reset_index()
    )
    spread = per_seed.groupby(keys, sort=False)["std"].mean().reset_index()
    summary = summarize(per_seed, keys, "accuracy").merge(spread, on=keys, how="left")
    return write_results(
        name, out_dir, table=detail.reset_index(drop=True), summary=summary,
        figure=bar_figure(summary), title=title,
        notes=notes + " mean ± SE: over seeds (n) of the mean accuracy over users; std: standard "
        "deviation of accuracy over users, averaged over seeds.",
        digits=None,
    )  # fmt: skip
