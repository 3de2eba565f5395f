"""Incentives and stability of FL with private domain experts (fl-domain-experts.txt §4.4.4, §7).

On the many-domain classification stand-in (Hyperplane sites cut from one drifting stream, as in
:func:`pubsubml.experiments.domain_experts.experiments.classification_users`) but with users of
different sizes, ``domain-experts-incentives`` (:data:`INCENTIVES`) measures for every user whether
joining pays: Ind (the user's own model alone) vs DP-FL vs FT-DP-FL vs the MoE of Algorithm 2
(Fig. 8), the change in the others' scores when one user leaves (Table 4), a federation of the
small users only (Fig. 10), and the mean score against ε (Fig. 11).  Each federation of a seed is
one setting of the grid (:data:`FEDERATIONS`); the report joins them into
``docs/results/domain-experts-incentives*.{csv,md,png}``.  It is not cross-validated.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pubsubml.data import hyperplane_chunks, hyperplane_schema
from pubsubml.errors import DataValidationError
from pubsubml.experiments.base import Experiment, RunOptions
from pubsubml.experiments.domain_experts.compared import (
    linear_baseline,
    module_predict,
    run_label,
    tune,
)
from pubsubml.experiments.domain_experts.figures import incentives_figure
from pubsubml.experiments.domain_experts.incentive_tables import (
    epsilon_summary,
    joining_table,
    leave_summary,
    leave_table,
    mean_se_cells,
    seed_means,
    small_table,
)
from pubsubml.experiments.reports import write_results
from pubsubml.experiments.runner import Record
from pubsubml.methods.domain_experts.federation import DomainExpertsFL

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "FEDERATIONS",
    "INCENTIVES",
    "METHODS",
    "evaluate_user_federation",
    "federation_members",
    "incentives_fold",
    "report_incentives",
    "sized_users",
]

METHODS = ("Ind", "DP-FL", "FT-DP-FL", "MoE")
"""Per-user methods of Fig. 8: own model, shared DP model, its fine-tuned copy, Algorithm 2."""
FEDERATIONS = ("all", "all-no-dp", "without-largest", "without-random", "refit", "small")
"""The federations of one seed: every user (one per ε of the sweep), every user without DP, the
largest user left out, a random other user left out, every user refitted with the next seed (the
run-to-run reference of Table 4) and the users below the median size."""
LEAVING = ("without-largest", "without-random", "refit")
EPSILON = 2.0
"""Target ε of Fig. 8, Table 4 and Fig. 10."""
NAME = "domain-experts-incentives"
ACCURACIES = [*METHODS, "FL", "FT-FL"]
SWEEP_COLUMNS = [
    "seed", "user", "n", "method", "accuracy", "epsilon", "user_epsilon", "sigma", "target_epsilon"
]  # fmt: skip


@dataclass(frozen=True)
class IncentivesSize:
    """Labelled rows per user, test rows per user, rounds and the ε of the sweep (Fig. 11)."""

    sizes: tuple[int, ...]
    n_test: int
    rounds: int
    epsilons: tuple[float, ...]


def incentives_size(smoke: bool) -> IncentivesSize:
    """10 users of 40 … 400 rows (geometric), or the smoke run's 4 users of 20 … 160."""
    if smoke:
        return IncentivesSize((20, 40, 80, 160), 50, 20, (1.0, 2.0))
    sizes = tuple(round(float(v)) for v in np.geomspace(40, 400, 10))
    return IncentivesSize(sizes, 300, 300, (0.5, 1.0, 2.0, 4.0, 8.0))


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
            "Ind": linear_baseline(model, u["train"], X),
            "DP-FL": model.predict_general(X),
            "FT-DP-FL": module_predict(model, tune(model, model.general_, u, seed), X),
            "MoE": model.predict(X, user=i),
        }
        for method, pred in preds.items():
            rows.append({"user": i, "n": len(u["train"][0]), "method": method,
                         "accuracy": float(np.mean(pred == y)), "epsilon": model.epsilon_,
                         "user_epsilon": float(model.client_epsilons_[i]),
                         "sigma": float(model.noise_multiplier_[i])})  # fmt: skip
    return pd.DataFrame(rows)


