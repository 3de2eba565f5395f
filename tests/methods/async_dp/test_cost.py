"""The cost-of-privacy forecast model (async-dp-cost-of-privacy.txt §6): JSON, forecasts, the
shipped model."""

from __future__ import annotations

import pytest

from pubsubml.errors import DataValidationError
from pubsubml.methods.async_dp.cost import CostOfPrivacyModel


def test_model_json_round_trip_and_forecast() -> None:
    model = CostOfPrivacyModel(c1=0.0, c2=1e9, alone_a=100.0, alone_b=0.05, horizon=1000,
                               calibration={"n_owners": [2, 20], "n_records": [1e3, 1e5], "epsilon": [1, 100]})  # fmt: skip
    again = CostOfPrivacyModel.from_json(model.to_json())
    assert again == model
    good = model.forecast(n_owners=10, n_records=10_000, epsilon=50.0)
    bad = model.forecast(n_owners=10, n_records=10_000, epsilon=1.0)
    assert good.pays and not bad.pays and good.psi_alone == pytest.approx((0.01 + 0.05) * 0.9)
    assert (
        not good.extrapolated
        and model.forecast(n_owners=50, n_records=10_000, epsilon=1.0).extrapolated
    )
    with pytest.raises(DataValidationError):
        CostOfPrivacyModel.from_json('{"c1": 1}')


def test_shipped_model_loads() -> None:
    model = CostOfPrivacyModel.load_default()
    assert model.horizon == 1000 and model.c1 >= 0 and model.c2 >= 0
    assert model.calibration["command"] == "pubsubml bench async-dp-calibrate"
