"""Tables of ``domain-experts-incentives`` (fl-domain-experts.txt §4.4.4, §7) from its records.

The records are those of :func:`~pubsubml.experiments.domain_experts.incentives.incentives_fold`
(columns ``seed, federation, target_epsilon, user`` (0-based), ``n, method, accuracy, epsilon,
user_epsilon, sigma``, and ``leaver, leaver_n`` where a user left).  :func:`joining_table` (Fig. 8),
:func:`leave_table` (Table 4) and :func:`small_table` (Fig. 10) join the federations of each seed;
:func:`leave_summary` and :func:`epsilon_summary` (Fig. 11) reduce them to mean ± SE over seeds.
"""

from __future__ import annotations

import pandas as pd

from pubsubml.experiments.reports import mean_se_cell, summarize

__all__ = [
    "epsilon_summary",
    "joining_table",
    "leave_summary",
    "leave_table",
    "mean_se_cells",
    "seed_means",
    "small_table",
]


def _by_user(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.pivot_table(index=["seed", "user", "n"], columns="method", values="accuracy")


def joining_table(full: pd.DataFrame, plain: pd.DataFrame) -> pd.DataFrame:
    """Fig. 8 per seed: ``seed, user`` (1-based), ``n``, the accuracy of each method of ``full``
    (Ind, DP-FL, FT-DP-FL, MoE), ``FL`` and ``FT-FL`` (DP-FL and FT-DP-FL of ``plain``, the
    federation without DP) and ``user_epsilon``; users sorted by size."""
    table = _by_user(full)[list(dict.fromkeys(full["method"]))]
    reference = _by_user(plain).rename(columns={"DP-FL": "FL", "FT-DP-FL": "FT-FL"})
    table = table.join(reference[["FL", "FT-FL"]]).reset_index()
    spent = full[full["method"] == "Ind"][["seed", "user", "user_epsilon"]]
    table = table.merge(spent, on=["seed", "user"], how="left")
    table = table.sort_values(["seed", "n"], ignore_index=True)
    table["user"] += 1
    table.columns.name = None
    return table


def leave_table(full: pd.DataFrame, reduced: pd.DataFrame) -> pd.DataFrame:
    """Table 4 per seed and remaining user: accuracy in the ``full`` and ``reduced`` federation."""
    keys = ["seed", "user", "method"]
    before = full[[*keys, "accuracy"]].rename(columns={"accuracy": "full"})
    after = reduced[reduced["method"] != "Ind"].rename(columns={"accuracy": "reduced"})
    out = after.merge(before, on=keys, how="left")
    out["change"] = out["reduced"] - out["full"]
    out["user"] += 1
    out[["leaver", "leaver_n"]] = out[["leaver", "leaver_n"]].astype(int)
    cols = ["federation", "seed", "leaver", "leaver_n", "user", "n", "method"]
    return out[[*cols, "full", "reduced", "change"]]


def small_table(full: pd.DataFrame, alone: pd.DataFrame) -> pd.DataFrame:
    """Fig. 10 per seed: the small users' accuracy with everyone and among themselves."""
    keys = ["seed", "user", "n", "method"]
    both = full[[*keys, "accuracy", "epsilon"]].merge(
        alone[[*keys, "accuracy", "epsilon"]], on=keys, suffixes=("_full", "_small")
    )
    both = both[[*keys, "accuracy_full", "accuracy_small", "epsilon_small"]]
    both["user"] += 1
    return both


def mean_se_cells(frame: pd.DataFrame, by: list[str], columns: list[str]) -> pd.DataFrame:
    """``mean ± SE`` over seeds of each of ``columns`` per group of ``by``."""
    groups = frame.groupby(by, sort=False)[columns]
    return groups.agg(_mean_se_3).reset_index()


def _mean_se_3(values: pd.Series) -> str:
    return mean_se_cell(values, 3)


def seed_means(frame: pd.DataFrame, by: list[str], columns: list[str]) -> pd.DataFrame:
    """The mean over seeds of each of ``columns`` per group of ``by`` (what the figure draws)."""
    return frame.groupby(by, sort=False)[columns].mean().reset_index()


def _distinct(values: pd.Series) -> str:
    return ", ".join(str(v) for v in dict.fromkeys(values))


def leave_summary(leave: pd.DataFrame) -> pd.DataFrame:
    """Per leaver and method: mean ± SE over seeds of the mean change over the remaining users,
    and its min and max over users and seeds."""
    per_seed = (
        leave.groupby(["federation", "seed", "method"], sort=False)
        .agg(change=("change", "mean"), low=("change", "min"), high=("change", "max"),
             leaver=("leaver", "first"), leaver_n=("leaver_n", "first"))
        .reset_index()
    )  # fmt: skip
    keys = ["federation", "method"]
    facts = per_seed.groupby(keys, sort=False).agg(
        leaver=("leaver", _distinct), leaver_n=("leaver_n", _distinct),
        min=("low", "min"), max=("high", "max"),
    )  # fmt: skip
    out = summarize(per_seed, keys, "change").merge(facts.reset_index(), on=keys)
    return out[["leaver", "leaver_n", "method", "mean", "se", "n", "min", "max"]]


def epsilon_summary(sweep: pd.DataFrame) -> pd.DataFrame:
    """Per target ε and method: mean ± SE over seeds of the mean accuracy over users, ``std``
    over users (averaged over seeds) and the largest accounted ``epsilon``."""
    keys = ["target_epsilon", "method"]
    per_seed = (
        sweep.groupby(["seed", *keys], sort=False)
        .agg(accuracy=("accuracy", "mean"), std=("accuracy", "std"), epsilon=("epsilon", "max"))
        .reset_index()
    )
    facts = per_seed.groupby(keys, sort=False).agg(std=("std", "mean"), epsilon=("epsilon", "max"))
    return summarize(per_seed, keys, "accuracy").merge(facts.reset_index(), on=keys)
