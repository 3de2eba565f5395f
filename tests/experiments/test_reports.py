"""Result files: mean ± SE, the Markdown renderer, and atomic CSV + MD + PNG outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.reports import (
    markdown_table,
    mean_se,
    mean_se_cell,
    mean_se_label,
    summarize,
    write_results,
)


def test_summary_matches_a_hand_computed_standard_error_and_skips_missing_values() -> None:
    df = pd.DataFrame(
        {"m": ["a", "a", "a", "b", "c", "c"], "score": [1.0, 2.0, 6.0, 4.0, np.nan, 5.0]}
    )
    out = summarize(df, ["m"]).set_index("m")
    assert out.loc["a", "mean"] == pytest.approx(3.0)
    assert out.loc["a", "se"] == pytest.approx(np.std([1.0, 2.0, 6.0], ddof=1) / np.sqrt(3))
    assert out.loc["b", "se"] == 0.0 and out.loc["b", "n"] == 1
    assert out.loc["c", "n"] == 1 and out.loc["c", "mean"] == 5.0
    assert list(out.index) == ["a", "b", "c"]  # first-seen order, not sorted


def test_summary_groups_by_several_columns_in_first_seen_order() -> None:
    df = pd.DataFrame({"x": [2, 2, 1], "m": ["z", "a", "z"], "score": [1.0, 2.0, 3.0]})
    out = summarize(df, ["x", "m"])
    assert out[["x", "m"]].values.tolist() == [[2, "z"], [2, "a"], [1, "z"]]


def test_markdown_table_merges_mean_and_se_and_formats_floats() -> None:
    frame = pd.DataFrame({"m": ["a"], "mean": [0.5], "se": [0.01], "n": [3], "x": [1.23456]})
    lines = markdown_table(frame, digits=2).splitlines()
    assert lines[0] == "| m | mean ± SE | n | x |"
    assert lines[2] == "| a | 0.50 ± 0.01 | 3 | 1.23 |"
    assert markdown_table(frame[["x"]], digits=None).splitlines()[2] == "| 1.235 |"


def test_mean_se_cell() -> None:
    assert mean_se_cell(pd.Series([np.nan])) == "NA"
    assert mean_se_cell(pd.Series([2.0])) == "2.00 ± 0.00"
    assert mean_se_label(1.0, 0.5, 1) == "1.0 ± 0.5"


def test_one_measurement_has_the_se_of_single_se_everywhere() -> None:
    # n = 1: the result tables write an SE of 0 (their n column shows it); the demo asks for NaN.
    one = pd.DataFrame({"m": ["a"], "score": [0.75]})
    assert summarize(one, ["m"]).to_dict("records") == [{"m": "a", "mean": 0.75, "se": 0.0, "n": 1}]
    assert np.isnan(summarize(one, ["m"], single_se=np.nan)["se"].iloc[0])
    assert mean_se([0.75]) == (0.75, 0.0, 1)
    mean, se, n = mean_se([0.75, np.nan], single_se=np.nan)
    assert (mean, n) == (0.75, 1) and np.isnan(se)
    assert mean_se_cell(pd.Series([0.75]), 3) == "0.750 ± 0.000"
    assert mean_se_label(0.75, np.nan, 4, sign=True) == "+0.7500 ± nan"


def test_mean_se_is_summarize_of_one_group() -> None:
    values = [0.81, 0.8, 0.86, np.nan, 0.79]
    row = summarize(pd.DataFrame({"g": 0, "score": values}), ["g"]).iloc[0]
    assert mean_se(values) == (row["mean"], row["se"], row["n"])
    mean, se, n = mean_se([])
    assert n == 0 and np.isnan(mean) and np.isnan(se)


def test_write_results_writes_csv_markdown_and_png(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = pd.DataFrame({"method": ["a"] * 3 + ["b"] * 3, "score": [0.6, 0.7, 0.8, 1, 1, 1]})
    summary = summarize(table, ["method"])
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    paths = write_results("demo-x", tmp_path, table=table, summary=summary, figure=fig, notes="n")
    assert [p.name for p in paths] == ["demo-x.csv", "demo-x.md", "demo-x.png"]
    assert len(pd.read_csv(paths[0])) == len(table)
    text = paths[1].read_text()
    assert mean_se_label(0.7, summary.se.iloc[0]) in text and "mean ± SE" in text
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary leftovers


def test_write_results_rejects_bad_names_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_results("../x", tmp_path, table=pd.DataFrame())
    assert list(tmp_path.iterdir()) == []


def test_write_results_writes_no_file_when_one_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib.pyplot as plt

    figure = plt.figure()

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(figure, "savefig", broken)
    with pytest.raises(OSError, match="disk full"):
        write_results("x", tmp_path, table=pd.DataFrame({"a": [1]}), figure=figure)
    assert list(tmp_path.iterdir()) == []


def test_check_out_dir_rejects_a_file_and_creates_nothing(tmp_path: Path) -> None:
    from pubsubml.experiments.reports import check_out_dir

    assert check_out_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="is not a folder"):
        check_out_dir(tmp_path / "f" / "sub")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
