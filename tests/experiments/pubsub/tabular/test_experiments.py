"""The tabular experiments (Fig. 3, Table 5, Fig. 7, 10, 11): smoke runs, options and output files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "pubsub-scenarios",
        "pubsub-privacy",
        "pubsub-models",
        "pubsub-regression",
        "pubsub-nonprivate",
    ],
)
def test_experiment_smoke_run_writes_its_files(name: str, tmp_path: Path) -> None:
    from pubsubml.cli import app

    result = CliRunner().invoke(
        app, ["bench", name, "--smoke", "--folds", "2", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    for ext in ("csv", "md", "png"):
        assert (tmp_path / f"{name}.{ext}").stat().st_size > 0
    table = pd.read_csv(tmp_path / f"{name}.csv")
    assert {"seed", "fold", "method", "score"} <= set(table.columns)
    assert "±" in (tmp_path / f"{name}.md").read_text()


def test_bad_options_exit_with_a_clear_error(tmp_path: Path) -> None:
    from pubsubml.cli import app

    result = CliRunner().invoke(
        app, ["bench", "pubsub-models", "--folds", "1", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and "--folds" in result.output
    for args in (
        ["pubsub-regression", "--fl-dp", "server"],
        ["pubsub-models", "--fl-dp", "central"],
    ):
        result = CliRunner().invoke(app, ["bench", *args, "--smoke", "--out-dir", str(tmp_path)])
        assert result.exit_code == 2 and "--fl-dp" in result.output
    for args in (
        ["pubsub-privacy", "--turns", "3"],
        ["pubsub-models", "--turns", "3"],
        ["pubsub-scenarios", "--turns", "3", "--smoke"],
    ):
        result = CliRunner().invoke(app, ["bench", *args, "--out-dir", str(tmp_path)])
        assert result.exit_code == 2 and "--turns" in result.output
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_that_is_a_file_fails_before_the_run(tmp_path: Path) -> None:
    from pubsubml.cli import app

    blocker = tmp_path / "results"
    blocker.write_text("not a folder")
    for name in ("pubsub-regression", "pubsub-noisy", "stacking-quantity"):
        result = CliRunner().invoke(
            app, ["bench", name, "--smoke", "--out-dir", str(blocker / "sub")]
        )
        assert result.exit_code == 2 and "is not a folder" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


@pytest.mark.slow
def test_central_dp_smoke_run_records_the_mode(tmp_path: Path) -> None:
    from pubsubml.cli import app

    args = ["bench", "pubsub-regression", "--smoke", "--folds", "2", "--fl-dp", "central"]
    result = CliRunner().invoke(app, [*args, "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "pubsub-regression.csv")
    assert set(table["fl_dp"]) == {"central"}
    assert "central DP" in (tmp_path / "pubsub-regression.md").read_text()
