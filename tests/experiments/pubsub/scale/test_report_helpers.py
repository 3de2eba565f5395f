"""Helpers of the Hyperplane reports: row order, the machine note, the bar charts of Fig. 4 and 9."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from pubsubml.experiments.pubsub.scale.report_helpers import (
    bar_plot,
    machine_note,
    method_colors,
    order_rows,
)


@pytest.fixture
def ax() -> Iterator[Any]:
    """Axes of a new figure, closed after the test."""
    fig, axes = plt.subplots()
    yield axes
    plt.close(fig)


def test_order_rows_follows_the_given_order_and_keeps_ties_stable() -> None:
    summary = pd.DataFrame(
        {"method": ["Own", "All", "FedAvg(V)", "All"], "mean": [0.1, 0.2, 0.3, 0.4]},
        index=[7, 8, 9, 10],
    )
    ordered = order_rows(summary, "method", ["All", "FedAvg(V)", "Own"])
    assert ordered["method"].tolist() == ["All", "All", "FedAvg(V)", "Own"]
    assert ordered["mean"].tolist() == [0.2, 0.4, 0.3, 0.1]  # the two "All" rows keep their order
    assert ordered.index.tolist() == [0, 1, 2, 3] and list(ordered.columns) == ["method", "mean"]
    assert summary["method"].tolist() == ["Own", "All", "FedAvg(V)", "All"]  # input untouched


def test_order_rows_puts_rows_outside_the_order_last() -> None:
    summary = pd.DataFrame({"method": ["Joint", "Own", "All"]})
    ordered = order_rows(summary, "method", ["All", "Own"])
    assert ordered["method"].tolist() == ["All", "Own", "Joint"]


def test_method_colors_are_the_papers_palette() -> None:
    colors = method_colors(["All", "Top-10", "Own", "Own (M^s)", "FedAvg(V)", "FedAdam(F)"])
    pubsub, fl_vanilla, fl_tuned, own = "#1f77b4", "#d62728", "#ff9896", "#7f7f7f"
    assert colors == [pubsub, pubsub, own, own, fl_vanilla, fl_tuned]


def test_machine_note_names_the_cores_and_the_load() -> None:
    note = machine_note()
    assert f"with {os.cpu_count()} cores" in note
    load = note.rsplit("load average ", 1)[1].split(" ")[0]
    assert float(load) >= 0.0


def test_bar_plot_draws_one_bar_per_row_with_its_error(ax: Any) -> None:
    summary = pd.DataFrame(
        {"method": ["All", "Own", "FedAvg(V)"], "mean": [0.8, 0.7, 0.55], "se": [0.02, 0.01, 0.05]}
    )
    colors = method_colors(summary["method"].tolist())
    bar_plot(ax, summary, "method", colors)
    bars = ax.patches
    assert [b.get_height() for b in bars] == pytest.approx([0.8, 0.7, 0.55])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["All", "Own", "FedAvg(V)"]
    assert ax.get_ylabel() == "accuracy"
    # the lowest whisker (0.55 − 0.05) less 0.1, up to 1
    assert ax.get_ylim() == pytest.approx((0.4, 1.0))
    assert [to_hex(b.get_facecolor()) for b in bars] == colors
    # one standard-error whisker per bar, from mean − se to mean + se
    (whiskers,) = [c for c in ax.collections if len(c.get_segments()) == 3]
    spans = [sorted(y for _, y in seg) for seg in whiskers.get_segments()]
    np.testing.assert_allclose(spans, [[0.78, 0.82], [0.69, 0.71], [0.5, 0.6]])


def test_bar_plot_never_starts_below_zero(ax: Any) -> None:
    summary = pd.DataFrame({"label": ["a", "b"], "mean": [0.05, 0.5], "se": [0.02, 0.1]})
    bar_plot(ax, summary, "label", ["C0", "C1"])
    assert ax.get_ylim() == (0.0, 1.0)
