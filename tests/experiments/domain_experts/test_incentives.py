"""Smoke run of the ``domain-experts-incentives`` benchmark (fl-domain-experts.txt §4.4.4, §7)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from pubsubml.cli.domain_experts import BENCHMARKS, register
from pubsubml.errors import DataValidationError
from pubsubml.experiments.domain_experts.incentives import METHODS, sized_users

STEMS = ("", "-leave", "-small", "-epsilon")


@pytest.mark.slow
def test_smoke_writes_every_table_and_one_row_per_user(tmp_path: Path) -> None:
    assert "domain-experts-incentives" in BENCHMARKS
    group = typer.Typer()
    register(group)
    result = CliRunner().invoke(
        group, ["domain-experts-incentives", "--smoke", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    for stem in STEMS:
        for ext in ("csv", "md"):
            assert (tmp_path / f"domain-experts-incentives{stem}.{ext}").exists()
    assert (tmp_path / "domain-experts-incentives.png").exists()

    table = pd.read_csv(tmp_path / "domain-experts-incentives.csv")
    assert list(table.columns) == ["user", "n", *METHODS, "FL", "FT-FL", "user_epsilon"]
    # σ is calibrated per user, so every user spends just under its ε = 2 target.
    assert ((table.user_epsilon > 1.9) & (table.user_epsilon <= 2.0)).all()
    assert sorted(table.user) == [1, 2, 3, 4]  # one row per user of the smoke run
    assert table.n.is_monotonic_increasing and table.n.nunique() == 4
    assert table[list(METHODS)].apply(lambda c: c.between(0, 1)).all().all()

    leave = pd.read_csv(tmp_path / "domain-experts-incentives-leave.csv")
    # The largest user and one other leave (leaver 0: nobody leaves, another seed); the change
    # is reported for every remaining user.
    assert 4 in set(leave.leaver)  # user 4 is the largest of the smoke run
    assert leave.leaver.nunique() == 3 and (leave.leaver != leave.user).all()
    assert leave.groupby("leaver").user.nunique().to_dict() == {
        who: (4 if who == 0 else 3) for who in set(leave.leaver)
    }
    assert set(leave.method) == {"DP-FL", "FT-DP-FL", "MoE"}
    assert (leave.change - (leave.reduced - leave.full)).abs().max() < 1e-12

    small = pd.read_csv(tmp_path / "domain-experts-incentives-small.csv")
    assert set(small.n) == {20, 40} and set(small.method) == set(METHODS)
    eps = pd.read_csv(tmp_path / "domain-experts-incentives-epsilon.csv")
    spent = eps.groupby("target_epsilon").epsilon.max()
    assert (spent <= spent.index * 1.001).all() and spent.is_monotonic_increasing


def test_sized_users_have_their_sizes_and_refuse_tiny_users() -> None:
    users = sized_users([6, 10, 30], n_test=7, seed=1)
    assert [len(u["train"][0]) for u in users] == [6, 10, 30]
    assert [len(u["tune"][0]) + len(u["val"][0]) for u in users] == [6, 10, 30]
    assert all(len(u["test"][0]) == 7 for u in users)
    with pytest.raises(DataValidationError, match="at least 4"):
        sized_users([3, 10], n_test=7, seed=1)
