"""Figures of the domain-experts experiments (fl-domain-experts.txt §4, §7), drawn from the tables.

:func:`gate_figure` draws Fig. 4 (a)–(d) from the gate records of ``domain-experts-regression``;
:func:`bar_figure` the accuracy bars of Fig. 6 and 7 from a privacy-sweep summary;
:func:`incentives_figure` the panels of Fig. 8, 10 and 11 from the incentives tables.  Each returns
the figure for :func:`~pubsubml.experiments.reports.write_results` to save.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

__all__ = ["bar_figure", "gate_figure", "incentives_figure"]

SWEEP_METHODS = ("Baseline", "FL", "Alg 1", "Alg 2", "FT-FL")
"""Bars of the privacy sweep; DP-FL and FT-DP-FL share FL's and FT-FL's bars."""


def gate_maps(gates: pd.DataFrame, user: int) -> pd.DataFrame:
    """α_user on the grid, averaged over seeds: rows y, columns x (both ascending).

    Examples
    --------
    >>> gates = pd.DataFrame({"seed": [0, 1, 0], "kind": "gate", "user": [1, 1, 1],
    ...                       "x": [0.0, 0.0, 1.0], "y": [0.0, 0.0, 0.0], "alpha": [0.2, 0.4, 1.0]})
    >>> gate_maps(gates, 1).round(2).to_numpy().tolist()
    [[0.3, 1.0]]
    """
    rows = gates[(gates["kind"] == "gate") & (gates["user"] == user)]
    return rows.pivot_table(index="y", columns="x", values="alpha", aggfunc="mean")


def gate_figure(
    gates: pd.DataFrame, truth: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> Figure:
    """Fig. 4 (a)–(d): the users' test inputs, ``truth`` f(x, y), and each user's gate α_u.

    Parameters
    ----------
    gates : DataFrame
        Columns ``seed, kind, user, x, y, alpha``: ``kind="input"`` rows are test inputs (the
        first seed's are drawn), ``kind="gate"`` rows the gate on a grid (averaged over seeds).
    truth : callable
        The regression target, drawn on the same grid.
    """
    inputs = gates[(gates["kind"] == "input") & (gates["seed"] == gates["seed"].min())]
    users = sorted(int(u) for u in gates.loc[gates["kind"] == "gate", "user"].unique())
    first = gate_maps(gates, users[0])
    gx, gy = np.meshgrid(first.columns.to_numpy(float), first.index.to_numpy(float))
    fig, axes = plt.subplots(1, 2 + len(users), figsize=(16, 3.8))
    for user, points in inputs.groupby("user", sort=True):
        axes[0].scatter(points["x"], points["y"], s=3, label=f"user {user}")
    axes[0].legend()
    axes[0].set_title("(a) test inputs")
    im = axes[1].contourf(gx, gy, truth(gx, gy), levels=30)
    fig.colorbar(im, ax=axes[1])
    axes[1].set_title("(b) f(x, y)")
    for i, user in enumerate(users):
        ax = axes[2 + i]
        alpha = gate_maps(gates, user).to_numpy(float)
        im = ax.contourf(gx, gy, alpha, levels=np.linspace(0, 1, 21), cmap="gray")
        own = inputs[inputs["user"] == user]
        ax.scatter(own["x"], own["y"], s=1, c="red", alpha=0.3)
        ax.set_title(f"({'cdefgh'[i]}) gate α_{user}(x, y), Alg 1, σ = 0")
        fig.colorbar(im, ax=ax)
    for ax in axes:
        ax.set_xlim(-4, 4)
        ax.set_ylim(-4, 4)
        ax.set_xlabel("x")
        ax.set_ylabel("y")
    fig.tight_layout()
    return fig


def bar_figure(summary: pd.DataFrame) -> Figure:
    """Accuracy per privacy level and method (Fig. 6, 7): bars ``mean``, error bars ``std``.

    ``summary`` has columns ``privacy`` (``"none"`` or an ε), ``method``, ``mean`` and ``std``.
    """
    fig, ax = plt.subplots(figsize=(8, 4))
    levels = list(dict.fromkeys(summary["privacy"]))
    width = 0.8 / len(SWEEP_METHODS)
    for j, method in enumerate(SWEEP_METHODS):
        vals, errs = [], []
        for level in levels:
            sel = summary[
                (summary["privacy"] == level) & summary["method"].str.replace("DP-", "").eq(method)
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
    return fig


def incentives_figure(
    joining: pd.DataFrame, small: pd.DataFrame, epsilon: pd.DataFrame, methods: Sequence[str]
) -> Figure:
    """Fig. 8, 10 and 11 analogues side by side.

    Parameters
    ----------
    joining : DataFrame
        One row per user sorted by size: ``user``, ``n``, the accuracy of each of ``methods`` and
        ``FL`` (no DP).
    small : DataFrame
        ``user, method, accuracy_full, accuracy_small`` of the small users.
    epsilon : DataFrame
        ``target_epsilon, method, mean, std``: accuracy over users per ε.
    methods : sequence of str
        The per-user methods (four markers).
    """
    fig, axes = plt.subplots(1, 3, figsize=(16, 4))
    pos = np.arange(len(joining))
    for method, marker in zip(methods, "osD^", strict=True):
        axes[0].plot(pos, joining[method], marker=marker, label=method)
    axes[0].plot(pos, joining["FL"], ls="--", color="gray", label="FL (no DP)")
    axes[0].set_xticks(pos)
    axes[0].set_xticklabels(
        [f"{u}\n({n})" for u, n in zip(joining["user"], joining["n"], strict=True)]
    )
    axes[0].set_xlabel("user (labelled rows), by size")
    axes[0].set_title("(a) accuracy per user, ε = 2 (Fig. 8)")
    fed = small[small["method"] != "Ind"]
    labels = [f"{m}\nu{u}" for m, u in zip(fed["method"], fed["user"], strict=True)]
    x = np.arange(len(fed))
    axes[1].bar(x - 0.2, fed["accuracy_full"], 0.4, label="all users")
    axes[1].bar(x + 0.2, fed["accuracy_small"], 0.4, label="small users only")
    axes[1].set_xticks(x)
    axes[1].set_xticklabels(labels, fontsize=6, rotation=90)
    axes[1].set_title("(b) small users, ε = 2 (Fig. 10)")
    for method in methods:
        sel = epsilon[epsilon["method"] == method]
        axes[2].errorbar(sel["target_epsilon"], sel["mean"], sel["std"], marker="o",
                         label=method, capsize=3)  # fmt: skip
    axes[2].set_xscale("log")
    axes[2].set_xlabel("target ε (δ = 1e-5)")
    axes[2].set_title("(c) mean accuracy over users (Fig. 11)")
    for ax in axes:
        ax.set_ylabel("accuracy")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
