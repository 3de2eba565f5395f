"""Tables, cells and plots shared by the Hyperplane experiments of PubSub-ML (pubsub-ml.txt §8.2).

Helpers of :mod:`pubsubml.experiments.pubsub.scale`: which folds to run, the machine note of
runtime tables, Markdown tables, "mean ± SE" cells, and the bar charts of Fig. 4 and Fig. 9.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.experiments.runner import mean_se_label

__all__ = [
    "bar_plot",
    "folds_to_run",
    "machine_note",
    "markdown_table",
    "mean_se_cell",
    "method_colors",
    "order_rows",
]


def folds_to_run(requested: int | None, available: int) -> int:
    """How many folds of the split to run: ``requested`` (1 … ``available``) or all.

    Raises
    ------
    ValueError
        ``requested`` outside 1 … ``available``.

    Examples
    --------
    >>> folds_to_run(None, 5), folds_to_run(2, 5)
    (5, 2)
    """
    if requested is None:
        return available
    if not 1 <= requested <= available:
        raise ValueError(f"folds must be in 1 … {available}, got {requested}")
    return requested


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


def markdown_table(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table, cells as ``str`` gives them.

    Examples
    --------
    >>> print(markdown_table(pd.DataFrame({"a": [1], "b": ["x"]})))
    | a | b |
    |---|---|
    | 1 | x |
    """
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(False)]
    return "\n".join(lines)


def mean_se_cell(values: pd.Series, digits: int = 2) -> str:
    """``"mean ± SE"`` of the non-missing ``values`` (``"NA"`` when there are none).

    Examples
    --------
    >>> mean_se_cell(pd.Series([1.0, 3.0, None]))
    '2.00 ± 1.00'
    """
    v = values.dropna().to_numpy(dtype=float)
    if len(v) == 0:
        return "NA"
    se = float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0
    return mean_se_label(float(v.mean()), se, digits)


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
