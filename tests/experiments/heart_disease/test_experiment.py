"""``pubsubml bench heart-disease``: options, the grid, targets and the smoke run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from pubsubml.data.heart_disease import HOSPITALS
from pubsubml.experiments.heart_disease.experiment import HEART_DISEASE_EXPERIMENT, _grid
from pubsubml.experiments.heart_disease.flamby import TESTS
from pubsubml.experiments.heart_disease.hospitals import HOSPITAL_METHODS
from pubsubml.experiments.heart_disease.options import flower_on

EXP = HEART_DISEASE_EXPERIMENT


def test_defaults_and_the_grid() -> None:
    full, smoke = EXP.options(), EXP.options(smoke=True)
    assert (full.seeds, full.folds, smoke.seeds, smoke.folds) == (5, 50, 1, 2)
    assert flower_on(full) and not flower_on(smoke)  # Flower is off in the smoke run...
    assert flower_on(EXP.options(smoke=True, flower=True))  # ...unless asked for
    assert not flower_on(EXP.options(flower=False))
    grid = _grid(full)
    assert [g["protocol"] for g in grid] == ["hospitals"] * 50 + ["flamby"] * 5
    assert [g["index"] for g in grid[-5:]] == list(range(5))
    assert [g["clinic"] for g in grid[:50]] == [True] * 20 + [False] * 30
    assert sum(g["clinic"] for g in _grid(smoke)) == 1
    assert sum(g["clinic"] for g in _grid(EXP.options(folds=10, clinic_repeats=0))) == 0
    assert {g["protocol"] for g in _grid(EXP.options(protocol="flamby"))} == {"flamby"}
    with pytest.raises(ValueError, match="protocol"):
        EXP.options(protocol="all")


def test_bad_options_exit_with_a_clear_error(tmp_path: Path) -> None:
    from pubsubml.cli import app

    for args, option in ((["--protocol", "x"], "--protocol"), (["--repeats", "0"], "--repeats")):
        result = CliRunner().invoke(
            app, ["bench", "heart-disease", "--smoke", *args, "--out-dir", str(tmp_path)]
        )
        assert result.exit_code == 2 and option in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_smoke_run_writes_both_tables(tmp_path: Path) -> None:
    from pubsubml.cli import app

    result = CliRunner().invoke(
        app, ["bench", "heart-disease", "--smoke", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    for stem in ("heart-disease-flamby", "heart-disease-hospitals"):
        for ext in ("csv", "md", "png"):
            assert (tmp_path / f"{stem}.{ext}").stat().st_size > 0
    flamby = pd.read_csv(tmp_path / "heart-disease-flamby.csv")
    assert set(flamby["test"]) == set(TESTS) and set(flamby["seed"]) == {0}
    assert not flamby["method"].str.contains("Flower").any()  # no Ray in the smoke run
    for method in ("Local 0", "Pooled", "Own", "FedAdam", "DP-FedProx (F)", "PubSub-ML"):
        assert len(flamby[flamby["method"] == method]) == len(TESTS), method
    ours = flamby[flamby["method"] == "PubSub-ML"]
    assert (ours["epsilon"] <= 1.0 + 1e-9).all() and ours["fallback"].notna().all()
    hospitals = pd.read_csv(tmp_path / "heart-disease-hospitals.csv")
    assert set(hospitals["repeat"]) == {0, 1} and set(hospitals["part"]) == {"hospitals", "clinic"}
    hosp = hospitals[hospitals["part"] == "hospitals"]
    assert set(hosp["method"]) == set(HOSPITAL_METHODS) and set(hosp["hospital"]) == set(HOSPITALS)
    for column in ("accuracy", "auc", "log_loss", "n_test", "n_train"):
        assert hosp[column].notna().all(), column
    text = (tmp_path / "heart-disease-flamby.md").read_text()
    assert "FLamby (published)" in text and "Cyclic100" in text and "Smoke configuration" in text
    text = (tmp_path / "heart-disease-hospitals.md").read_text()
    assert "accuracy − Own" in text and "small clinic" in text and "**Target**" in text
