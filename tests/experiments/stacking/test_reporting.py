"""The four stacking experiments end to end (smoke sizes) and their result tables (pfl-stacking.txt §4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.stacking.reporting import (
    EXPERIMENTS,
    jaccard_table,
    realized_balance,
)

BY_NAME = {exp.name: exp for exp in EXPERIMENTS}
EXTRA_STEMS = {
    "stacking-label": ["stacking-label-matrix"],
    "stacking-vertical": ["stacking-vertical-jaccard"],
}
"""Result files beside ``NAME.{csv,md,png}`` and ``NAME-graph.{csv,md,png}`` (no figure)."""
SUMMARY_KEYS = {
    "stacking-quantity": ["models", "a", "public", "variant"],
    "stacking-label": ["models", "alpha", "public", "variant"],
    "stacking-vertical": ["models", "rows", "defaults", "p", "noise", "public", "variant"],
    "stacking-natural": ["models", "client", "public", "variant"],
}
"""The setting columns of each summary table, one row per group."""


def expected_files(name: str) -> set[str]:
    files = {f"{stem}.{ext}" for stem in (name, f"{name}-graph") for ext in ("csv", "md", "png")}
    return files | {f"{stem}.{ext}" for stem in EXTRA_STEMS.get(name, []) for ext in ("csv", "md")}


def summary_rows(md: str) -> list[dict[str, str]]:
    """The first Markdown table of a result file, as one dict per row."""
    lines = [line for line in md.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        for line in lines[2:]
    ]


def test_the_family_is_the_four_scenarios_of_section_4() -> None:
    assert list(BY_NAME) == [
        "stacking-quantity",
        "stacking-label",
        "stacking-vertical",
        "stacking-natural",
    ]
    for exp in EXPERIMENTS:
        assert [p.name for p in exp.params] == ["dataset", "max_rows", "trees", "dp"]
        assert "pfl-stacking.txt §4." in exp.summary


@pytest.mark.parametrize(
    ("name", "bad", "message"),
    [
        ("stacking-natural", {"dataset": "shuttle"}, "no natural partition column"),
        ("stacking-quantity", {"dataset": "iris"}, "--dataset must be one of"),
        ("stacking-label", {"trees": 0}, "--trees must be >= 1"),
        ("stacking-vertical", {"max_rows": 0}, "--max-rows must be >= 1"),
        ("stacking-quantity", {"folds": 0}, r"--folds\S* >= 1"),
        ("stacking-label", {"seeds": 0}, "--seeds >= 1"),
        ("stacking-natural", {"clients": 3}, "takes no option"),
    ],
)
def test_a_bad_option_is_refused_before_anything_runs(
    name: str, bad: dict[str, Any], message: str, tmp_path: Path
) -> None:
    exp = BY_NAME[name]
    with pytest.raises(ValueError, match=message):
        exp.run(tmp_path, exp.options(smoke=True, progress=False, **bad))
    assert list(tmp_path.iterdir()) == []


def check_client_table(table: pd.DataFrame, seeds: set[int], folds: set[int]) -> None:
    assert set(table.record) == {"client"}
    assert set(table.variant) == {"held_out", "pooled"}
    assert set(table.seed) == seeds and set(table.fold) == folds
    for column in ("bacc", "private_bacc", "self_importance", "importance"):
        assert table[column].between(0, 1).all(), column
    assert table.gain.between(-1, 1).all()
    assert np.allclose(table.gain, table.bacc - table.private_bacc)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BY_NAME))
def test_smoke_run_writes_the_results_of_the_experiment(name: str, tmp_path: Path) -> None:
    exp = BY_NAME[name]
    with_dp = name == "stacking-quantity"  # the DP public models are exercised once (seconds)
    written = exp.run(tmp_path, exp.options(smoke=True, progress=False, dp=with_dp))
    assert {p.name for p in written} == {p.name for p in tmp_path.iterdir()} == expected_files(name)
    table = pd.read_csv(tmp_path / f"{name}.csv")
    check_client_table(table, seeds={0}, folds={0, 1})
    dp = table[table.public != "rf"]
    assert set(dp.public) == ({"dp_rf_e1", "dp_lr_e1", "dp_mlp_e1"} if with_dp else set())
    assert (dp.epsilon <= 1.0 + 1e-9).all() and (
        table[table.public == "rf"].epsilon == np.inf
    ).all()
    md = (tmp_path / f"{name}.md").read_text()
    assert md.startswith(f"# {name}\n") and "1 seed(s) × 2 repeat(s)" in md
    assert {row["n"] for row in summary_rows(md)} == {"1"}
    graph = pd.read_csv(tmp_path / f"{name}-graph.csv")
    assert graph.weight.between(0, 1).all()
    assert graph.groupby("subscriber").weight.sum().to_numpy() == pytest.approx(1.0)
    check_scenario(name, table, tmp_path)


def check_scenario(name: str, table: pd.DataFrame, out: Path) -> None:
    if name == "stacking-quantity":
        assert set(table.a) == {0.5, 1.0} and table.share.between(0, 1).all()
    elif name == "stacking-label":
        assert "Realized positive-label share" in (out / "stacking-label.md").read_text()
        matrix = pd.read_csv(out / "stacking-label-matrix.csv")
        weights = matrix.drop(columns="subscriber").to_numpy(dtype=float)
        seen = weights[~np.isnan(weights)]  # bins without a client are empty
        assert weights.shape == (5, 5) and seen.size and ((seen >= 0) & (seen <= 1)).all()
    elif name == "stacking-vertical":
        jaccard = pd.read_csv(out / "stacking-vertical-jaccard.csv")
        assert set(jaccard.columns) == {"rows", "p", "jaccard", "importance", "pairs", "seeds"}
        assert jaccard.jaccard.between(0, 1).all() and (jaccard.pairs > 0).all()
        assert set(table.rows) == {"all", "disjoint"} and set(table.defaults) == {"noisy", "dp"}
        dp_defaults = table[table.defaults == "dp"]
        assert dp_defaults.defaults_epsilon.to_numpy() == pytest.approx(1.0, abs=1e-3)
    else:
        assert table.client.str.startswith("region=").all()
        assert "HI is partitioned on `region`" in (out / "stacking-natural.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BY_NAME))
def test_two_seeds_are_aggregated_over_seeds(name: str, tmp_path: Path) -> None:
    exp = BY_NAME[name]
    exp.run(tmp_path, exp.options(smoke=True, seeds=2, folds=1, dp=False, progress=False))
    table = pd.read_csv(tmp_path / f"{name}.csv")
    check_client_table(table, seeds={0, 1}, folds={0})
    md = (tmp_path / f"{name}.md").read_text()
    assert "2 seed(s) × 1 repeat(s)" in md
    rows = summary_rows(md)
    assert {row["n"] for row in rows} == {"2"}
    # the first setting: each seed's mean gain over its clients, then mean ± SE over the seeds
    by = SUMMARY_KEYS[name]
    first = table[by].iloc[0]
    setting = table[(table[by] == first).all(axis=1)]
    seeds = setting.groupby("seed").gain.mean()
    mean, se = seeds.mean(), seeds.std(ddof=1) / np.sqrt(2)
    assert (rows[0]["public"], rows[0]["variant"]) == (first.public, first.variant)
    assert rows[0]["gain"] == f"{mean:.3f} ± {se:.3f}"


def test_jaccard_table_averages_each_seeds_pairs_then_seeds() -> None:
    rows = []
    for seed, weights in ((0, (0.1, 0.3)), (1, (0.5, 0.5))):
        for w in weights:
            rows.append({"seed": seed, "jaccard": 1 / 3, "weight": w})
    edges = pd.DataFrame(rows).assign(
        models="rf", public="rf", variant="held_out", defaults="noisy", noise=0.0, rows="all", p=0.5
    )
    left_out = edges.assign(weight=9.0)
    edges = pd.concat(
        [
            edges,
            left_out.assign(noise=2.0),
            left_out.assign(variant="pooled"),
            left_out.assign(public="dp_lr_e1"),
        ]
    )
    table = jaccard_table(edges)
    assert table.to_dict("records") == [
        {
            "rows": "all",
            "p": 0.5,
            "jaccard": 0.333,
            "importance": f"{0.35:.3f} ± {0.15:.3f}",  # seed means 0.2, 0.5
            "pairs": 4,
            "seeds": 2,
        }
    ]


def test_realized_balance_reports_the_spread_of_label_mixes_per_alpha() -> None:
    clients = pd.DataFrame(
        {
            "alpha": [0.5] * 11 + [10.0] * 2,
            "seed": [0] * 13,
            "client": [f"c{i}" for i in range(11)] + ["c0", "c1"],
            "balance": [i / 10 for i in range(11)] + [0.4, 0.6],
        }
    )
    text = realized_balance(pd.concat([clients, clients]), [0.5, 10.0, 100.0])
    assert "α = 0.5: 0.10–0.90; α = 10: 0.42–0.58." in text
    assert "α = 100" not in text
