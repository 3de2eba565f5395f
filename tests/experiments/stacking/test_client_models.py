"""Clients and their public models in the stacking experiments (pfl-stacking.txt §4)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsubml.errors import PrivacyBudgetExceededError
from pubsubml.experiments.stacking.client_models import (
    PUBLIC_KINDS,
    ClientData,
    client_features,
    noisy_defaults,
    train_public_models,
)
from pubsubml.experiments.stacking.experiments import load_binary
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.schema import Feature, FeatureSchema


@pytest.mark.parametrize("p", [0.25, 0.5, 0.75, 1.0])
def test_vertical_clients_hold_the_requested_proportion_of_predictors(p: float) -> None:
    columns = [f"f{i}" for i in range(12)]
    sets = client_features(columns, 10, p, seed=0)
    measured = [len(set(s)) / len(columns) for s in sets]
    assert measured == [round(p * 12) / 12] * 10
    assert all(set(s) <= set(columns) and len(set(s)) == len(s) for s in sets)
    if p < 1:
        assert len({tuple(s) for s in sets}) > 1  # drawn at random per client


def test_noisy_defaults_are_mode_and_median_plus_scaled_noise() -> None:
    schema = FeatureSchema(
        features=(
            Feature(name="x", lower=-100.0, upper=100.0, default=0.0),
            Feature(name="c", kind="categorical", categories=("a", "b"), default="a"),
        )
    )
    X = pd.DataFrame({"x": [1.0, 2.0, 3.0, 10.0], "c": ["b", "b", "a", "b"]})
    exact = noisy_defaults(X, schema, 0.0, np.random.default_rng(0))
    assert exact.defaults == {"x": 2.5, "c": "b"}
    draws = [
        noisy_defaults(X, schema, 2.0, np.random.default_rng(s))["x"].default for s in range(400)
    ]
    assert np.std(draws) == pytest.approx(2.0 * np.std(X.x, ddof=1), rel=0.15)


def test_a_ledger_that_cannot_pay_refuses_the_model() -> None:
    ds = load_binary("hi", 200, 0)
    assert ds.classes is not None
    client = ClientData("c0", ds.X, ds.y, ds.schema)
    # A history of ε = 2 against a planned 0.5: the copy's budget 0.5 + 1 cannot pay 2 + 1.
    pure = DPEvent(mechanism="approx_dp", epsilon=2.0, delta=0.0)
    before = Release(release_id="before", events=(pure,))
    base = PrivacyLedger(site="c0", epsilon_budget=0.5, delta=1e-5, releases=[before])
    with pytest.raises(PrivacyBudgetExceededError):
        train_public_models([client], PUBLIC_KINDS["dp_lr_e1"], ds.classes, 0, {"c0": base})
    assert [r.release_id for r in base.releases] == ["before"]


def test_client_data_and_noisy_defaults_reject_bad_input() -> None:
    ds = load_binary("hi", 50, 0)
    with pytest.raises(ValueError, match="labels"):
        ClientData("c", ds.X, ds.y[:-1], ds.schema)
    with pytest.raises(ValueError, match="row position"):
        ClientData("c", ds.X.iloc[::-1], ds.y[::-1], ds.schema)
    with pytest.raises(ValueError, match="not in X"):
        ClientData("c", ds.X.drop(columns=ds.schema.names[0]), ds.y, ds.schema)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="noise"):
        noisy_defaults(ds.X, ds.schema, float("nan"), rng)
    with pytest.raises(ValueError, match="2 rows"):
        noisy_defaults(ds.X.iloc[:1], ds.schema, 1.0, rng)
