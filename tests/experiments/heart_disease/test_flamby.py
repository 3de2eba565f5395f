"""FLamby's protocol: pooled scoring, the replication, the summary table and a Flower run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pubsubml.data.heart_disease import HOSPITALS
from pubsubml.experiments.heart_disease.flamby import (
    POOLED,
    TESTS,
    flower_task,
    on_every_test,
    on_own_tests,
    replication,
    summarize_flamby,
)
from pubsubml.experiments.heart_disease.flamby_reference import mean_accuracy
from pubsubml.experiments.heart_disease.methods import SMOKE_TRAINING, ConstantClassifier
from pubsubml.experiments.heart_disease.splits import flamby_frames


def test_the_pooled_test_is_the_four_test_sets_together() -> None:
    frames = flamby_frames()
    sick = ConstantClassifier().fit(pd.DataFrame({"a": [0]}), [1])
    healthy = ConstantClassifier().fit(pd.DataFrame({"a": [0]}), [0])
    every = on_every_test(sick, frames)
    assert list(every) == list(TESTS)
    assert every["switzerland"]["correct"] == 15  # 15 of Switzerland's 16 test patients are ill
    assert every[POOLED]["correct"] == sum(int(s.y_test.sum()) for s in frames.values())
    assert every[POOLED]["accuracy"] == pytest.approx(every[POOLED]["correct"] / 254)
    own = on_own_tests({h: sick if h == "switzerland" else healthy for h in HOSPITALS}, frames)
    expected = 15 + sum(int((frames[h].y_test == 0).sum()) for h in HOSPITALS if h != "switzerland")
    assert own[POOLED]["correct"] == expected


def test_the_replication_scores_flambys_rows_on_every_test_set() -> None:
    rows = pd.DataFrame(replication(0, smoke=True))
    methods = [f"Local {i}, FLamby's normalisation" for i in range(4)]
    assert list(dict.fromkeys(rows["method"])) == [*methods, "Pooled, FLamby's normalisation"]
    assert (rows.groupby("method")["test"].apply(list) == [list(TESTS)] * 5).all()
    assert rows["accuracy"].between(0, 1).all() and np.isinf(rows["epsilon"]).all()


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


@pytest.mark.slow
@pytest.mark.ray
def test_a_flower_run_of_the_four_hospitals_is_scored(own_ray: None) -> None:
    rows = pd.DataFrame(flower_task(0, "FedAvg", dp=True, training=SMOKE_TRAINING))
    assert rows["method"].unique().tolist() == ["DP-FedAvg (V), Flower"]
    assert rows["test"].tolist() == list(TESTS)
    assert (rows["epsilon"] <= 1.0 + 1e-9).all() and (rows["seconds"] > 0).all()
    assert rows["accuracy"].between(0, 1).all()
