"""Figures of the domain-experts experiments, drawn from their tables (fl-domain-experts.txt Fig. 4,
6–8, 10, 11)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.container import BarContainer

from pubsubml.experiments.domain_experts.figures import (
    bar_figure,
    gate_figure,
    gate_maps,
    incentives_figure,
)

GRID = np.array([-1.0, 0.0, 1.0])


def _gates() -> pd.DataFrame:
    rows = []
    for seed in (0, 1):
        for user in (1, 2):
            rows += [{"seed": seed, "kind": "input", "user": user, "x": 0.5 * user + seed,
                      "y": 0.0, "alpha": np.nan}]  # fmt: skip
            for y in GRID:
                for x in GRID:
                    alpha = (0.2 if user == 1 else 0.8) + 0.1 * seed
                    rows.append({"seed": seed, "kind": "gate", "user": user, "x": x, "y": y,
                                 "alpha": alpha + 0.01 * x})  # fmt: skip
    return pd.DataFrame(rows)


def test_gate_maps_average_seeds_on_the_grid() -> None:
    maps = gate_maps(_gates(), 2)
    assert maps.shape == (3, 3)
    assert maps.columns.tolist() == GRID.tolist() and maps.index.tolist() == GRID.tolist()
    assert np.allclose(maps.to_numpy(), 0.85 + 0.01 * GRID[None, :])


def test_gate_figure_draws_inputs_truth_and_one_map_per_user() -> None:
    gates = _gates()
    fig = gate_figure(gates, lambda x, y: x + y)
    try:
        axes = fig.axes[:4]  # then the colorbars
        assert [ax.get_title() for ax in axes] == [
            "(a) test inputs", "(b) f(x, y)", "(c) gate α_1(x, y), Alg 1, σ = 0",
            "(d) gate α_2(x, y), Alg 1, σ = 0",
        ]  # fmt: skip
        # Only the first seed's test inputs are drawn: one point per user.
        offsets = [c.get_offsets() for c in axes[0].collections]
        assert [o.tolist() for o in offsets] == [[[0.5, 0.0]], [[1.0, 0.0]]]
    finally:
        plt.close(fig)


def test_bar_figure_draws_means_with_std_errors() -> None:
    summary = pd.DataFrame({
        "privacy": ["none", "none", "2", "2"],
        "method": ["Baseline", "FL", "Baseline", "DP-FL"],
        "mean": [0.8, 0.7, 0.8, 0.6],
        "std": [0.05, 0.02, 0.05, 0.03],
    })  # fmt: skip
    fig = bar_figure(summary)
    try:
        ax = fig.axes[0]
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        heights = {c.get_label(): [p.get_height() for p in c.patches] for c in bars}
        assert heights["Baseline"] == [0.8, 0.8]
        assert heights["(DP-)FL"] == [0.7, 0.6]  # DP-FL shares FL's bars
        assert [t.get_text() for t in ax.get_xticklabels()] == ["no privacy", "ε = 2"]
        assert ax.get_ylim() == (0.0, 1.0)
    finally:
        plt.close(fig)


def test_incentives_figure_has_the_three_panels() -> None:
    methods = ("Ind", "DP-FL", "FT-DP-FL", "MoE")
    joining = pd.DataFrame({"user": [1, 2], "n": [20, 40], "Ind": [0.9, 0.8], "DP-FL": [0.6, 0.7],
                            "FT-DP-FL": [0.7, 0.7], "MoE": [0.6, 0.6], "FL": [0.8, 0.8]})  # fmt: skip
    small = pd.DataFrame({"user": [1, 1], "method": ["Ind", "MoE"], "accuracy_full": [0.9, 0.6],
                          "accuracy_small": [0.9, 0.5]})  # fmt: skip
    eps = pd.DataFrame({"target_epsilon": [1.0, 2.0] * 4, "method": np.repeat(methods, 2),
                        "mean": np.linspace(0.5, 0.9, 8), "std": 0.01})  # fmt: skip
    fig = incentives_figure(joining, small, eps, methods)
    try:
        a, b, c = fig.axes
        assert [line.get_label() for line in a.get_lines()] == [*methods, "FL (no DP)"]
        assert a.get_lines()[0].get_ydata().tolist() == [0.9, 0.8]
        assert [p.get_height() for p in b.patches] == [0.6, 0.5]  # Ind is not drawn
        assert c.get_xscale() == "log"
    finally:
        plt.close(fig)
