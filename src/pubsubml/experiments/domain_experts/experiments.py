"""Experiments of FL with private domain experts (fl-domain-experts.txt §4.1, §4.2).

``domain-experts-regression`` reproduces the synthetic regression of §4.1 (Fig. 4 and the RMSE
table of Fig. 5); ``domain-experts-classification`` stands in for the spam task of §4.2 (Fig. 6)
with many Hyperplane sites (the ECML/PKDD 2006 spam data is not shipped offline).  Each writes
``docs/results/domain-experts-*.{csv,md,png}``; ``smoke`` runs a seconds-long configuration.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from pubsubml.data import hyperplane_chunks, hyperplane_schema
from pubsubml.errors import PaperAccountingWarning
from pubsubml.methods.domain_experts.federation import DomainExpertsFL
from pubsubml.methods.domain_experts.finetune import fine_tune
from pubsubml.privacy.dpsgd import init_mlp
from pubsubml.schema import FeatureSchema

__all__ = [
    "EXPERIMENTS",
    "DomainExpertsExperimentConfig",
    "privacy_sweep",
    "regression_users",
    "run_classification",
    "run_regression",
]

Algorithm = Literal[1, 2]
ALGORITHMS: tuple[Algorithm, ...] = (1, 2)
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


@dataclass(frozen=True)
class DomainExpertsExperimentConfig:
    """Sizes of a run: ``smoke`` (CI, seconds) or ``full`` (a few minutes on 2 cores)."""

    size: Literal["smoke", "full"]
    seed: int = 0

    @property
    def smoke(self) -> bool:
        """Whether this is the tiny CI configuration."""
        return self.size == "smoke"


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


def _rmse(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def _module_predict(model: DomainExpertsFL, module: torch.nn.Module, X: pd.DataFrame) -> np.ndarray:
    with torch.no_grad():
        out = module(model.encode(X))
    if model.task == "regression":
        return out[:, 0].numpy().astype(float)
    return np.asarray(model.classes_[out.argmax(1).numpy()])


def _linear_baseline(
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


def _tune(model: DomainExpertsFL, start: torch.nn.Module, user: dict[str, Any], seed: int) -> Any:
    (X, y), (Xv, yv) = user.get("tune", user["train"]), user["val"]
    return fine_tune(
        start,
        model.encode(X),
        model.encode_target(y, len(X)),
        model.encode(Xv),
        model.encode_target(yv, len(Xv)),
        task=model.task,
        seed=seed,
    )


def _methods(
    users: list[dict[str, Any]],
    make: Callable[[Algorithm, float | None, bool], DomainExpertsFL],
    privacy: float | None,
    dp: bool,
    score: Callable[[np.ndarray, np.ndarray], float],
    seed: int,
) -> tuple[list[dict[str, Any]], dict[Algorithm, DomainExpertsFL]]:
    """Scores of Baseline, FL (M_G of Algorithm 2), Alg 1, Alg 2 and FT-(DP-)FL per user.

    Each user is a dict of ``(X, y)`` splits: ``train`` (given to the federation), ``val``
    (early stopping), ``test``, and optionally ``tune`` (local training rows; default ``train``).
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
            base = _linear_baseline(fl, u["train"], X)
        else:
            fresh = init_mlp(sizes, fl.activation, torch.Generator().manual_seed(seed + i))
            base = _module_predict(fl, _tune(fl, fresh, u, seed), X)
        scores = {
            "Baseline": score(base, y),
            "FL": score(fl.predict_general(X), y),
            "Alg 1": score(fits[1].predict(X, user=i), y),
            "Alg 2": score(fits[2].predict(X, user=i), y),
            "FT-FL": score(_module_predict(fl, _tune(fl, fl.general_, u, seed), X), y),
        }
        for method, value in scores.items():
            eps, guarantee = released[method]
            rows.append(
                {
                    "user": i + 1,
                    "method": method,
                    "score": value,
                    "epsilon": eps,
                    "guarantee": guarantee,
                }
            )
    return rows, fits


