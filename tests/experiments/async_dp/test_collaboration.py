"""Fig. 6 (the value of collaboration) and the calibration of the forecast at smoke size."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.async_dp.collaboration import CALIBRATE, MAP
from pubsubml.methods.async_dp.cost import CostOfPrivacyModel, default_model_path

MarkdownRows = Callable[[Path], pd.DataFrame]
SmokeRun = Callable[[str, int], Path]

MAP_COLUMNS = ["n_owners", "n_records", "epsilon", "psi_collab", "psi_alone_owner1", "pays"]
CALIBRATION_COLUMNS = [
    "n_owners",
    "n_records",
    "epsilon",
    "psi_mean",
    "psi_nonprivate",
    "psi_alone",
    "S",
    "noise_regime",
    "bound_fit",
]


def test_map_marks_where_the_collaboration_beats_owner_one(
    smoke_run: SmokeRun, markdown_rows: MarkdownRows
) -> None:
    out = smoke_run("async-dp-map", 1)
    assert sorted(p.name for p in out.iterdir()) == [
        f"async-dp-map.{s}" for s in ("csv", "md", "png")
    ]
    cells = pd.read_csv(out / "async-dp-map.csv")
    assert list(cells.columns) == ["seed", *MAP_COLUMNS, "forecast_pays"]
    assert list(zip(cells.n_owners, cells.epsilon, strict=True)) == [
        (2, 10.0),
        (2, 1000.0),
        (4, 10.0),
        (4, 1000.0),
    ]
    assert (cells.n_records == 1_000).all()
    assert (cells.pays == (cells.psi_collab < cells.psi_alone_owner1)).all()
    for _, line in cells.groupby("n_owners"):
        assert line.sort_values("epsilon").psi_collab.is_monotonic_decreasing
    model = CostOfPrivacyModel.load_default()
    expected = [
        model.forecast(n_owners=int(n), n_records=1_000, epsilon=e).pays
        for n, e in zip(cells.n_owners, cells.epsilon, strict=True)
    ]
    assert cells.forecast_pays.tolist() == expected
    table = markdown_rows(out / "async-dp-map.md")
    assert list(table.columns) == [*MAP_COLUMNS, "forecast_pays"]
    assert table.pays.tolist() == [str(p) for p in cells.pays]
    assert "6 runs per cell, T=60" in (out / "async-dp-map.md").read_text()


def test_map_averages_seeds_and_reports_the_share_that_pays(
    smoke_run: SmokeRun, markdown_rows: MarkdownRows
) -> None:
    out = smoke_run("async-dp-map", 2)
    cells = pd.read_csv(out / "async-dp-map.csv")
    assert cells.seed.tolist() == [0, 1] * 4
    table = markdown_rows(out / "async-dp-map.md")
    assert list(table.columns) == [
        *MAP_COLUMNS[:4],
        "psi_collab_se",
        "psi_alone_owner1",
        "pays",
        "pays_share",
        "forecast_pays",
    ]
    by_cell = cells.groupby(["n_owners", "epsilon"], sort=False)
    np.testing.assert_allclose(table.psi_collab.astype(float), by_cell.psi_collab.mean(), rtol=1e-3)
    assert table.pays_share.astype(float).tolist() == by_cell.pays.mean().tolist()
    means = by_cell[["psi_collab", "psi_alone_owner1"]].mean()
    assert table.pays.tolist() == [str(p) for p in means.psi_collab < means.psi_alone_owner1]


def test_calibration_fits_the_forecast_without_touching_the_packaged_model(
    smoke_run: SmokeRun, markdown_rows: MarkdownRows
) -> None:
    packaged = default_model_path().read_bytes()
    out = smoke_run("async-dp-calibrate", 1)
    # the smoke calibration writes no model unless asked, and no figure
    assert sorted(p.name for p in out.iterdir()) == [
        "async-dp-calibration.csv",
        "async-dp-calibration.md",
    ]
    assert default_model_path().read_bytes() == packaged
    runs = pd.read_csv(out / "async-dp-calibration.csv")
    assert list(runs.columns) == ["seed", *CALIBRATION_COLUMNS]
    assert len(runs) == 2 * 2 * 2  # N × n_i × ε
    np.testing.assert_allclose(
        runs.S, 1 / (runs.n_owners * runs.n_records.astype(float) ** 2 * runs.epsilon**2)
    )
    assert (runs.psi_mean > runs.psi_nonprivate).all()
    table = markdown_rows(out / "async-dp-calibration.md")
    assert list(table.columns) == CALIBRATION_COLUMNS and len(table) == 8
    assert "c̄1=" in (out / "async-dp-calibration.md").read_text()


def test_calibration_writes_the_model_it_states(tmp_path: Path) -> None:
    target = tmp_path / "models" / "forecast.json"
    out = tmp_path / "results"
    written = CALIBRATE.run(out, CALIBRATE.options(smoke=True, progress=False, model_path=target))
    assert written == [out / "async-dp-calibration.csv", out / "async-dp-calibration.md", target]
    model = CostOfPrivacyModel.from_json(target.read_text())
    assert model.horizon == 60 and model.c1 >= 0 and model.c2 >= 0
    assert model.calibration["size"] == "smoke" and model.calibration["seeds"] == 1
    assert model.calibration["n_owners"] == [2, 5]
    notes = (out / "async-dp-calibration.md").read_text()
    for label, value in (
        ("c̄1", model.c1),
        ("c̄2", model.c2),
        ("a", model.alone_a),
        ("b", model.alone_b),
    ):
        assert f"{label}={value:.4g}" in notes
    assert str(target) in notes
    runs = pd.read_csv(out / "async-dp-calibration.csv")
    bound = runs.n_owners**model.owner_exponent * (model.c1 * np.sqrt(runs.S) + model.c2 * runs.S)
    np.testing.assert_allclose(runs.bound_fit, bound, rtol=1e-9)


def test_calibration_over_two_seeds_fits_the_seed_means(
    smoke_run: SmokeRun, markdown_rows: MarkdownRows
) -> None:
    out = smoke_run("async-dp-calibrate", 2)
    runs = pd.read_csv(out / "async-dp-calibration.csv")
    assert runs.groupby("seed").size().to_dict() == {0: 8, 1: 8}
    table = markdown_rows(out / "async-dp-calibration.md")
    assert "psi_mean_se" in table.columns and len(table) == 8
    means = runs.groupby(["n_owners", "n_records", "epsilon"], sort=False).psi_mean.mean()
    np.testing.assert_allclose(table.psi_mean.astype(float), means, rtol=1e-3)
    # one fit for both seeds: a row's bound depends on its (N, S) only, not on its seed
    assert (
        runs[runs.seed == 0].bound_fit.to_numpy() == runs[runs.seed == 1].bound_fit.to_numpy()
    ).all()


def test_calibration_refuses_an_unwritable_model_path_before_running(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="is a folder"):
        CALIBRATE.options(smoke=True, model_path=tmp_path)
    with pytest.raises(ValueError, match="not a folder"):
        CALIBRATE.options(smoke=True, model_path=blocker / "model.json")
    with pytest.raises(ValueError, match="no folds"):
        CALIBRATE.options(smoke=True, folds=3)
    with pytest.raises(ValueError, match="takes no option"):
        MAP.options(smoke=True, model_path=tmp_path / "m.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
