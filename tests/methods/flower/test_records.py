"""Parameters and DP events through Flower's records, unchanged."""

from __future__ import annotations

import numpy as np

from pubsubml.methods.flower.records import (
    events_from_json,
    events_to_json,
    params_from_record,
    params_to_record,
    state_record,
)
from pubsubml.privacy.events import DPEvent


def test_parameters_round_trip_as_float32() -> None:
    params = [np.arange(6, dtype=np.float64).reshape(2, 3), np.array([0.5, -1.0])]
    back = params_from_record(params_to_record(params))
    assert [b.dtype for b in back] == [np.float32, np.float32]
    for a, b in zip(params, back, strict=True):
        np.testing.assert_array_equal(a.astype(np.float32), b)


def test_events_round_trip_exactly() -> None:
    events = [
        DPEvent(
            mechanism="subsampled_gaussian", noise_multiplier=1.0 / 3, sample_rate=0.1, count=7
        ),
        DPEvent(mechanism="gaussian", noise_multiplier=2.5),
    ]
    assert events_from_json(events_to_json(events)) == events
    record = state_record(events, 2, 300)
    assert events_from_json(str(record["events"])) == events and record["rounds"] == 2
