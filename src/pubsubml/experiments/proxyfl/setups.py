"""Settings and reductions shared by the ProxyFL benchmarks (proxyfl.txt §4.1–4.2).

The runs use the §4.1 hyper-parameters on two offline data sets (see
:mod:`pubsubml.experiments.proxyfl.experiments`) for 50 rounds instead of 300.  The paper reports
"mean and standard deviation over 8 clients for each of 5 independent runs" (Fig. 3, Fig. 5); with
one seed the tables give the mean ± standard deviation over clients, with several seeds the mean ±
standard error over seeds of the mean over clients (:func:`client_spread`).

Examples
--------
>>> [s.dataset for s in setups(smoke=False)], [s.rounds for s in setups(smoke=True)]
(['mnist1d', 'digits'], [2])
>>> model_label("ProxyFL", "private"), model_label("FedAvg", "proxy")
('ProxyFL-private', 'FedAvg')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.experiments.base import RunOptions
from pubsubml.experiments.reports import summarize
from pubsubml.methods.proxyfl.protocol import DMLConfig

__all__ = [
    "METHODS",
    "ROUNDS",
    "Setup",
    "add_model_labels",
    "client_spread",
    "command_line",
    "describe",
    "final_rounds",
    "model_label",
    "setup_for",
    "setups",
    "spread_description",
]

METHODS = ("Regular", "Joint", "FedAvg", "AvgPush", "CWT", "FML", "ProxyFL")
ROUNDS = 50  # the paper runs 300; 50 keeps every bench within minutes on 2 cores
_WITH_PRIVATE_MODELS = ("FML", "ProxyFL")


@dataclass(frozen=True)
class Setup:
    """One data set's configuration of the runs.

    Attributes
    ----------
    dataset : str
        ``"mnist1d"`` or ``"digits"``.
    rounds : int
        Rounds of Algorithm 1.
    config : DMLConfig
        DP-SGD and mutual-learning settings (§4.1).
    split_kw : dict
        Keyword arguments of :func:`~pubsubml.experiments.proxyfl.experiments.make_federated`
        beyond the data set and the seed.
    """

    dataset: str
    rounds: int
    config: DMLConfig
    split_kw: dict[str, Any]


def setups(smoke: bool) -> list[Setup]:
    """The data sets of Fig. 3's analogue: mnist1d and digits, or one tiny digits run (smoke)."""
    if smoke:
        small = {"n_clients": 4, "n_per_client": 40, "n_test_per_client": 10}
        return [Setup("digits", 2, DMLConfig(batch_size=10, delta=1e-3), small)]
    return [
        Setup("mnist1d", ROUNDS, DMLConfig(), {}),  # §4.1 settings: B 250, σ 1, C 1, δ 1e-5
        Setup("digits", ROUNDS, DMLConfig(batch_size=30), {}),  # 120 rows per client: q = 0.25
    ]


def setup_for(dataset: str, smoke: bool) -> Setup:
    """The :class:`Setup` of ``dataset``; ``ValueError`` when it is not run in this configuration."""
    for setup in setups(smoke):
        if setup.dataset == dataset:
            return setup
    raise ValueError(f"no {'smoke ' if smoke else ''}setup for data set {dataset!r}")


def describe(setup: Setup) -> str:
    """One line with the rounds and the §4.1 hyper-parameters of ``setup``."""
    c = setup.config
    return (
        f"{setup.rounds} rounds, B={c.batch_size}, σ={c.noise_multiplier}, C={c.max_grad_norm}, "
        f"δ={c.delta:g}, α=β={c.alpha}, Adam lr={c.lr}, wd={c.weight_decay}, "
        f"{setup.split_kw or 'default split'}"
    )


def command_line(name: str, options: RunOptions) -> str:
    """The ``pubsubml bench`` command that gives these results.

    Examples
    --------
    >>> command_line("proxyfl-accuracy", RunOptions(seeds=3, smoke=True))
    'pubsubml bench proxyfl-accuracy --seeds 3 --smoke'
    """
    seeds = f" --seeds {options.seeds}" if options.seeds != 1 else ""
    return f"pubsubml bench {name}{seeds}{' --smoke' if options.smoke else ''}"


def model_label(method: str, model: str) -> str:
    """``"ProxyFL-private"``, ``"FML-proxy"``; the method alone when it has one model per client."""
    return f"{method}-{model}" if method in _WITH_PRIVATE_MODELS else method


def add_model_labels(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with a ``label`` column: :func:`model_label` of ``method`` and ``model``."""
    labels = np.where(
        rows["method"].isin(_WITH_PRIVATE_MODELS),
        rows["method"].astype(str) + "-" + rows["model"].astype(str),
        rows["method"].astype(str),
    )
    return rows.assign(label=labels)


def final_rounds(rows: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """The rows of the last round of each group of ``by`` (a method's final models)."""
    last = rows.groupby(list(by))["round"].transform("max")
    return rows[rows["round"] == last]


def client_spread(rows: pd.DataFrame, by: Sequence[str], value: str, seeds: int) -> pd.DataFrame:
    """Mean and spread of ``value`` per group of ``by`` (columns ``*by, mean, spread``, sorted).

    With one seed the spread is the standard deviation over the clients (as the paper's error
    bars, Fig. 3 and Fig. 5); with several seeds, the mean and standard error over seeds of each
    seed's mean over clients.

    Examples
    --------
    >>> rows = pd.DataFrame({"m": ["a"] * 4, "seed": [0, 0, 1, 1], "acc": [0.1, 0.3, 0.5, 0.7]})
    >>> client_spread(rows, ["m"], "acc", seeds=2).round(3).to_dict("records")
    [{'m': 'a', 'mean': 0.4, 'spread': 0.2}]
    """
    by = list(by)
    if seeds == 1:
        out = rows.groupby(by)[value].agg(["mean", "std"]).reset_index()
        return out.rename(columns={"std": "spread"})
    per_seed = rows.groupby([*by, "seed"])[value].mean().reset_index()
    out = summarize(per_seed, by, value).rename(columns={"se": "spread"})
    return out[[*by, "mean", "spread"]].sort_values(by).reset_index(drop=True)


def spread_description(seeds: int) -> str:
    """What the ``±`` of :func:`client_spread` means, for titles."""
    if seeds == 1:
        return "mean ± std over clients"
    return f"mean ± SE over {seeds} seeds of the mean over clients"