def federation_members(federation: str, sizes: tuple[int, ...], seed: int) -> tuple[list[int], int]:
    """The users (indices into ``sizes``) of one of :data:`FEDERATIONS`, and who left.

    The leaver is the index of the user left out by ``without-largest`` (the largest user) or
    ``without-random`` (one of the others, drawn with ``seed``), -1 for ``refit`` (nobody
    leaves), and -2 where the question does not arise.

    Examples
    --------
    >>> federation_members("without-largest", (20, 80, 40), seed=0)
    ([0, 2], 1)
    >>> federation_members("small", (20, 80, 40), seed=0)
    ([0], -2)
    """
    everyone = list(range(len(sizes)))
    largest = int(np.argmax(sizes))
    if federation in ("all", "all-no-dp"):
        return everyone, -2
    if federation == "refit":
        return everyone, -1
    if federation == "small":
        return [i for i in everyone if sizes[i] < float(np.median(sizes))], -2
    if federation == "without-largest":
        return [i for i in everyone if i != largest], largest
    if federation == "without-random":
        others = [i for i in everyone if i != largest]
        who = int(np.random.default_rng(seed).choice(others))
        return [i for i in everyone if i != who], who
    raise ValueError(f"unknown federation {federation!r}; choose from {FEDERATIONS}")


def incentives_fold(
    seed: int, fold: int, *, federation: str, target_epsilon: float | None, smoke: bool
) -> list[Record]:
    """One federation of one seed: per member user and method ``user`` (index among all users),
    ``n``, ``method``, ``accuracy``, ``epsilon``, ``user_epsilon``, ``sigma``; federations where
    a user left add ``leaver`` (1-based, 0 for ``refit``) and its ``leaver_n``."""
    size = incentives_size(smoke)
    users = sized_users(list(size.sizes), size.n_test, seed)
    members, leaver = federation_members(federation, size.sizes, seed)
    # The reference of Table 4: nobody leaves, the federation is only refitted with another seed.
    fit_seed = seed + 1 if federation == "refit" else seed
    part = evaluate_user_federation(
        [users[i] for i in members], target_epsilon, rounds=size.rounds, seed=fit_seed
    )
    part["user"] = [members[int(u)] for u in part["user"]]
    records: list[Record] = [{str(k): v for k, v in r.items()} for r in part.to_dict("records")]
    if leaver > -2:
        for r in records:
            r["leaver"] = leaver + 1
            r["leaver_n"] = size.sizes[leaver] if leaver >= 0 else 0
    return records


def _incentives_grid(opts: RunOptions) -> list[dict[str, Any]]:
    grid: list[dict[str, Any]] = [
        {"federation": "all", "target_epsilon": eps} for eps in incentives_size(opts.smoke).epsilons
    ]
    grid.append({"federation": "all-no-dp", "target_epsilon": None})
    grid += [{"federation": f, "target_epsilon": EPSILON} for f in (*LEAVING, "small")]
    return [{**setting, "smoke": opts.smoke} for setting in grid]


def _setup(size: IncentivesSize, opts: RunOptions) -> str:
    return (
        f"{run_label(opts)}: {len(size.sizes)} Hyperplane sites of one drifting stream with "
        f"{list(size.sizes)} labelled rows (MoE: half expert, half gate; FT: half training, half "
        f"early stopping; Ind: logistic regression on all), {size.n_test} test rows each; "
        f"Algorithm 2, {size.rounds} rounds, expected batch 10, C = 1, linear models, δ = 1e-5, σ "
        "calibrated per user to its own sampling rate and rounds; accuracy on each user's test "
        "rows."
    )


def _write_joining(
    joining: pd.DataFrame, full: pd.DataFrame, figure: Figure, out_dir: Path, setup: str
) -> list[Path]:
    cells = mean_se_cells(joining, ["user", "n"], ACCURACIES)
    cells["user_epsilon"] = seed_means(joining, ["user", "n"], ["user_epsilon"])["user_epsilon"]
    return write_results(
        NAME, out_dir, table=joining, summary=cells, figure=figure,
        title="Does joining pay? Accuracy per user at ε = 2 (fl-domain-experts.txt Fig. 8)",
        notes=setup + f" σ per user {full.sigma.min():.3g}–{full.sigma.max():.3g}. Users sorted "
        "by size; user k is site k of the stream. FL and FT-FL: the same federation without DP "
        "(reference); user_epsilon: the ε each user actually spent (mean over seeds). Cells: "
        "mean ± SE over seeds.",
        digits=None,
    )  # fmt: skip


