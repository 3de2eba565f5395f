"""Fig. 2/8, Fig. 4/5/10 and Fig. 7 at smoke size, and the catalog of the five experiments."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.async_dp.experiments import BANDS, EXPERIMENTS, OWNERS, SCALING
from pubsubml.experiments.base import Experiment

MarkdownRows = Callable[[Path], pd.DataFrame]
SmokeRun = Callable[[str, int], Path]

BAND_COLUMNS = ["dataset", "n_owners", "epsilon", "iteration", "psi_p25", "psi_median", "psi_p75"]
SCALING_COLUMNS = ["dataset", "n_owners", "n_records", "epsilon", "psi_mean", "psi_nonprivate", "S"]


def test_catalog_holds_the_five_experiments_without_folds() -> None:
    assert [e.name for e in EXPERIMENTS] == [
        "async-dp-bands",
        "async-dp-scaling",
        "async-dp-owners",
        "async-dp-map",
        "async-dp-calibrate",
    ]
    for exp in EXPERIMENTS:
        assert (exp.folds, exp.min_folds, exp.max_folds, exp.seeds) == (1, 1, 1, 1)
        fold = exp.run_fold  # a top-level function, which a process pool can ship by name
        assert getattr(sys.modules[fold.__module__], fold.__qualname__) is fold
        settings = exp.grid(exp.options(smoke=True))
        assert settings and all(s["smoke"] is True for s in settings)
        assert len(exp.grid(exp.options())) >= len(settings)
    assert [p.name for e in EXPERIMENTS for p in e.params] == ["model_path"]


@pytest.mark.parametrize("exp", [BANDS, SCALING, OWNERS], ids=lambda e: e.name)
def test_bad_options_are_refused_before_anything_is_written(
    exp: Experiment, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match="no folds"):
        exp.options(folds=5, smoke=True)
    with pytest.raises(ValueError, match="takes no option"):
        exp.options(smoke=True, model_path=tmp_path / "m.json")
    with pytest.raises(ValueError, match="seeds"):
        exp.options(seeds=0, smoke=True)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="not a folder"):
        exp.run(blocker / "out", exp.options(smoke=True, progress=False))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_bands_write_quantile_curves_and_the_last_iteration(
    smoke_run: SmokeRun, markdown_rows: MarkdownRows
) -> None:
    out = smoke_run("async-dp-bands", 1)
    assert sorted(p.name for p in out.iterdir()) == [
        "async-dp-bands.csv",
        "async-dp-bands.md",
        "async-dp-bands.png",
    ]
    curves = pd.read_csv(out / "async-dp-bands.csv")
    assert list(curves.columns) == ["seed", *BAND_COLUMNS]
    assert len(curves) == 6 * 60 and set(curves.iteration) == set(range(1, 61))
    assert (curves.psi_p25 >= 0).all()
    assert (curves.psi_p25 <= curves.psi_median).all()
    assert (curves.psi_median <= curves.psi_p75).all()
    last = curves[curves.iteration == 60]
    for dataset, n_owners in (("synthetic", 3), ("diamonds-by-color", 7)):
        rows = last[last.dataset == dataset].sort_values("epsilon")
        assert (rows.n_owners == n_owners).all()
        assert rows.psi_median.is_monotonic_decreasing  # a larger ε gives a lower ψ (Fig. 2)
    table = markdown_rows(out / "async-dp-bands.md")
    assert list(table.columns) == BAND_COLUMNS[:3] + BAND_COLUMNS[4:] and len(table) == 6
    assert table.psi_median.tolist() == [f"{v:.4g}" for v in last.psi_median]
    text = (out / "async-dp-bands.md").read_text()
    assert text.startswith("# ψ after T iterations (Fig. 2/8)") and "6 runs, T=60" in text
    assert (out / "async-dp-bands.png").stat().st_size > 0


def test_bands_take_the_median_over_seeds(smoke_run: SmokeRun, markdown_rows: MarkdownRows) -> None:
    out = smoke_run("async-dp-bands", 2)
    curves = pd.read_csv(out / "async-dp-bands.csv")
    assert curves.groupby("seed").size().to_dict() == {0: 360, 1: 360}
    one_seed = pd.read_csv(smoke_run("async-dp-bands", 1) / "async-dp-bands.csv")
    pd.testing.assert_frame_equal(curves[curves.seed == 0].reset_index(drop=True), one_seed)
    last = curves[curves.iteration == 60]
    medians = last.groupby(["dataset", "epsilon"], sort=False)[["psi_p25", "psi_p75"]].median()
    table = markdown_rows(out / "async-dp-bands.md")
    assert len(table) == 6
    assert table.psi_p25.tolist() == [f"{v:.4g}" for v in medians.psi_p25]
    assert table.psi_p75.tolist() == [f"{v:.4g}" for v in medians.psi_p75]
    assert "With 2 seeds (0 … 1)" in (out / "async-dp-bands.md").read_text()


def test_scaling_writes_the_runs_and_the_fit(
    smoke_run: SmokeRun, markdown_rows: MarkdownRows
) -> None:
    out = smoke_run("async-dp-scaling", 1)
    names = {p.name for p in out.iterdir()}
    assert names == {f"async-dp-scaling{s}" for s in (".csv", ".md", ".png", "-fit.csv", "-fit.md")}
    runs = pd.read_csv(out / "async-dp-scaling.csv")
    assert list(runs.columns) == ["seed", *SCALING_COLUMNS, "noise_regime", "bound_fit"]
    assert runs.dataset.unique().tolist() == [
        "synthetic",
        "diamonds-by-color",
        "synthetic, Ξ=1 (clipped)",
    ]
    synthetic = runs[runs.dataset == "synthetic"]
    assert len(synthetic) == 4 and set(synthetic.n_records) == {1_000, 3_000}
    # S = Σ_i 1/(n²ε²) with n = Σ_i n_i: 1/(3 n_i² ε²) for three owners of n_i records
    expected = 1 / (3 * synthetic.n_records.astype(float) ** 2 * synthetic.epsilon**2)
    np.testing.assert_allclose(synthetic.S, expected, rtol=1e-12)
    for _, line in synthetic.groupby("n_records"):
        assert line.sort_values("epsilon").psi_mean.is_monotonic_decreasing
    regime = (runs.psi_mean > 10 * runs.psi_nonprivate) & (runs.psi_mean < 1)
    assert runs.noise_regime.tolist() == regime.tolist()
    fits = pd.read_csv(out / "async-dp-scaling-fit.csv")
    assert list(fits.columns) == [
        "dataset",
        "c1_bar",
        "c2_bar",
        "slope_vs_n",
        "slope_vs_epsilon",
        "points_fitted",
    ]
    assert (
        fits.points_fitted.tolist()
        == runs.groupby("dataset", sort=False).noise_regime.sum().tolist()
    )
    table = markdown_rows(out / "async-dp-scaling.md")
    assert list(table.columns) == [*SCALING_COLUMNS, "noise_regime", "bound_fit"]
    assert table.psi_mean.tolist() == [f"{v:.4g}" for v in runs.psi_mean]
    assert markdown_rows(out / "async-dp-scaling-fit.md").dataset.tolist() == fits.dataset.tolist()


def test_scaling_averages_seeds_with_standard_errors(
    smoke_run: SmokeRun, markdown_rows: MarkdownRows
) -> None:
    out = smoke_run("async-dp-scaling", 2)
    runs = pd.read_csv(out / "async-dp-scaling.csv")
    assert runs.groupby("seed").size().to_dict() == {0: 6, 1: 6}
    table = markdown_rows(out / "async-dp-scaling.md")
    assert len(table) == 6 and "psi_mean_se" in table.columns
    first = runs[runs.seed == 0].reset_index(drop=True)
    second = runs[runs.seed == 1].reset_index(drop=True)
    mean = (first.psi_mean + second.psi_mean) / 2
    se = (first.psi_mean - second.psi_mean).abs() / 2  # std(ddof=1)/√2 of two values
    np.testing.assert_allclose(table.psi_mean.astype(float), mean, rtol=1e-3)
    np.testing.assert_allclose(table.psi_mean_se.astype(float), se, rtol=1e-3)
    assert "Fitted on the means over 2 seeds" in (out / "async-dp-scaling-fit.md").read_text()


def test_owners_count_who_gains_and_keep_the_per_owner_rows(
    smoke_run: SmokeRun, markdown_rows: MarkdownRows
) -> None:
    out = smoke_run("async-dp-owners", 1)
    names = {p.name for p in out.iterdir()}
    assert names == {
        *(f"async-dp-owners.{s}" for s in ("csv", "md", "png")),
        "async-dp-owners-detail.csv",
        "async-dp-owners-detail.md",
    }
    detail = pd.read_csv(out / "async-dp-owners-detail.csv")
    assert list(detail.columns) == [
        "seed",
        "dataset",
        "owner",
        "n_records",
        "epsilon",
        "psi_alone",
        "psi_collab",
        "benefits",
    ]
    owners = detail.groupby("dataset").owner.apply(sorted).to_dict()
    assert owners == {
        "diamonds-by-color": list("DEFGHIJ"),
        "doctorcontacts-by-health": ["excellent", "fair", "good", "poor"],
    }
    assert (detail.benefits == (detail.psi_collab < detail.psi_alone)).all()
    assert (detail.psi_alone > 0).all() and (detail.n_records > 0).all()
    counts = pd.read_csv(out / "async-dp-owners.csv")
    assert list(counts.columns) == ["seed", "dataset", "epsilon", "owners", "benefit", "psi_collab"]
    assert counts.owners.tolist() == [7, 4]
    assert counts.benefit.tolist() == detail.groupby("dataset", sort=False).benefits.sum().tolist()
    assert (counts.benefit >= 1).all()  # at ε = 100 the worst-off owners gain (Fig. 7)
    table = markdown_rows(out / "async-dp-owners.md")
    assert table.to_dict("list") == {
        "dataset": ["diamonds-by-color", "doctorcontacts-by-health"],
        "epsilon": ["100", "100"],
        "owners": ["7", "4"],
        "benefit": [str(b) for b in counts.benefit],
        "psi_collab": [f"{v:.4g}" for v in counts.psi_collab],
    }


def test_owners_average_the_counts_over_seeds(
    smoke_run: SmokeRun, markdown_rows: MarkdownRows
) -> None:
    out = smoke_run("async-dp-owners", 2)
    counts = pd.read_csv(out / "async-dp-owners.csv")
    assert counts.seed.tolist() == [0, 1, 0, 1]
    table = markdown_rows(out / "async-dp-owners.md")
    assert list(table.columns) == [
        "dataset",
        "epsilon",
        "owners",
        "benefit",
        "benefit_se",
        "psi_collab",
        "psi_collab_se",
    ]
    means = counts.groupby("dataset", sort=False).psi_collab.mean()
    np.testing.assert_allclose(table.psi_collab.astype(float), means, rtol=1e-3)
    detail = pd.read_csv(out / "async-dp-owners-detail.csv")
    assert set(detail.seed) == {0, 1}
