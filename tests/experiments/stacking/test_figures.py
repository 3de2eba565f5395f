"""Tables and figures of the stacking experiments: mean ± SE over seeds, binned curves, Fig. 3f."""

from __future__ import annotations

from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from pubsubml.experiments.stacking.figures import (
    METRICS,
    binned_plot,
    dp_bars,
    importance_matrix,
    mean_se_by,
    per_seed,
    summary_table,
)


class RecordingAxes:
    """Stands in for a matplotlib Axes: keeps the arguments of ``errorbar``."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def errorbar(self, x: Any, y: Any, yerr: Any, **kw: Any) -> None:
        self.calls.append((np.asarray(x), np.asarray(y), np.asarray(yerr)))


def client_rows(gains: dict[int, float], jitters: tuple[float, ...]) -> pd.DataFrame:
    """Per-client records: one setting ``s``, seeds × repeats × 2 clients, gain = base + jitter."""
    rows = []
    for seed, base in gains.items():
        for fold, jitter in enumerate(jitters):
            for client in ("c0", "c1"):
                rows.append(
                    {"setting": "s", "seed": seed, "fold": fold, "client": client}
                    | {m: 0.0 for m in METRICS}
                    | {"gain": base + jitter}
                )
    return pd.DataFrame(rows)


def test_summary_standard_error_is_over_seeds_not_repeats() -> None:
    # 2 seeds × 3 repeats × 2 clients; repeats of a seed share its partition, so they are averaged
    # first: the seed means of the gain are 0.1 and 0.3.
    table = summary_table(client_rows({0: 0.1, 1: 0.3}, (-0.01, 0.0, 0.01)), ["setting"])
    assert table["n"].tolist() == [2]
    se = np.std([0.1, 0.3], ddof=1) / np.sqrt(2)
    assert table["gain"].tolist() == [f"{0.2:.3f} ± {se:.3f}"]


def test_summary_reports_the_largest_epsilon_of_each_setting() -> None:
    frame = client_rows({0: 0.1, 1: 0.3}, (0.0,)).assign(epsilon=[0.5, 1.0, 0.9, 0.7])
    table = summary_table(frame, ["setting"])
    assert list(table.columns) == ["setting", "epsilon", *METRICS, "n"]
    assert table["epsilon"].tolist() == [1.0]


def test_per_seed_averages_clients_then_repeats() -> None:
    frame = client_rows({0: 0.1, 1: 0.3}, (0.0, 0.02))
    frame.loc[frame.client == "c1", "gain"] += 0.1  # client mean of each federation: +0.05
    seeds = per_seed(frame, ["setting"], ["gain"])
    assert seeds["seed"].tolist() == [0, 1]
    assert seeds["gain"].to_numpy() == pytest.approx([0.1 + 0.01 + 0.05, 0.3 + 0.01 + 0.05])


def test_binned_plot_draws_mean_and_standard_error_per_bin() -> None:
    frame = pd.DataFrame({"share": [0.1, 0.2, 0.8, 0.9], "gain": [1.0, 3.0, 5.0, 5.0]})
    ax = RecordingAxes()
    binned_plot(ax, frame, "share", "gain", "held_out", bins=2)
    ((x, y, se),) = ax.calls
    assert x == pytest.approx([0.15, 0.85])
    assert y == pytest.approx([2.0, 5.0])
    assert se == pytest.approx([1.0, 0.0])  # std (ddof=1) / sqrt(2)
    constant = RecordingAxes()
    binned_plot(constant, frame.assign(share=0.5), "share", "gain", "held_out")
    assert constant.calls == []


def test_importance_matrix_bins_subscriber_and_publisher_label_balance() -> None:
    edges = pd.DataFrame(
        {
            "models": ["rf", "rf", "rf", "rf", "dp"],
            "public": ["rf", "rf", "rf", "rf", "rf"],
            "variant": ["held_out", "held_out", "held_out", "pooled", "held_out"],
            "client_balance": [0.1, 0.1, 0.9, 0.1, 0.1],
            "publisher_balance": [0.5, 0.5, 0.1, 0.5, 0.5],
            "weight": [0.2, 0.4, 0.7, 9.0, 9.0],
        }
    )
    matrix = importance_matrix(edges)
    assert matrix.shape == (5, 5)
    assert matrix.iloc[0, 2] == pytest.approx(0.3)  # pooled and DP rows left out
    assert matrix.iloc[4, 0] == pytest.approx(0.7)
    assert int(matrix.notna().to_numpy().sum()) == 2


def test_dp_bars_hide_the_panel_without_dp_public_models() -> None:
    fig, (empty, bars) = plt.subplots(1, 2)
    rf = client_rows({0: 0.1}, (0.0,)).assign(models="rf", public="rf", variant="held_out")
    dp_bars(empty, rf, "no DP")
    assert not empty.get_visible()
    dp = rf.assign(models="dp", public="dp_lr_e1")
    dp_bars(bars, pd.concat([rf, dp]), "DP")
    heights = [p.get_height() for p in bars.patches]
    assert heights == pytest.approx([0.1])  # one kind, one variant: the mean gain over seeds
    plt.close(fig)


def test_mean_se_by_is_summarize_sorted_by_group_without_missing_groups() -> None:
    frame = pd.DataFrame({"p": [0.5, 0.1, 0.5, np.nan, 0.1], "gain": [1.0, 2.0, 3.0, 9.0, 4.0]})
    out = mean_se_by(frame, "p", "gain")
    assert list(out.index) == [0.1, 0.5]
    assert out["mean"].tolist() == [3.0, 2.0] and out["n"].tolist() == [2, 2]
    assert out.loc[0.5, "se"] == pytest.approx(np.std([1.0, 3.0], ddof=1) / np.sqrt(2))
    one = mean_se_by(frame.iloc[:2], "p", "gain")
    assert one["se"].tolist() == [0.0, 0.0]  # a single seed: SE 0, as in the result tables