def run_regression(cfg: DomainExpertsExperimentConfig, out_dir: Path) -> pd.DataFrame:
    """§4.1: RMSE per user for σ ∈ {0, 2, 4}; writes the table and the gate heat-maps."""
    n = (200, 50, 100) if cfg.smoke else (2500, 500, 500)
    rounds = 60 if cfg.smoke else 1500
    users = regression_users(*n, seed=cfg.seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    schema = FeatureSchema.numeric(["x", "y"], lower=-BOUND, upper=BOUND)

    def make(alg: Algorithm, sigma: float | None, dp: bool) -> DomainExpertsFL:
        return DomainExpertsFL(
            schema=schema, task="regression", algorithm=alg, rounds=rounds, batch_size=50,
            noise_multiplier=sigma, max_grad_norm=1.0, lr_general=1.0, lr_private=0.05,
            lr_gate=0.05, dp=dp, random_state=cfg.seed,
        )  # fmt: skip

    rows = []
    for sigma in (0.0, 2.0, 4.0):
        found, fits = _methods(users, make, sigma, True, _rmse, cfg.seed)
        for r in found:
            r["sigma"] = sigma
            name = "FT-DP-FL" if r["method"] == "FT-FL" and sigma > 0 else r["method"]
            r["method"] = name
            paper = PAPER_RMSE.get((name, 0.0 if name == "Baseline" else sigma))
            r["paper"] = paper[r["user"] - 1] if paper else math.nan
        rows += found
        if sigma == 0.0:
            _gate_figure(fits[1], users, out_dir / "domain-experts-regression-gates.png")
    frame = pd.DataFrame(rows)[
        ["sigma", "method", "user", "score", "paper", "epsilon", "guarantee"]
    ]
    frame = frame.rename(columns={"score": "rmse", "paper": "paper_rmse"})
    _write(
        frame,
        out_dir / "domain-experts-regression",
        title="Synthetic regression (fl-domain-experts.txt §4.1, Fig. 5): test RMSE per user",
        notes=f"{cfg.size} run: {n[0]}/{n[1]}/{n[2]} train/val/test rows per user, {rounds} "
        "rounds, batch 50, C = 1, linear models. FL is the general model of the Algorithm-2 run "
        "(trained exactly as DP-FL, §3.2.1) on the expert half of the training rows; Baseline is "
        "each user's least-squares linear fit on all its training rows; FT-(DP-)FL fine-tunes "
        "M_G on them with early stopping on the validation rows; paper_rmse "
        "is blank where the paper has no number. The users' Gaussians are not given in the paper "
        f"(here means {MEANS}, std {STD}).",
    )
    return frame


def _gate_figure(model: DomainExpertsFL, users: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(-4, 4, 121)
    gx, gy = np.meshgrid(grid, grid)
    frame = pd.DataFrame({"x": gx.ravel(), "y": gy.ravel()})
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    for i, u in enumerate(users):
        X, _ = u["test"]
        axes[0].scatter(X.x, X.y, s=3, label=f"user {i + 1}")
    axes[0].legend()
    axes[0].set_title("(a) test inputs")
    im = axes[1].contourf(gx, gy, target(gx, gy), levels=30)
    fig.colorbar(im, ax=axes[1])
    axes[1].set_title("(b) f(x, y)")
    for i in range(2):
        alpha = model.gate(frame, user=i).reshape(gx.shape)
        im = axes[2 + i].contourf(gx, gy, alpha, levels=np.linspace(0, 1, 21), cmap="gray")
        X, _ = users[i]["test"]
        axes[2 + i].scatter(X.x, X.y, s=1, c="red", alpha=0.3)
        axes[2 + i].set_title(f"({'cd'[i]}) gate α_{i + 1}(x, y), Alg 1, σ = 0")
        fig.colorbar(im, ax=axes[2 + i])
    for ax in axes:
        ax.set_xlim(-4, 4)
        ax.set_ylim(-4, 4)
        ax.set_xlabel("x")
        ax.set_ylabel("y")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def classification_users(
    cfg: DomainExpertsExperimentConfig,
) -> list[dict[str, tuple[pd.DataFrame, Any]]]:
    """15 Hyperplane sites cut from one drifting stream: 50 labeled rows (train 25 + val 25)
    and 350 test rows each; the shared initial concept rotates from site to site."""
    n_users = 5 if cfg.smoke else 15
    chunks = hyperplane_chunks(
        n_users, 400, seed=cfg.seed, n_features=10, n_drift_features=5, mag_change=0.002
    )
    users = []
    for X, y in chunks:
        users.append({"train": (X[:25], y[:25]), "val": (X[25:50], y[25:50]),
                      "test": (X[50:], y[50:])})  # fmt: skip
    return users


def run_classification(cfg: DomainExpertsExperimentConfig, out_dir: Path) -> pd.DataFrame:
    """§4.2 analogue: accuracy per user and method at no privacy, ε = 4 and ε = 2 (δ = 1e-5)."""
    users = classification_users(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    # The MoE's gate trains on the validation half (H); FL, baseline and FT use the same 50 rows.
    rounds = 30 if cfg.smoke else 300

    def make(alg: Algorithm, eps: float | None, dp: bool) -> DomainExpertsFL:
        return DomainExpertsFL(
            schema=hyperplane_schema(10), classes=[0, 1], algorithm=alg, rounds=rounds,
            batch_size=10, gate_fraction=0.5, target_epsilon=eps or 1.0, target_delta=1e-5,
            lr_general=0.5, lr_private=0.05, lr_gate=0.05, dp=dp, random_state=cfg.seed,
        )  # fmt: skip

    # "train" (all 50 rows) feeds the federation; "tune" (25) and "val" (25) the local training.
    merged = [{"train": (pd.concat([u["train"][0], u["val"][0]], ignore_index=True),
                         np.concatenate([u["train"][1], u["val"][1]])),
               "tune": u["train"], "val": u["val"], "test": u["test"]} for u in users]  # fmt: skip
    return privacy_sweep(
        merged,
        make,
        cfg,
        out_dir / "domain-experts-classification",
        title="Many-domain classification (stand-in for fl-domain-experts.txt §4.2, Fig. 6)",
        notes=f"{cfg.size} run: {len(users)} Hyperplane sites, 50 labeled rows each "
        f"(MoE: 25 expert + 25 gate rows; Baseline: logistic regression on all 50; FT: 25 train + "
        "25 validation), 350 test rows, "
        f"{rounds} rounds, batch 10, C = 1, linear models; mean and std of accuracy over sites.",
    )


def privacy_sweep(
    users: list[dict[str, Any]],
    make: Callable[[Algorithm, float | None, bool], DomainExpertsFL],
    cfg: DomainExpertsExperimentConfig,
    stem: Path,
    *,
    title: str,
    notes: str,
) -> pd.DataFrame:
    """Accuracy of every method at no privacy, ε = 4 and ε = 2; writes ``stem.{csv,md,png}``.

    Returns
    -------
    DataFrame with columns privacy, method, mean, std (over users)
    """

    def acc(pred: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(pred == y))

    rows = []
    for label, eps, dp in (("none", None, False), ("4", 4.0, True), ("2", 2.0, True)):
        found, _ = _methods(users, make, eps, dp, acc, cfg.seed)
        for r in found:
            r["privacy"] = label
            if r["method"] == "FT-FL" and dp:
                r["method"] = "FT-DP-FL"
            if r["method"] == "FL" and dp:
                r["method"] = "DP-FL"
        rows += found
    frame = pd.DataFrame(rows).rename(columns={"score": "accuracy"})
    frame = frame[["privacy", "method", "user", "accuracy", "epsilon", "guarantee"]]
    summary = (
        frame.groupby(["privacy", "method"], sort=False)["accuracy"]
        .agg(["mean", "std"])
        .reset_index()
    )
    _write(summary, stem, title=title, notes=notes, detail=frame)
    _bar_figure(summary, stem.with_suffix(".png"))
    return summary


def _bar_figure(summary: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    levels = list(dict.fromkeys(summary.privacy))
    methods = ["Baseline", "FL", "Alg 1", "Alg 2", "FT-FL"]
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        vals, errs = [], []
        for level in levels:
            sel = summary[
                (summary.privacy == level) & summary.method.str.replace("DP-", "").eq(method)
            ]
            vals.append(float(sel["mean"].iloc[0]) if len(sel) else np.nan)
            errs.append(float(sel["std"].iloc[0]) if len(sel) else np.nan)
        label = {"FL": "(DP-)FL", "FT-FL": "FT-(DP-)FL"}.get(method, method)
        ax.bar(np.arange(len(levels)) + j * width, vals, width, yerr=errs, label=label)
    ax.set_xticks(np.arange(len(levels)) + 0.4 - width / 2)
    ax.set_xticklabels([f"ε = {v}" if v != "none" else "no privacy" for v in levels])
    ax.set_ylabel("accuracy")
    ax.set_ylim(0.0, 1.0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _write(
    frame: pd.DataFrame,
    stem: Path,
    *,
    title: str,
    notes: str,
    detail: pd.DataFrame | None = None,
) -> None:
    stem.parent.mkdir(parents=True, exist_ok=True)
    (detail if detail is not None else frame).to_csv(stem.with_suffix(".csv"), index=False)
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    lines = [f"# {title}", "", notes, "", header, "|" + "---|" * len(frame.columns)]
    for row in frame.itertuples(index=False):
        cells = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")


EXPERIMENTS: dict[str, Callable[[DomainExpertsExperimentConfig, Path], pd.DataFrame]] = {
    "domain-experts-classification": run_classification,
    "domain-experts-regression": run_regression,
}
