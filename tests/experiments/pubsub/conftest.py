"""Small Hyperplane scenarios and a tiny method configuration shared by the PubSub-ML tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pubsubml.data import hyperplane
from pubsubml.experiments.pubsub.consortium import MethodConfig, Scenario, SimSite

HyperplaneScenario = Callable[..., Scenario]


@pytest.fixture
def tiny_config() -> MethodConfig:
    """Table 4's settings shrunk to seconds: 8 hidden units, 2 epochs, 2 FL rounds."""
    return MethodConfig(hidden_layer_sizes=(8,), epochs=2, fl_rounds=2, fine_tune_epochs=2)


@pytest.fixture
def hyperplane_scenario() -> HyperplaneScenario:
    """``make(n_pub=3, rows=200, sub_rows=100)``: disjoint Hyperplane sites, accuracy metric."""

    def make(n_pub: int = 3, rows: int = 200, sub_rows: int = 100) -> Scenario:
        data = hyperplane(n_pub * rows + sub_rows, seed=5)
        pubs = [
            SimSite(data.X.iloc[i * rows : (i + 1) * rows], data.y[i * rows : (i + 1) * rows])
            for i in range(n_pub)
        ]
        sub = SimSite(data.X.iloc[n_pub * rows :], data.y[n_pub * rows :])
        return Scenario(pubs, sub, data.schema, "classification", (0, 1), "accuracy")

    return make
