"""The one rule for a site's data against the schema (pubsubml.cli.site_data)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pubsubml.cli.site_data import fit_report, read_table
from pubsubml.schema import Feature, FeatureSchema

SCHEMA = FeatureSchema(
    features=(
        Feature(name="age", lower=0, upper=120, default=50),
        Feature(name="sex", kind="categorical", categories=("f", "m"), default="f"),
        Feature(name="wbc", lower=0, upper=50, default=7),
    )
)


def test_data_with_every_feature_in_bounds_fits() -> None:
    frame = pd.DataFrame({"age": [30, 70], "sex": ["f", "m"], "wbc": [5, 9], "y": [0, 1]})
    report = fit_report(SCHEMA, frame, "y")
    assert report.errors == [] and report.notes == [] and report.columns == ["age", "sex", "wbc"]


def test_missing_features_are_refused_unless_extended() -> None:
    frame = pd.DataFrame({"age": [30, 70], "y": [0, 1]})
    refused = fit_report(SCHEMA, frame, "y")
    assert (
        refused.missing == ["sex", "wbc"]
        and "lacks schema feature(s) sex, wbc" in refused.errors[0]
    )
    extended = fit_report(SCHEMA, frame, "y", extend=True)
    assert extended.errors == [] and len(extended.notes) == 2
    assert "public default 'f'" in extended.notes[0]


def test_out_of_bounds_values_are_clipped_and_counted_or_refused_when_strict() -> None:
    frame = pd.DataFrame({"age": [-1, 130, 40], "sex": ["f", "m", "f"], "wbc": [5, 9, 7]})
    report = fit_report(SCHEMA, frame, None)
    assert report.clipped == {"age": 2} and report.errors == []
    assert report.notes == ["age: 2 row(s) outside [0, 120]: clipped to the public bounds"]
    strict = fit_report(SCHEMA, frame, None, strict=True)
    assert strict.errors == ["age: 2 row(s) outside [0, 120] (refused by --strict)"]


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ({"age": ["x"], "sex": ["f"], "wbc": [1]}, "age: 1 value(s) are not numbers"),
        ({"age": [None], "sex": ["f"], "wbc": [1]}, "age: 1 empty value(s)"),
        ({"age": [1], "sex": ["?"], "wbc": [1]}, "sex: unknown categories ['?']"),
        (
            {"age": [1], "sex": ["f"], "wbc": [1], "zz": [0]},
            "extra columns (not in the schema): zz",
        ),
    ],
)
def test_bad_values_and_extra_columns_are_errors(
    frame: dict[str, list[object]], message: str
) -> None:
    assert message in fit_report(SCHEMA, pd.DataFrame(frame), None).errors


def test_a_missing_label_column_is_an_error() -> None:
    report = fit_report(SCHEMA, pd.DataFrame({"age": [1]}), "y")
    assert report.errors == ["the label column 'y' is not in the data"]


def test_read_table_refuses_other_suffixes_and_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ValueError, match=r"expected a \.csv or \.parquet"):
        read_table(tmp_path / "a.txt")
    (tmp_path / "b.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match="cannot read"):
        read_table(tmp_path / "b.parquet")