def _write_leave(leave: pd.DataFrame, out_dir: Path, setup: str) -> list[Path]:
    return write_results(
        f"{NAME}-leave", out_dir, table=leave.drop(columns="federation"),
        summary=leave_summary(leave),
        title="One user leaves (fl-domain-experts.txt §7.2, Table 4): change in the others' "
        "accuracy at ε = 2",
        notes=setup + " change = reduced − full federation, over the remaining users; per-user "
        "values in the CSV. mean ± SE: over seeds (n) of the mean change; min and max over users "
        "and seeds. Leaver 0 is a reference: nobody leaves, the full federation is refitted with "
        "the next seed (run-to-run variation). The random leaver is drawn per seed.",
        digits=None,
    )  # fmt: skip


def _write_small(small: pd.DataFrame, out_dir: Path, setup: str) -> list[Path]:
    by = ["user", "n", "method"]
    cells = mean_se_cells(small, by, ["accuracy_full", "accuracy_small"])
    cells["epsilon_small"] = seed_means(small, by, ["epsilon_small"])["epsilon_small"]
    return write_results(
        f"{NAME}-small", out_dir, table=small, summary=cells,
        title="Federation of the small users only (fl-domain-experts.txt §7.3, Fig. 10), ε = 2",
        notes=setup + f" Small users: fewer labelled rows than the median "
        f"({small['user'].nunique()} users); accuracy_full in the federation of all users, "
        "accuracy_small in theirs (Ind is the same in both). Cells: mean ± SE over seeds; "
        "epsilon_small: mean over seeds.",
        digits=None,
    )  # fmt: skip


def _write_epsilon(
    sweep: pd.DataFrame, summary: pd.DataFrame, out_dir: Path, setup: str
) -> list[Path]:
    return write_results(
        f"{NAME}-epsilon", out_dir, table=sweep, summary=summary,
        title="Mean accuracy over users vs ε (fl-domain-experts.txt §7.4, Fig. 11)",
        notes=setup + " mean ± SE: over seeds (n) of the mean accuracy over users; std: over "
        "users, averaged over seeds; epsilon is the largest accounted user ε.",
        digits=None,
    )  # fmt: skip


def report_incentives(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    """Fig. 8, Table 4, Fig. 10 and Fig. 11 analogues: ``domain-experts-incentives{,-leave,
    -small,-epsilon}.{csv,md}`` and ``domain-experts-incentives.png``; mean ± SE over seeds.

    References
    ----------
    fl-domain-experts.txt §4.4.4 (Fig. 8), §7.2 (Table 4), §7.3 (Fig. 10), §7.4 (Fig. 11).
    """
    setup = _setup(incentives_size(opts.smoke), opts)
    everyone = table[table["federation"] == "all"]
    full = everyone[everyone["target_epsilon"] == EPSILON]
    joining = joining_table(full, table[table["federation"] == "all-no-dp"])
    small = small_table(full, table[table["federation"] == "small"])
    sweep = everyone[SWEEP_COLUMNS].reset_index(drop=True)
    by_eps = epsilon_summary(sweep)
    figure = incentives_figure(
        seed_means(joining, ["user", "n"], ACCURACIES),
        seed_means(small, ["user", "n", "method"], ["accuracy_full", "accuracy_small"]),
        by_eps,
        METHODS,
    )
    return [
        *_write_joining(joining, full, figure, out_dir, setup),
        *_write_leave(leave_table(full, table[table["federation"].isin(LEAVING)]), out_dir, setup),
        *_write_small(small, out_dir, setup),
        *_write_epsilon(sweep, by_eps, out_dir, setup),
    ]


INCENTIVES = Experiment(
    NAME,
    "Fig. 8, Table 4, Fig. 10, 11: does joining pay, one user leaves, small users, ε "
    "(fl-domain-experts.txt §4.4.4, §7).",
    grid=_incentives_grid,
    run_fold=incentives_fold,
    report=report_incentives,
    folds=1,
    min_folds=1,
    max_folds=1,
    folds_help="no cross-validation: one set of federations per seed, scored on each user's "
    "test rows",
)
"""§4.4.4 and §7: 10 Hyperplane sites of 40 … 400 labelled rows, Algorithm 2, ε = 2 and a sweep."""
