"""The table of FLamby's protocol: FLamby's published rows first, then ours."""

from __future__ import annotations

import math

import pandas as pd

from pubsubml.experiments.heart_disease.flamby import POOLED, TESTS
from pubsubml.experiments.heart_disease.flamby_reference import mean_accuracy
from pubsubml.experiments.heart_disease.flamby_summary import summarize_flamby


def _fake(method: str, values: dict[str, list[float]], **extra: float) -> list[dict]:
    return [
        {"method": method, "test": t, "seed": s, "accuracy": a, **extra}
        for t, accs in values.items()
        for s, a in enumerate(accs)
    ]


def test_the_summary_puts_flambys_published_rows_before_ours() -> None:
    table = pd.DataFrame(
        _fake("PubSub-ML", {t: [0.8, 0.9] for t in TESTS}, epsilon=0.99)
        + _fake("Local 0", {t: [0.7, 0.7] for t in TESTS}, epsilon=math.inf)
        + _fake("FedAvg, Flower", {t: [0.6] for t in TESTS}, epsilon=math.inf)
    )
    summary = summarize_flamby(table)
    published = summary[summary["source"] == "FLamby (published)"]
    assert list(published["method"]) == list(mean_accuracy())
    pooled = mean_accuracy()["Pooled Training"]["Pooled Test"]
    assert published.iloc[0][POOLED].startswith(f"{pooled:.3f} ± ")
    ours = summary[summary["source"] != "FLamby (published)"]
    assert list(ours["method"]) == ["Local 0", "FedAvg, Flower", "PubSub-ML"]
    row = ours[ours["method"] == "PubSub-ML"].iloc[0]
    assert row["cleveland"] == "0.850 ± 0.050" and row["ε"] == "0.99" and row["n"] == 2
    assert ours[ours["method"] == "Local 0"].iloc[0]["ε"] == "—"
    assert ours[ours["method"] == "FedAvg, Flower"].iloc[0]["source"] == "ours, Flower"
