"""``domain-experts-incentives`` (fl-domain-experts.txt §4.4.4, §7): the smoke run, its
federations, and the aggregation of several seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pubsubml.errors import DataValidationError
from pubsubml.experiments.domain_experts import incentives
from pubsubml.experiments.domain_experts.incentives import (
    FEDERATIONS,
    INCENTIVES,
    METHODS,
    federation_members,
    incentives_fold,
    sized_users,
)

pytestmark = pytest.mark.usefixtures("one_thread")

STEMS = ("", "-leave", "-small", "-epsilon")
OFFSET = {"Ind": 0.3, "DP-FL": 0.0, "FT-DP-FL": 0.1, "MoE": 0.2}


def _fake_federation(
    users: list[dict[str, Any]], epsilon: float | None, *, rounds: int, seed: int
) -> pd.DataFrame:
    """Accuracy 0.4 + 0.1·seed + a per-method offset + 0.01 per member (+0.05 without DP)."""
    rows = [
        {"user": i, "n": len(u["train"][0]), "method": m,
         "accuracy": 0.4 + 0.1 * seed + OFFSET[m] + 0.01 * len(users) + 0.05 * (epsilon is None),
         "epsilon": epsilon or float("inf"), "user_epsilon": epsilon or float("inf"),
         "sigma": 1.0 + i}
        for i, u in enumerate(users)
        for m in METHODS
    ]  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.slow
def test_smoke_writes_every_table_and_one_row_per_user(tmp_path: Path) -> None:
    written = INCENTIVES.run(tmp_path, INCENTIVES.options(smoke=True, progress=False))
    assert len(written) == 2 * len(STEMS) + 1
    for stem in STEMS:
        for ext in ("csv", "md"):
            assert (tmp_path / f"domain-experts-incentives{stem}.{ext}").exists()
    assert (tmp_path / "domain-experts-incentives.png").exists()

    table = pd.read_csv(tmp_path / "domain-experts-incentives.csv")
    assert list(table.columns) == ["seed", "user", "n", *METHODS, "FL", "FT-FL", "user_epsilon"]
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
    md = (tmp_path / "domain-experts-incentives.md").read_text(encoding="utf-8")
    assert "| user | n | Ind | DP-FL | FT-DP-FL | MoE | FL | FT-FL | user_epsilon |" in md


def test_two_seeds_aggregate_in_every_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(incentives, "evaluate_user_federation", _fake_federation)
    INCENTIVES.run(tmp_path, INCENTIVES.options(seeds=2, smoke=True, progress=False))

    def md(stem: str) -> str:
        return (tmp_path / f"domain-experts-incentives{stem}.md").read_text(encoding="utf-8")

    # Seeds 0 and 1 differ by 0.1: SE 0.05.  User 1, 4 members: Ind 0.74/0.84, FL 0.49/0.59.
    assert "| 1 | 20 | 0.790 ± 0.050 | 0.490 ± 0.050 | 0.590 ± 0.050 | 0.690 ± 0.050 | " in md("")
    assert "| 0.540 ± 0.050 | 0.640 ± 0.050 | 2 |" in md("")
    # One user fewer: −0.01 for everyone; the refit (next seed): +0.1.  The random leaver is
    # drawn per seed (users 3 and 2); the largest (user 4, 160 rows) is the same.
    leave = md("-leave")
    assert "| 4 | 160 | DP-FL | -0.010 ± 0.000 | 2 | -0.01 | -0.01 |" in leave
    assert "| 3, 2 | 80, 40 | MoE | -0.010 ± 0.000 | 2 |" in leave
    assert "| 0 | 0 | FT-DP-FL | 0.100 ± 0.000 | 2 | 0.1 | 0.1 |" in leave
    # The small federation has 2 members instead of 4.
    assert "| 1 | 20 | DP-FL | 0.490 ± 0.050 | 0.470 ± 0.050 | 2 |" in md("-small")
    assert "| 1 | Ind | 0.790 ± 0.050 | 2 | 0 | 1 |" in md("-epsilon")
    table = pd.read_csv(tmp_path / "domain-experts-incentives.csv")
    assert table.groupby("seed").user.apply(list).to_dict() == {0: [1, 2, 3, 4], 1: [1, 2, 3, 4]}
    sweep = pd.read_csv(tmp_path / "domain-experts-incentives-epsilon.csv")
    assert len(sweep) == 2 * 2 * 4 * len(METHODS)  # seeds × ε × users × methods


def test_fold_maps_members_back_to_their_users(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(incentives, "evaluate_user_federation", _fake_federation)
    records = incentives_fold(0, 0, federation="without-largest", target_epsilon=2.0, smoke=True)
    assert sorted({r["user"] for r in records}) == [0, 1, 2]
    assert {(r["leaver"], r["leaver_n"]) for r in records} == {(4, 160)}
    assert {r["n"] for r in records} == {20, 40, 80}
    plain = incentives_fold(0, 0, federation="all", target_epsilon=None, smoke=True)
    assert "leaver" not in plain[0] and len(plain) == 4 * len(METHODS)


def test_federation_members() -> None:
    sizes = (20, 40, 80, 160)
    assert federation_members("all", sizes, 0) == ([0, 1, 2, 3], -2)
    assert federation_members("refit", sizes, 0) == ([0, 1, 2, 3], -1)
    assert federation_members("small", sizes, 0) == ([0, 1], -2)
    for seed in range(5):
        members, who = federation_members("without-random", sizes, seed)
        assert who in (0, 1, 2) and who not in members and len(members) == 3
    assert federation_members("without-random", sizes, 0)[1] == 2
    assert set(FEDERATIONS) == {"all", "all-no-dp", "without-largest", "without-random",
                                "refit", "small"}  # fmt: skip
    with pytest.raises(ValueError, match="unknown federation"):
        federation_members("everyone", sizes, 0)


def test_sized_users_have_their_sizes_and_refuse_tiny_users() -> None:
    users = sized_users([6, 10, 30], n_test=7, seed=1)
    assert [len(u["train"][0]) for u in users] == [6, 10, 30]
    assert [len(u["tune"][0]) + len(u["val"][0]) for u in users] == [6, 10, 30]
    assert all(len(u["test"][0]) == 7 for u in users)
    with pytest.raises(DataValidationError, match="at least 4"):
        sized_users([3, 10], n_test=7, seed=1)
