"""FLamby's protocol: pooled scoring, the replication and a Flower run."""

from __future__ import annotations

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
)
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


@pytest.mark.slow
@pytest.mark.ray
def test_a_flower_run_of_the_four_hospitals_is_scored(own_ray: None) -> None:
    rows = pd.DataFrame(flower_task(0, "FedAvg", dp=True, training=SMOKE_TRAINING))
    assert rows["method"].unique().tolist() == ["DP-FedAvg (V), Flower"]
    assert rows["test"].tolist() == list(TESTS)
    assert (rows["epsilon"] <= 1.0 + 1e-9).all() and (rows["seconds"] > 0).all()
    assert rows["accuracy"].between(0, 1).all()
