"""Tables, cells and plots shared by the Hyperplane experiments of PubSub-ML (pubsub-ml.txt §8.2).

Helpers of :mod:`pubsubml.experiments.pubsub.scale.reports`: the machine note of runtime tables,
the order of a summary's rows, and the bar charts of Fig. 4 and Fig. 9.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "bar_plot",
    "machine_note",
    "method_colors",
    "order_rows",
]


def machine_note() -> str:
    """The machine a runtime table was measured on, with its current load."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.machine()} with {os.cpu_count()} cores, one torch thread per process, "
        f"load average {load:.1f} at the end of the run"
    )


def order_rows(summary: pd.DataFrame, column: str, order: Sequence[str]) -> pd.DataFrame:
    """``summary`` with its rows sorted by the position of ``column``'s value in ``order``."""
    rank = {m: i for i, m in enumerate(order)}
    return summary.sort_values(column, key=lambda s: s.map(rank), kind="stable").reset_index(
        drop=True
    )


def bar_plot(ax: Any, summary: pd.DataFrame, labels: str, colors: Sequence[str]) -> None:
    """Accuracy bars with standard-error whiskers, one per row of ``summary`` (Fig. 4, Fig. 9)."""
    x = np.arange(len(summary))
    ax.bar(x, summary["mean"], yerr=summary["se"], color=colors, capsize=3)
    ax.set_xticks(x, summary[labels], rotation=45, ha="right")
    ax.set_ylabel("accuracy")
    low = float((summary["mean"] - summary["se"]).min())
    ax.set_ylim(max(0.0, low - 0.1), 1.0)


def method_colors(methods: Sequence[str]) -> list[str]:
    """The paper's palette: PubSub-ML blue, Own grey, FL (V) red and (F) light red."""

    def pick(m: str) -> str:
        if m.startswith("Fed"):
            return "#d62728" if m.endswith("(V)") else "#ff9896"
        return "#7f7f7f" if m.startswith("Own") else "#1f77b4"

    return [pick(m) for m in methods]
