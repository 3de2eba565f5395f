"""Incentives and stability of FL with private domain experts (fl-domain-experts.txt §4.4.4, §7).

On the many-domain classification stand-in (Hyperplane sites cut from one drifting stream, as in
:func:`pubsubml.experiments.domain_experts.experiments.classification_users`) but with users of different
sizes, ``domain-experts-incentives`` measures for every user whether joining pays: Ind (the user's
own model alone) vs DP-FL vs FT-DP-FL vs the MoE of Algorithm 2 (Fig. 8), the change in the others'
scores when one user leaves (Table 4), a federation of the small users only (Fig. 10), and the mean
score against ε (Fig. 11).  It writes ``docs/results/domain-experts-incentives*.{csv,md,png}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.data import hyperplane_chunks, hyperplane_schema
from pubsubml.errors import DataValidationError
from pubsubml.experiments.domain_experts.experiments import (
    DomainExpertsExperimentConfig,
    _linear_baseline,
    _module_predict,
    _tune,
    _write,
)
from pubsubml.methods.domain_experts.federation import DomainExpertsFL

__all__ = ["METHODS", "evaluate_user_federation", "run_incentives", "sized_users"]

METHODS = ("Ind", "DP-FL", "FT-DP-FL", "MoE")
"""Per-user methods of Fig. 8: own model, shared DP model, its fine-tuned copy, Algorithm 2."""


def _sizes(cfg: DomainExpertsExperimentConfig) -> list[int]:
    if cfg.smoke:
        return [20, 40, 80, 160]
    return [round(float(v)) for v in np.geomspace(40, 400, 10)]


def sized_users(sizes: list[int], n_test: int, seed: int) -> list[dict[str, Any]]:
    """Hyperplane sites of the classification stand-in with ``sizes[i]`` labelled rows each.

    Parameters
    ----------
    sizes : list of int
        Labelled rows of every user (each at least 4).
    n_test : int
        Test rows of every user.
    seed : int
        Seed of the stream (the sites share its initial concept, which drifts from site to site).

    Returns
    -------
    list of dict
        Per user ``train`` (all labelled rows, given to the federation and to Ind), ``tune`` (first
        half: fine-tuning) and ``val`` (second half: early stopping), ``test``; each an ``(X, y)``
        pair with X a DataFrame of shape (rows, 10) and y int labels in {0, 1}.

    Raises
    ------
    DataValidationError
        If a size is below 4 or ``n_test`` below 1.

    References
    ----------
    fl-domain-experts.txt §4.2 (50 labelled rows per user), §4.4.2 (users of very different sizes).

    Examples
    --------
    >>> users = sized_users([4, 8], n_test=5, seed=0)
    >>> [len(u["train"][0]) for u in users], [len(u["test"][0]) for u in users]
    ([4, 8], [5, 5])
    """
    if min(sizes) < 4 or n_test < 1:
        raise DataValidationError("every user needs at least 4 labelled rows and 1 test row")
    chunks = hyperplane_chunks(
        len(sizes), max(sizes) + n_test, seed=seed, n_features=10, n_drift_features=5,
        mag_change=0.002,
    )  # fmt: skip
    users = []
    for n, (X, y) in zip(sizes, chunks, strict=True):
        half = n // 2
        users.append({"train": (X[:n], y[:n]), "tune": (X[:half], y[:half]),
                      "val": (X[half:n], y[half:n]), "test": (X[-n_test:], y[-n_test:])})  # fmt: skip
    return users


def evaluate_user_federation(
    users: list[dict[str, Any]], epsilon: float | None, *, rounds: int, seed: int
) -> pd.DataFrame:
    """Fit one Algorithm-2 federation at ``epsilon`` and score every user with the four methods.

    Parameters
    ----------
    users : list of dict
        As returned by :func:`sized_users`.
    epsilon : float or None
        Target ε of every user at δ = 1e-5 (σ calibrated per user);
        None trains without clipping or noise (then DP-FL and FT-DP-FL are FL and FT-FL).
    rounds : int
        Federation rounds (expected batch 10, C = 1, linear models).
    seed : int
        Seed of the federation and of the fine-tuning.

    Returns
    -------
    DataFrame
        One row per user and method: ``user`` (index into ``users``), ``n``, ``method``,
        ``accuracy``, ``epsilon`` (the largest accounted user ε), ``user_epsilon`` (this user's
        accounted ε) and ``sigma`` (this user's noise multiplier).

    References
    ----------
    fl-domain-experts.txt §3.2.1 (Algorithm 2), §3.3 (FT-DP-FL), §4.4.3 (Ind, DP-FL, FT-DP-FL).
    """
    model = DomainExpertsFL(
        schema=hyperplane_schema(10), classes=[0, 1], algorithm=2, rounds=rounds, batch_size=10,
        gate_fraction=0.5, target_epsilon=epsilon or 1.0, target_delta=1e-5, lr_general=0.5,
        lr_private=0.05, lr_gate=0.05, dp=epsilon is not None, random_state=seed,
    ).fit([u["train"] for u in users])  # fmt: skip
    rows = []
    for i, u in enumerate(users):
        X, y = u["test"]
        preds = {
            "Ind": _linear_baseline(model, u["train"], X),
            "DP-FL": model.predict_general(X),
            "FT-DP-FL": _module_predict(model, _tune(model, model.general_, u, seed), X),
            "MoE": model.predict(X, user=i),
        }
        for method, pred in preds.items():
            rows.append({"user": i, "n": len(u["train"][0]), "method": method,
                         "accuracy": float(np.mean(pred == y)), "epsilon": model.epsilon_,
                         "user_epsilon": float(model.client_epsilons_[i]),
                         "sigma": float(model.noise_multiplier_[i])})  # fmt: skip
    return pd.DataFrame(rows)


def _wide(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.pivot_table(index=["user", "n"], columns="method", values="accuracy")[
        list(METHODS)
    ].reset_index()


def run_incentives(cfg: DomainExpertsExperimentConfig, out_dir: Path) -> pd.DataFrame:
    """Fig. 8, Table 4, Fig. 10 and Fig. 11 analogues; writes ``domain-experts-incentives*``.

    Returns
    -------
    DataFrame
        The per-user table at ε = 2: one row per user (sorted by size), columns ``user``, ``n``,
        the accuracy of each of :data:`METHODS`, of ``FL`` and ``FT-FL`` (no DP) and the
        user's spent ``user_epsilon``.

    References
    ----------
    fl-domain-experts.txt §4.4.4 (Fig. 8), §7.2 (Table 4), §7.3 (Fig. 10), §7.4 (Fig. 11).
    """
    sizes = _sizes(cfg)
    n_test, rounds = (50, 20) if cfg.smoke else (300, 300)
    eps_grid = (1.0, 2.0) if cfg.smoke else (0.5, 1.0, 2.0, 4.0, 8.0)
    users = sized_users(sizes, n_test, cfg.seed)
    setup = (
        f"{cfg.size} run: {len(sizes)} Hyperplane sites of one drifting stream with {sizes} "
        f"labelled rows (MoE: half expert, half gate; FT: half training, half early stopping; "
        f"Ind: logistic regression on all), {n_test} test rows each; Algorithm 2, {rounds} "
        "rounds, expected batch 10, C = 1, linear models, δ = 1e-5, σ calibrated per user to "
        "its own sampling rate and rounds; accuracy on each user's test rows."
    )
    runs = {
        eps: evaluate_user_federation(users, eps, rounds=rounds, seed=cfg.seed) for eps in eps_grid
    }
    full = runs[2.0]

    # Fig. 8: whether joining pays, users sorted by size.
    table = _wide(full)
    plain = _wide(evaluate_user_federation(users, None, rounds=rounds, seed=cfg.seed))
    table["FL"], table["FT-FL"] = plain["DP-FL"], plain["FT-DP-FL"]
    spent = full[full.method == "Ind"].set_index("user")
    table["user_epsilon"] = spent.user_epsilon.loc[table.user].to_numpy()
    table = table.sort_values("n", ignore_index=True)
    table["user"] += 1
    _write(table, out_dir / "domain-experts-incentives",
           title="Does joining pay? Accuracy per user at ε = 2 (fl-domain-experts.txt Fig. 8)",
           notes=setup + f" σ per user {full.sigma.min():.3g}–{full.sigma.max():.3g}. "
           "Users sorted by size; user k "
           "is site k of the stream. FL and FT-FL: the same federation without DP (reference); "
           "user_epsilon: the ε each user actually spent.")  # fmt: skip

    # Table 4: one user leaves (the largest, and one other drawn at random).
    largest = int(np.argmax(sizes))
    others = [i for i in range(len(sizes)) if i != largest]
    leavers = [largest, int(np.random.default_rng(cfg.seed).choice(others))]
    base = full.set_index(["user", "method"]).accuracy
    leave_rows = []
    # Reference: nobody leaves, the federation is only refitted with another seed (leaver 0).
    for who in [*leavers, -1]:
        keep = [i for i in range(len(users)) if i != who]
        part = evaluate_user_federation(
            [users[i] for i in keep], 2.0, rounds=rounds, seed=cfg.seed + (who < 0)
        )
        for r in part.to_dict("records"):
            user, method, after = keep[int(r["user"])], str(r["method"]), float(r["accuracy"])
            if method == "Ind":
                continue
            before = float(base[(user, method)])
            leave_rows.append({"leaver": who + 1, "leaver_n": sizes[who] if who >= 0 else 0,
                               "user": user + 1,
                               "n": int(r["n"]), "method": method, "full": before,
                               "reduced": after, "change": after - before})  # fmt: skip
    leave = pd.DataFrame(leave_rows)
    leave_summary = (
        leave.groupby(["leaver", "leaver_n", "method"], sort=False)["change"]
        .agg(mean="mean", min="min", max="max")
        .reset_index()
    )
    _write(leave_summary, out_dir / "domain-experts-incentives-leave",
           title="One user leaves (fl-domain-experts.txt §7.2, Table 4): change in the others' "
           "accuracy at ε = 2", notes=setup + " change = reduced − full federation, over the "
           "remaining users; per-user values in the CSV. Leaver 0 is a reference: nobody "
           "leaves, the full federation is refitted with the next seed (run-to-run "
           "variation).", detail=leave)  # fmt: skip

    # Fig. 10: the small users alone.
    small = [i for i in range(len(sizes)) if sizes[i] < float(np.median(sizes))]
    alone = evaluate_user_federation([users[i] for i in small], 2.0, rounds=rounds, seed=cfg.seed)
    alone["user"] = [small[int(u)] for u in alone.user]
    both = full[full.user.isin(small)].merge(
        alone, on=["user", "n", "method"], suffixes=("_full", "_small")
    )
    both = both[["user", "n", "method", "accuracy_full", "accuracy_small", "epsilon_small"]]
    both["user"] += 1
    _write(both, out_dir / "domain-experts-incentives-small",
           title="Federation of the small users only (fl-domain-experts.txt §7.3, Fig. 10), ε = 2",
           notes=setup + f" Small users: fewer labelled rows than the median ({len(small)} "
           "users); accuracy_full in the federation of all users, accuracy_small in theirs "
           "(Ind is the same in both).")  # fmt: skip

    # Fig. 11: mean accuracy vs ε.
    sweep = pd.concat([r.assign(target_epsilon=e) for e, r in runs.items()], ignore_index=True)
    eps_summary = (
        sweep.groupby(["target_epsilon", "method"], sort=False)
        .agg(mean=("accuracy", "mean"), std=("accuracy", "std"), epsilon=("epsilon", "max"))
        .reset_index()
    )
    _write(eps_summary, out_dir / "domain-experts-incentives-epsilon",
           title="Mean accuracy over users vs ε (fl-domain-experts.txt §7.4, Fig. 11)",
           notes=setup + " epsilon is the largest accounted user ε.", detail=sweep)  # fmt: skip
    _figure(table, both, eps_summary, out_dir / "domain-experts-incentives.png")
    return table


def _figure(table: pd.DataFrame, both: pd.DataFrame, eps: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    pos = np.arange(len(table))
    for method, marker in zip(METHODS, "osD^", strict=True):
        axes[0].plot(pos, table[method], marker=marker, label=method)
    axes[0].plot(pos, table["FL"], ls="--", color="gray", label="FL (no DP)")
    axes[0].set_xticks(pos)
    axes[0].set_xticklabels([f"{u}\n({n})" for u, n in zip(table.user, table.n, strict=True)])
    axes[0].set_xlabel("user (labelled rows), by size")
    axes[0].set_title("(a) accuracy per user, ε = 2 (Fig. 8)")
    fed = both[both.method != "Ind"]
    labels = [f"{m}\nu{u}" for m, u in zip(fed.method, fed.user, strict=True)]
    x = np.arange(len(fed))
    axes[1].bar(x - 0.2, fed.accuracy_full, 0.4, label="all users")
    axes[1].bar(x + 0.2, fed.accuracy_small, 0.4, label="small users only")
    axes[1].set_xticks(x)
    axes[1].set_xticklabels(labels, fontsize=6, rotation=90)
    axes[1].set_title("(b) small users, ε = 2 (Fig. 10)")
    for method in METHODS:
        sel = eps[eps.method == method]
        axes[2].errorbar(sel.target_epsilon, sel["mean"], sel["std"], marker="o", label=method,
                         capsize=3)  # fmt: skip
    axes[2].set_xscale("log")
    axes[2].set_xlabel("target ε (δ = 1e-5)")
    axes[2].set_title("(c) mean accuracy over users (Fig. 11)")
    for ax in axes:
        ax.set_ylabel("accuracy")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
