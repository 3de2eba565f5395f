"""``domain-experts-mnist1d`` (fl-domain-experts.txt §4.3, Fig. 7 on mnist1d): users, smoke run and
the aggregation of several seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pubsubml.experiments.domain_experts import compared
from pubsubml.experiments.domain_experts.mnist1d import MNIST1D, mnist1d_fold, mnist1d_users

pytestmark = pytest.mark.usefixtures("one_thread")


def test_mnist1d_users_are_disjoint_equal_partitions() -> None:
    users = mnist1d_users(3, 20, 10, seed=0)
    assert len(users) == 3
    for u in users:
        assert len(u["train"][0]) == 20 and len(u["tune"][0]) == 16 and len(u["val"][0]) == 4
        assert len(u["test"][0]) == 10 and u["train"][0].shape[1] == 40
    first = users[0]["train"][0].to_numpy()
    assert not any((first == u["train"][0].to_numpy()).all() for u in users[1:])


def _fake_score_methods(
    users: list[dict[str, Any]], make: Any, privacy: Any, dp: bool, score: Any, seed: int
) -> tuple[list[dict[str, Any]], dict[int, Any]]:
    model = make(2, privacy, dp)
    assert model.gate_fraction == 0.2 and len(users) == 10  # the smoke run's 10 users
    rows = [
        {"user": i + 1, "method": m, "score": 0.1 * (seed + 1), "epsilon": privacy or 0.0,
         "guarantee": "dp" if dp else "none"}
        for i in range(len(users))
        for m in ("Baseline", "FL", "Alg 1", "Alg 2", "FT-FL")
    ]  # fmt: skip
    return rows, {}


def test_fold_uses_the_seed_for_data_and_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compared, "score_methods", _fake_score_methods)
    records = mnist1d_fold(1, 0, privacy="2", smoke=True)
    assert len(records) == 10 * 5
    assert {r["method"] for r in records} == {"Baseline", "DP-FL", "Alg 1", "Alg 2", "FT-DP-FL"}
    assert all(r["accuracy"] == pytest.approx(0.2) for r in records)  # seed 1
    assert {r["epsilon"] for r in records} == {2.0}


def test_two_seeds_aggregate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compared, "score_methods", _fake_score_methods)
    MNIST1D.run(tmp_path, MNIST1D.options(seeds=2, smoke=True, progress=False))
    md = (tmp_path / "domain-experts-mnist1d.md").read_text(encoding="utf-8")
    assert "| none | FL | 0.150 ± 0.050 | 2 | 0 |" in md
    assert "| 4 | FT-DP-FL | 0.150 ± 0.050 | 2 | 0 |" in md
    assert "smoke run (seeds 0–1): 10 users with 100 mnist1d training rows" in md


@pytest.mark.slow
def test_smoke_run_writes_accuracy_per_level(tmp_path: Path) -> None:
    written = MNIST1D.run(tmp_path, MNIST1D.options(smoke=True, progress=False))
    assert [p.name for p in written] == [
        "domain-experts-mnist1d.csv", "domain-experts-mnist1d.md", "domain-experts-mnist1d.png"
    ]  # fmt: skip
    table = pd.read_csv(tmp_path / "domain-experts-mnist1d.csv")
    assert list(table.columns) == [
        "seed", "privacy", "method", "user", "accuracy", "epsilon", "guarantee"
    ]  # fmt: skip
    assert len(table) == 3 * 10 * 5 and set(table.seed) == {0}
    assert table.accuracy.between(0, 1).all()
    # Accuracy over 20 test rows per user moves in steps of 1/20.
    assert ((table.accuracy * 20).round(9) % 1 == 0).all()
    dp = table[table.privacy.astype(str) == "4"]
    assert (dp[dp.method == "Alg 2"].epsilon <= 4.0 + 1e-9).all()
    assert set(dp[dp.method == "Alg 1"].guarantee) == {"paper accounting"}
    md = (tmp_path / "domain-experts-mnist1d.md").read_text(encoding="utf-8")
    assert "| privacy | method | mean ± SE | n | std |" in md and "| 2 | DP-FL |" in md
