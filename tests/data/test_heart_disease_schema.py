"""Tests of pubsubml.data.heart_disease_schema: the public schema, built without reading data."""

from __future__ import annotations

import json
import subprocess
import sys

from pubsubml.data.heart_disease import COLUMNS
from pubsubml.data.heart_disease_schema import HEART_SCHEMA


def test_the_schema_has_the_13_features_with_their_documented_codes() -> None:
    assert HEART_SCHEMA.names == list(COLUMNS[:-1])
    codes = {f.name: f.categories for f in HEART_SCHEMA if f.kind == "categorical"}
    assert codes == {
        "sex": (0, 1),
        "cp": (1, 2, 3, 4),
        "fbs": (0, 1),
        "restecg": (0, 1, 2),
        "exang": (0, 1),
        "slope": (1, 2, 3),
        "ca": (0, 1, 2, 3),
        "thal": (3, 6, 7),
    }
    bounds = {f.name: (f.lower, f.upper, f.default) for f in HEART_SCHEMA if f.kind == "numeric"}
    assert bounds == {
        "age": (18, 100, 50),
        "trestbps": (60, 240, 120),
        "chol": (50, 700, 200),
        "thalach": (40, 220, 170),
        "oldpeak": (-5, 10, 0),
    }


def test_the_schema_is_built_without_reading_any_data() -> None:
    # A fresh interpreter where reading a file or a table fails still builds the same schema.
    code = (
        "import importlib.resources, pandas\n"
        "def refuse(*args, **kwargs):\n"
        "    raise AssertionError('data read while building the schema')\n"
        "importlib.resources.files = refuse\n"
        "pandas.read_csv = refuse\n"
        "from pubsubml.data.heart_disease_schema import HEART_SCHEMA\n"
        "print(HEART_SCHEMA.to_json())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )

    assert json.loads(out.stdout) == json.loads(HEART_SCHEMA.to_json())
