"""``domain-experts-regression`` and ``domain-experts-classification`` (fl-domain-experts.txt §4.1,
§4.2): smoke runs, the seed aggregation of their reports, and their data."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.domain_experts import compared
from pubsubml.experiments.domain_experts import experiments as de
from pubsubml.experiments.domain_experts.experiments import (
    CLASSIFICATION,
    GATE_GRID,
    PAPER_RMSE,
    REGRESSION,
    classification_users,
    regression_fold,
    regression_users,
    target,
)

pytestmark = pytest.mark.usefixtures("one_thread")

ALL_METHODS = {"Baseline", "FL", "Alg 1", "Alg 2", "FT-FL", "FT-DP-FL"}


class _FakeGate:
    """Stands in for a fitted Algorithm-1 federation: α_u(x, y) = u / 4 + x / 100."""

    def gate(self, X: pd.DataFrame, *, user: int) -> np.ndarray:
        return (user + 1) / 4 + X["x"].to_numpy() / 100


def _fake_score_methods(
    users: list[dict[str, Any]], make: Any, privacy: Any, dp: bool, score: Any, seed: int
) -> tuple[list[dict[str, Any]], dict[int, Any]]:
    """Scores that depend on the seed, user and method only (instant)."""
    make(1, privacy, dp)  # the experiment's factory builds an (unfitted) federation
    rows = [
        {"user": i + 1, "method": m, "score": 1.0 + seed + i / 10 + j / 100,
         "epsilon": 0.0 if m == "Baseline" else math.inf, "guarantee": "none"}
        for i in range(len(users))
        for j, m in enumerate(("Baseline", "FL", "Alg 1", "Alg 2", "FT-FL"))
    ]  # fmt: skip
    return rows, {1: _FakeGate(), 2: None}


@pytest.fixture(scope="module")
def regression_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    out = tmp_path_factory.mktemp("regression")
    return out, REGRESSION.run(out, REGRESSION.options(smoke=True, progress=False))


@pytest.mark.slow
def test_regression_smoke_writes_rmse_table_and_gate_maps(
    regression_out: tuple[Path, list[Path]],
) -> None:
    out, written = regression_out
    names = {p.name for p in written}
    assert names == {
        "domain-experts-regression.csv",
        "domain-experts-regression.md",
        "domain-experts-regression-gates.csv",
        "domain-experts-regression-gates.md",
        "domain-experts-regression-gates.png",
    }
    table = pd.read_csv(out / "domain-experts-regression.csv")
    assert list(table.columns) == [
        "seed", "sigma", "method", "user", "rmse", "paper_rmse", "epsilon", "guarantee"
    ]  # fmt: skip
    assert len(table) == 3 * 2 * 5 and set(table.seed) == {0}
    assert set(table.method) == ALL_METHODS
    assert (table.rmse > 0).all() and np.isfinite(table.rmse).all()
    # σ = 2 and 4 are accounted: finite ε, larger for less noise.
    eps = table.groupby("sigma").epsilon.max()
    assert eps[0.0] == float("inf") and eps[2.0] > eps[4.0] > 0
    # Each row says what its ε covers: Algorithm 1's is paper accounting, not a guarantee.
    noisy = table[table.sigma > 0].groupby("method").guarantee.unique()
    assert list(noisy["Alg 1"]) == ["paper accounting"] and list(noisy["Alg 2"]) == ["dp"]
    assert list(noisy["Baseline"]) == ["nothing released"]
    assert (table[table.method == "Baseline"].epsilon == 0).all()
    alg1 = table[(table.method == "Alg 1") & (table.sigma == 2.0)].sort_values("user")
    assert alg1.paper_rmse.tolist() == list(PAPER_RMSE[("Alg 1", 2.0)])
    assert table[table.method == "Alg 2"].paper_rmse.isna().all()
    md = (out / "domain-experts-regression.md").read_text(encoding="utf-8")
    assert "| sigma | method | user | mean ± SE | n | paper_rmse |" in md
    assert "smoke run (seed 0)" in md


@pytest.mark.slow
def test_regression_gate_csv_holds_the_grid_and_test_inputs(
    regression_out: tuple[Path, list[Path]],
) -> None:
    out, _ = regression_out
    gates = pd.read_csv(out / "domain-experts-regression-gates.csv")
    assert list(gates.columns) == ["seed", "kind", "user", "x", "y", "alpha"]
    grid = gates[gates.kind == "gate"]
    assert grid.groupby("user").size().to_dict() == {1: len(GATE_GRID) ** 2, 2: len(GATE_GRID) ** 2}
    assert sorted(grid.x.unique()) == pytest.approx(GATE_GRID.tolist())
    assert grid.alpha.between(0, 1).all()
    inputs = gates[gates.kind == "input"]
    assert inputs.groupby("user").size().to_dict() == {1: 100, 2: 100}  # smoke test rows
    assert inputs.alpha.isna().all()
    assert (out / "domain-experts-regression-gates.png").stat().st_size > 10_000


def test_regression_report_aggregates_two_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(de, "score_methods", _fake_score_methods)
    written = REGRESSION.run(tmp_path, REGRESSION.options(seeds=2, smoke=True, progress=False))
    assert len(written) == 5
    table = pd.read_csv(tmp_path / "domain-experts-regression.csv")
    assert set(table.seed) == {0, 1} and len(table) == 2 * 3 * 2 * 5
    md = (tmp_path / "domain-experts-regression.md").read_text(encoding="utf-8")
    # Seed s scores 1 + s + ...: Baseline of user 1 is 1.0 and 2.0, mean 1.5 ± 0.5 over n = 2.
    assert "| 0 | Baseline | 1 | 1.500 ± 0.500 | 2 | 15.32 | 0 | none |" in md
    assert "| 2 | FT-DP-FL | 2 | 1.640 ± 0.500 | 2 | nan | inf | none |" in md
    gates = pd.read_csv(tmp_path / "domain-experts-regression-gates.csv")
    assert set(gates.seed) == {0, 1}  # only σ = 0 draws the maps, once per seed
    assert len(gates[gates.kind == "gate"]) == 2 * 2 * len(GATE_GRID) ** 2


def test_regression_fold_is_seeded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(de, "score_methods", _fake_score_methods)
    records = regression_fold(0, 0, sigma=4.0, smoke=True)
    assert {r["kind"] for r in records} == {"rmse"}  # gate maps at σ = 0 only
    assert {r["method"] for r in records} == {"Baseline", "FL", "Alg 1", "Alg 2", "FT-DP-FL"}
    fl = [r for r in records if r["method"] == "FL"]
    assert [r["paper_rmse"] for r in fl] == list(PAPER_RMSE[("FL", 4.0)])


def test_regression_users_follow_the_target() -> None:
    users = regression_users(30, 10, 20, seed=0)
    assert len(users) == 2
    X, y = users[0]["train"]
    assert X.shape == (30, 2) and len(users[1]["test"][0]) == 20
    assert np.allclose(y, 5 * X.x - 2 * X.y + 0.5 * X.y**3)
    assert target(np.array([1.0]), np.array([2.0])).tolist() == [5.0]
    # The two users' inputs come from different Gaussians (§4.1).
    assert users[0]["train"][0].y.mean() > users[1]["train"][0].y.mean()
    again = regression_users(30, 10, 20, seed=0)
    assert again[1]["val"][0].equals(users[1]["val"][0])
    assert not regression_users(30, 10, 20, seed=1)[0]["train"][0].equals(X)


@pytest.mark.slow
def test_classification_smoke_two_seeds(tmp_path: Path) -> None:
    opts = CLASSIFICATION.options(seeds=2, smoke=True, progress=False)
    written = CLASSIFICATION.run(tmp_path, opts)
    assert sorted(p.suffix for p in written) == [".csv", ".md", ".png"]
    table = pd.read_csv(tmp_path / "domain-experts-classification.csv")
    assert list(table.columns) == [
        "seed", "privacy", "method", "user", "accuracy", "epsilon", "guarantee"
    ]  # fmt: skip
    assert len(table) == 2 * 3 * 5 * 5  # seeds × privacy levels × sites × methods
    assert table.accuracy.between(0, 1).all()
    by_level = table.groupby(table.privacy.astype(str)).method.unique()
    assert set(by_level["none"]) == {"Baseline", "FL", "Alg 1", "Alg 2", "FT-FL"}
    assert set(by_level["2"]) == {"Baseline", "DP-FL", "Alg 1", "Alg 2", "FT-DP-FL"}
    dp = table[(table.privacy.astype(str) == "2") & (table.method == "DP-FL")]
    assert (dp.epsilon <= 2.0 + 1e-9).all() and (dp.guarantee == "dp").all()
    md = (tmp_path / "domain-experts-classification.md").read_text(encoding="utf-8")
    assert "| privacy | method | mean ± SE | n | std |" in md and "seeds 0–1" in md
    per_seed = table[table.privacy.astype(str) == "none"].groupby(["method", "seed"]).accuracy
    fl = per_seed.mean().loc["FL"]
    expected = f"| none | FL | {fl.mean():.3f} ± {fl.sem():.3f} | 2 |"
    assert expected in md


def test_classification_users_are_sites_of_fifty_labelled_rows() -> None:
    users = classification_users(3, seed=0)
    assert len(users) == 3
    for u in users:
        assert len(u["train"][0]) == 25 and len(u["val"][0]) == 25 and len(u["test"][0]) == 350
        assert set(np.unique(u["test"][1])) <= {0, 1}


def test_classification_report_aggregates_two_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compared, "score_methods", _fake_score_methods)
    CLASSIFICATION.run(tmp_path, CLASSIFICATION.options(seeds=2, smoke=True, progress=False))
    md = (tmp_path / "domain-experts-classification.md").read_text(encoding="utf-8")
    # Seed s, site i, method j: 1 + s + i/10 + j/100; 5 sites: mean over sites 1 + s + 0.2 + j/100.
    assert "| none | FL | 1.710 ± 0.500 | 2 | 0.1581 |" in md
    assert "| 4 | DP-FL | 1.710 ± 0.500 | 2 | 0.1581 |" in md
