"""The DP-FL baselines of the many-publisher experiments (pubsub-ml.txt §8.2.3, Fig. 4, Table 6)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.pubsub.scale import fl_baselines as scale_fl
from pubsubml.experiments.pubsub.scale.fl_baselines import fl_config, fl_records
from pubsubml.experiments.pubsub.scale.hyperplane import make_consortium
from pubsubml.experiments.pubsub.scale.many_publishers import split_sites
from pubsubml.experiments.pubsub.scale.sizes import SIZES, ScaleSizes

pytestmark = pytest.mark.usefixtures("one_thread")

Frame = tuple[pd.DataFrame, np.ndarray]
TINY = replace(
    SIZES["smoke"], hidden=(4,), epochs=1, fl_rounds=1, fl_fraction=1.0, fine_tune_epochs=1
)


def _fold(n_publishers: int = 2, n_subscribers: int = 2, rows: int = 60) -> Any:
    pubs, subs = make_consortium(n_publishers, n_subscribers, rows, seed=0)
    return split_sites(pubs, subs, folds=2, fold=0, seed=0)


def test_fl_config_is_table4s_network_with_the_sizes_client_sampling() -> None:
    sizes = ScaleSizes(hidden=(9, 3), epochs=7, fl_rounds=11, fl_fraction=0.25, fine_tune_epochs=5)
    config = fl_config(sizes)
    assert config.hidden_layer_sizes == (9, 3) and config.epochs == 7
    assert config.fl_rounds == 11 and config.fl_client_fraction == 0.25
    assert config.fine_tune_epochs == 5 and config.dp
    # §8.2.3: with many sites FL samples 10 % of the clients per round
    assert fl_config(ScaleSizes()).fl_client_fraction == 0.1


def test_one_global_model_per_method_serves_every_subscriber(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: dict[str, list[Any]] = {"fit": [], "tune": []}

    class Fitted:
        def __init__(self, name: str) -> None:
            self.name, self.epsilon_ = name, 0.75

        def score(self, X: pd.DataFrame, y: np.ndarray) -> float:
            return 0.5

    def fit(scenario: Any, name: str, clients: list[Frame], config: Any, seed: int) -> Fitted:
        calls["fit"].append((scenario, name, clients, config, seed))
        return Fitted(name)

    def tune(model: Fitted, X: pd.DataFrame, y: np.ndarray, config: Any, seed: int) -> Fitted:
        calls["tune"].append((model.name, len(X), seed))
        return model

    monkeypatch.setattr(scale_fl, "fit_federated", fit)
    monkeypatch.setattr(scale_fl, "fine_tune_federated", tune)
    data = _fold()
    clients = data.publishers + data.sub_fit
    records = fl_records(
        clients, data.sub_fit, data.sub_test, sizes=TINY, seed=7, methods=("FedAvg", "FedAdam")
    )
    assert [name for _, name, *_ in calls["fit"]] == ["FedAvg", "FedAdam"]
    for scenario, _, given, config, seed in calls["fit"]:
        assert given == clients and seed == 7 and config == fl_config(TINY)
        # every client at the run's budget, so the FL budget is that ε (§8.2.1)
        assert {s.epsilon for s in scenario.publishers} == {TINY.epsilon}
        assert scenario.delta == TINY.delta
    # each subscriber fine-tunes on its own fit part with its own seed
    fit_rows = [len(y) for _, y in data.sub_fit]
    assert calls["tune"] == [(m, fit_rows[j], 7 + j) for m in ("FedAvg", "FedAdam") for j in (0, 1)]
    assert [(r["method"], r["subscriber"]) for r in records] == [
        (f"{m}({v})", f"s{j}") for m in ("FedAvg", "FedAdam") for j in (0, 1) for v in "VF"
    ]
    assert all(r["epsilon"] == 0.75 for r in records)


def test_fl_records_score_within_the_budget() -> None:
    sizes = replace(TINY, epsilon=0.5)
    data = _fold()
    records = fl_records(
        data.publishers + data.sub_fit,
        data.sub_fit,
        data.sub_test,
        sizes=sizes,
        seed=0,
        methods=("FedAvg",),
    )
    assert len(records) == 4
    assert all(0.0 <= r["score"] <= 1.0 for r in records)
    assert all(0.45 < r["epsilon"] <= 0.5 for r in records)
    by = {(r["method"], r["subscriber"]): r for r in records}
    for j in ("s0", "s1"):
        # (F)'s time is the global model's plus its own fine-tuning
        assert by["FedAvg(F)", j]["total_s"] >= by["FedAvg(V)", j]["total_s"] > 0.0
    assert by["FedAvg(V)", "s0"]["total_s"] == by["FedAvg(V)", "s1"]["total_s"]
