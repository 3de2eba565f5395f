"""The result files of ``heart-disease``: our rows beside FLamby's published ones and Flower's."""

from __future__ import annotations

import math

import pandas as pd

from pubsubml.experiments.heart_disease.flamby import POOLED
from pubsubml.experiments.heart_disease.reports import flamby_targets, flower_comparison


def test_flamby_target_compares_with_every_published_strategy() -> None:
    def table(accuracy: float) -> pd.DataFrame:
        return pd.DataFrame(
            [{"method": "PubSub-ML", "test": POOLED, "accuracy": accuracy, "seed": 0}]
        )

    frame, met = flamby_targets(table(0.80))
    assert met and len(frame) == 7 and set(frame["met"]) == {"yes"}
    frame, met = flamby_targets(table(0.78))  # Cyclic100 published 0.785
    assert not met
    assert frame.set_index("FLamby strategy").loc["Cyclic100", "met"] == "no"
    assert frame.set_index("FLamby strategy").loc["FedAvg100", "met"] == "yes"


def test_flower_comparison_sets_both_implementations_side_by_side() -> None:
    rows = [
        {"method": m, "test": POOLED, "accuracy": a, "epsilon": e, "seconds": s, "seed": seed}
        for seed in range(2)
        for m, a, e, s in (
            ("FedAvg", 0.78, math.inf, 1.0),
            ("FedAvg, Flower", 0.77, math.inf, 20.0),
            ("DP-FedAvg (V)", 0.70, 0.99, 1.5),
        )
    ]
    frame = flower_comparison(pd.DataFrame(rows)).set_index(["strategy", "DP"])
    plain = frame.loc[("FedAvg", "none")]
    assert plain["ours accuracy"] == "0.780 ± 0.000 (n=2)" and plain["Flower s/run"] == "20.0"
    dp = frame.loc[("FedAvg", "ε = 1")]
    assert dp["ours ε"] == "0.99" and dp["Flower accuracy"] == ""
