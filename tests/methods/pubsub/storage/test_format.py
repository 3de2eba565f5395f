"""Tests of pubsubml.methods.pubsub.storage.format: the values the manifest holds as JSON."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pubsubml.methods.pubsub.storage.format import MANIFEST_FILE, PARAMS, finite_or_text, jsonable


def test_jsonable_turns_numpy_values_and_infinities_into_json_values() -> None:
    value = {"a": np.int64(3), "b": (1.0, math.inf), "c": np.array([0.5, 1.5]), 4: None}
    assert jsonable(value) == {"a": 3, "b": [1.0, "inf"], "c": [0.5, 1.5], "4": None}
    assert finite_or_text(math.inf) == "inf" and finite_or_text(0.25) == 0.25
    with pytest.raises(TypeError, match="cannot be stored as JSON"):
        jsonable(object())


def test_the_manifest_names_its_file_and_records_the_customizers_json_parameters() -> None:
    assert MANIFEST_FILE == "customized.json"
    assert "task" in PARAMS and "random_state" in PARAMS and "cross_fits" not in PARAMS
