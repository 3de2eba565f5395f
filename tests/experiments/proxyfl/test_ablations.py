"""``proxyfl-ablations``: non-IID skew, heterogeneous private models, DP vs non-DP (Fig. 5)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pubsubml.experiments.proxyfl.ablations import (
    ABLATIONS,
    COLUMNS,
    ablation_grid,
    ablation_tables,
    mixed_architectures,
    run_ablation_fold,
)
from pubsubml.experiments.proxyfl.setups import METHODS


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    out = tmp_path_factory.mktemp("ablations")
    return out, ABLATIONS.run(out, ABLATIONS.options(smoke=True, progress=False))


def test_grid_covers_the_three_ablations_of_fig_5() -> None:
    full = ablation_grid(ABLATIONS.options())
    skews = {s["setting"] for s in full if s["ablation"] == "p_major"}
    assert skews == {0.1, 0.5, 0.8}
    assert [s["method"] for s in full if s["ablation"] == "dp"] == list(METHODS)
    assert [s["method"] for s in full if s["ablation"] == "architectures"] == ["ProxyFL", "Regular"]
    assert len(full) == 3 * 7 + 7 + 2
    assert len(ablation_grid(ABLATIONS.options(smoke=True))) == 3 + 3 + 2


def test_mixed_architectures_give_one_per_quarter_of_the_clients() -> None:
    assert mixed_architectures(4) == ["mlp", "lenet", "cnn1", "cnn2"]
    assert mixed_architectures(8).count("cnn2") == 2


def test_architecture_fold_trains_each_clients_own_model() -> None:
    rows = run_ablation_fold(
        0, 0, ablation="architectures", setting="mixed", method="ProxyFL", smoke=True
    )
    private = {(r["client"], r["arch"]) for r in rows if r["model"] == "private"}
    assert private == set(enumerate(mixed_architectures(4)))
    assert {r["arch"] for r in rows if r["model"] == "proxy"} == {"mlp"}
    assert "method" not in rows[0]
    with pytest.raises(ValueError, match="unknown ablation"):
        run_ablation_fold(0, 0, ablation="lr", setting=1.0, method="ProxyFL", smoke=True)


def test_tables_compare_dp_at_the_largest_skew_with_non_dp() -> None:
    def rows(ablation: str, setting: object, accs: list[float]) -> list[dict[str, object]]:
        return [
            {"seed": 0, "method": "Regular", "ablation": ablation, "setting": setting, "round": 1,
             "model": "proxy", "arch": "mlp", "client": c, "test": "global", "accuracy": a}
            for c, a in enumerate(accs)
        ]  # fmt: skip

    table = pd.DataFrame(
        rows("p_major", 0.1, [0.8, 0.6]) + rows("p_major", 0.8, [0.2, 0.4])
        + rows("dp", "non-DP", [0.5, 0.7]) + rows("architectures", "mixed", [0.1, 0.3])
    )  # fmt: skip
    tables = ablation_tables(table, seeds=1)
    assert tables.skew.loc["Regular"].tolist() == pytest.approx([0.7, 0.3])
    assert tables.dp.loc["Regular"].tolist() == pytest.approx([0.3, 0.6])
    assert tables.architectures["mean"].tolist() == pytest.approx([0.2])


def test_folds_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no folds"):
        ABLATIONS.run(tmp_path, ABLATIONS.options(folds=5))
    with pytest.raises(ValueError, match="takes no option"):
        ABLATIONS.options(p_major=0.3)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_smoke_run_writes_the_three_ablations(smoke_run: tuple[Path, list[Path]]) -> None:
    out, written = smoke_run
    assert sorted(p.name for p in written) == [
        f"proxyfl-ablations.{ext}" for ext in ("csv", "md", "png")
    ]
    raw = pd.read_csv(out / "proxyfl-ablations.csv")
    assert list(raw.columns) == COLUMNS
    assert raw.groupby("ablation")["method"].nunique().to_dict() == {
        "architectures": 2, "dp": 3, "p_major": 3
    }  # fmt: skip
    assert raw[["accuracy", "macro_accuracy"]].stack().between(0, 1).all()
    text = (out / "proxyfl-ablations.md").read_text()
    for heading in ("## (a) non-IID skew", "## (b) heterogeneous", "## (c) with and without"):
        assert heading in text
    assert "| model | p_major = 0.5 |" in text and "| model | DP | non-DP |" in text
    assert "Private architectures by client: mlp, lenet, cnn1, cnn2" in text


@pytest.mark.slow
def test_two_seeds_aggregate_over_seeds(tmp_path: Path) -> None:
    ABLATIONS.run(tmp_path, ABLATIONS.options(seeds=2, smoke=True, progress=False))
    raw = pd.read_csv(tmp_path / "proxyfl-ablations.csv")
    assert sorted(raw["seed"].unique()) == [0, 1]
    last = raw[(raw["round"] == 2) & (raw["test"] == "global") & (raw["ablation"] == "dp")]
    regular = last[last["method"] == "Regular"].groupby("seed")["accuracy"].mean()
    text = (tmp_path / "proxyfl-ablations.md").read_text()
    assert "mean ± SE over 2 seeds of the mean over clients" in text
    row = next(line for line in text.splitlines() if line.startswith("| Regular |") and
               line.count("|") == 4)  # fmt: skip
    assert row.split(" | ")[2].rstrip(" |") == f"{regular.mean():.3f}"
