"""Tables of ``domain-experts-incentives`` from its records (fl-domain-experts.txt Fig. 8, Table 4,
Fig. 10, Fig. 11)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.domain_experts.incentive_tables import (
    epsilon_summary,
    joining_table,
    leave_summary,
    leave_table,
    mean_se_cells,
    seed_means,
    small_table,
)

METHODS = ("Ind", "DP-FL", "FT-DP-FL", "MoE")
SIZES = (40, 10, 20)  # user 0 is the largest: the tables sort users by size


def _records(seed: int, members: list[int], shift: float, **extra: float) -> list[dict]:
    return [
        {"seed": seed, "user": u, "n": SIZES[u], "method": m,
         "accuracy": 0.5 + 0.1 * j + 0.01 * u + shift, "epsilon": 2.0,
         "user_epsilon": 1.9 + 0.01 * u, "sigma": 1.0, **extra}
        for u in members
        for j, m in enumerate(METHODS)
    ]  # fmt: skip


def _full(seeds: tuple[int, ...] = (0, 1)) -> pd.DataFrame:
    return pd.DataFrame([r for s in seeds for r in _records(s, [0, 1, 2], 0.1 * s)])


def test_joining_table_sorts_users_by_size_and_adds_the_no_dp_reference() -> None:
    plain = pd.DataFrame([r for s in (0, 1) for r in _records(s, [0, 1, 2], 0.2)])
    table = joining_table(_full(), plain)
    assert list(table.columns) == ["seed", "user", "n", *METHODS, "FL", "FT-FL", "user_epsilon"]
    assert table.seed.tolist() == [0, 0, 0, 1, 1, 1]
    assert table.n.tolist() == [10, 20, 40] * 2 and table.user.tolist() == [2, 3, 1] * 2
    first = table.iloc[0]  # seed 0, user 2 (index 1): DP-FL 0.61, the no-DP run 0.2 higher
    assert first["DP-FL"] == pytest.approx(0.61) and first["FL"] == pytest.approx(0.81)
    assert first["FT-FL"] == pytest.approx(0.91) and first["user_epsilon"] == pytest.approx(1.91)


def test_leave_table_and_summary_over_seeds() -> None:
    full = _full()
    reduced = pd.DataFrame(
        [r for s in (0, 1) for r in _records(s, [1, 2], 0.1 * s - 0.02 * (s + 1),
                                             federation="without-largest", leaver=1,
                                             leaver_n=40)]
        + [r for s, who in ((0, 1), (1, 2)) for r in _records(
            s, [u for u in range(3) if u != who], 0.1 * s, federation="without-random",
            leaver=who + 1, leaver_n=SIZES[who])]
    )  # fmt: skip
    leave = leave_table(full, reduced)
    assert "Ind" not in set(leave.method)
    assert list(leave.columns) == [
        "federation", "seed", "leaver", "leaver_n", "user", "n", "method", "full", "reduced",
        "change",
    ]  # fmt: skip
    assert np.allclose(leave.change, leave.reduced - leave.full)
    assert (leave.leaver != leave.user).all()
    summary = leave_summary(leave)
    largest = summary[summary.leaver == "1"].set_index("method")
    # Change −0.02 with seed 0 and −0.04 with seed 1: mean −0.03, SE 0.01 over n = 2 seeds.
    assert largest.loc["DP-FL", "mean"] == pytest.approx(-0.03)
    assert largest.loc["DP-FL", "se"] == pytest.approx(0.01)
    assert largest.loc["DP-FL", "n"] == 2 and largest.loc["DP-FL", "min"] == pytest.approx(-0.04)
    random = summary[summary.leaver != "1"]
    assert set(random.leaver) == {"2, 3"} and set(random.leaver_n) == {"10, 20"}
    assert np.allclose(random["mean"], 0.0)


def test_small_table_pairs_the_two_federations() -> None:
    alone = pd.DataFrame([r for s in (0, 1) for r in _records(s, [1, 2], 0.1 * s - 0.05)])
    both = small_table(_full(), alone)
    assert list(both.columns) == [
        "seed", "user", "n", "method", "accuracy_full", "accuracy_small", "epsilon_small"
    ]  # fmt: skip
    assert set(both.user) == {2, 3}  # 1-based
    assert np.allclose(both.accuracy_full - both.accuracy_small, 0.05)


def test_epsilon_summary_and_cells() -> None:
    sweep = pd.concat(
        [_full().assign(target_epsilon=1.0, epsilon=0.99), _full().assign(target_epsilon=2.0)]
    )
    summary = epsilon_summary(sweep)
    assert summary[["target_epsilon", "method"]].values.tolist()[:2] == [[1.0, "Ind"],
                                                                         [1.0, "DP-FL"]]  # fmt: skip
    ind = summary.iloc[0]
    # Mean over users 0.51 (seed 0) and 0.61 (seed 1); std over users 0.01.
    assert ind["mean"] == pytest.approx(0.56) and ind["se"] == pytest.approx(0.05)
    assert ind["std"] == pytest.approx(0.01) and ind["epsilon"] == pytest.approx(0.99)
    cells = mean_se_cells(_full(), ["user", "n"], ["accuracy"])
    # User 0: 0.5 … 0.8 (seed 0) and 0.6 … 0.9 (seed 1); the cell pools whatever rows it gets.
    assert cells.accuracy.tolist()[0] == "0.700 ± 0.046"
    means = seed_means(_full(), ["user"], ["accuracy"])
    assert means.accuracy.tolist() == pytest.approx([0.7, 0.71, 0.72])
