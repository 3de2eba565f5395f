"""The table of FLamby's protocol: FLamby's published rows, then ours (:mod:`.flamby`).

:func:`summarize_flamby` writes each method's accuracy on every hospital's test set and on the
pooled test as mean ± SE over seeds, with the largest ε any site spent; FLamby's published rows
(du Terrail et al. 2022, :mod:`.flamby_reference`) come first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pubsubml.experiments.heart_disease.flamby import FL_NAMES, POOLED, TESTS
from pubsubml.experiments.heart_disease.flamby_reference import (
    FLAMBY_RESULTS,
    POOLED_TEST,
    TEST_HOSPITALS,
    mean_accuracy,
)
from pubsubml.experiments.reports import mean_se_cell

__all__ = ["summarize_flamby"]

_ORDER = (
    "Local 0",
    "Local 1",
    "Local 2",
    "Local 3",
    "Local (own hospital)",
    "Pooled",
    "Local 0, FLamby's normalisation",
    "Local 1, FLamby's normalisation",
    "Local 2, FLamby's normalisation",
    "Local 3, FLamby's normalisation",
    "Pooled, FLamby's normalisation",
    "Own",
    *(m for n in FL_NAMES for m in (n, f"{n}, Flower")),
    *(m for n in FL_NAMES for m in (f"DP-{n} (V)", f"DP-{n} (V), Flower", f"DP-{n} (F)")),
    "PubSub-ML*",
    "PubSub-ML",
)


def _cell(values: pd.Series) -> str:
    return mean_se_cell(values, 3, missing="")


def _published() -> list[dict[str, Any]]:
    """FLamby's published rows: mean ± SE over its 5 seeds (the mean is ``mean_accuracy``)."""
    means = mean_accuracy()
    frame = pd.DataFrame([vars(r) | {"accuracy": r.accuracy} for r in FLAMBY_RESULTS])
    rows = []
    for method, by_test in means.items():
        row: dict[str, Any] = {"source": "FLamby (published)", "method": method, "ε": "—"}
        for test in by_test:
            col = POOLED if test == POOLED_TEST else TEST_HOSPITALS[test]
            part = frame[(frame["method"] == method) & (frame["test"] == test)]["accuracy"]
            row[col] = _cell(part)
        row["n"] = int(frame[frame["method"] == method]["seed"].nunique())
        rows.append(row)
    return rows


def _epsilon_label(values: pd.Series) -> str:
    v = values.astype(float)
    if np.isinf(v).all():
        return "—"
    return f"{float(v[np.isfinite(v)].max()):.2f}"


def summarize_flamby(table: pd.DataFrame) -> pd.DataFrame:
    """The FLamby-protocol table: accuracy per test set, FLamby's published rows first.

    Parameters
    ----------
    table : DataFrame
        Records of :func:`~pubsubml.experiments.heart_disease.flamby.flamby_task` and
        :func:`~pubsubml.experiments.heart_disease.flamby.flower_task` with a ``seed`` column.

    Returns
    -------
    DataFrame
        Columns ``source``, ``method``, ``ε`` (the largest ε any site spent; "—" without DP),
        one per hospital and ``pooled`` (accuracy, mean ± SE over seeds), ``n`` (seeds).
    """
    rows = _published()
    known = {m: i for i, m in enumerate(_ORDER)}
    methods = sorted(set(table["method"]), key=lambda m: (known.get(m, len(known)), m))
    for method in methods:
        part = table[table["method"] == method]
        source = "ours, Flower" if method.endswith("Flower") else "ours"
        if "FLamby's normalisation" in method:
            source = "ours, FLamby's normalisation"
        row: dict[str, Any] = {
            "source": source,
            "method": method,
            "ε": _epsilon_label(part["epsilon"]),
        }
        for test in TESTS:
            row[test] = _cell(part[part["test"] == test]["accuracy"])
        row["n"] = int(part["seed"].nunique())
        rows.append(row)
    return pd.DataFrame(rows, columns=["source", "method", "ε", *TESTS, "n"])
