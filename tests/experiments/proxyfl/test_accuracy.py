"""``proxyfl-accuracy``: every method's accuracy per round and each client's ε (Fig. 3, §3.3)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pubsubml.experiments.proxyfl.accuracy import (
    ACCURACY,
    ACCURACY_COLUMNS,
    EPSILON_COLUMNS,
    accuracy_grid,
    epsilon_rows,
    final_accuracy_table,
    records_of_kind,
    run_accuracy_fold,
)
from pubsubml.experiments.proxyfl.experiments import MethodRun, make_federated, run_method
from pubsubml.experiments.proxyfl.setups import METHODS, setup_for

N_CLIENTS = 4  # of the smoke setup


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    out = tmp_path_factory.mktemp("accuracy")
    return out, ACCURACY.run(out, ACCURACY.options(smoke=True, progress=False))


def test_grid_runs_every_method_then_the_budget_run_on_each_data_set() -> None:
    full = accuracy_grid(ACCURACY.options())
    assert [(s["dataset"], s["method"]) for s in full[:8]] == [
        *(("mnist1d", m) for m in METHODS),
        ("mnist1d", "ProxyFL"),
    ]
    assert [s["per_client_budgets"] for s in full] == ([False] * 7 + [True]) * 2
    assert {s["dataset"] for s in accuracy_grid(ACCURACY.options(smoke=True))} == {"digits"}


def test_epsilon_rows_say_what_epsilon_covers() -> None:
    setup = setup_for("digits", smoke=True)
    split = make_federated(setup.dataset, **setup.split_kw)  # type: ignore[arg-type]
    k = len(split.clients)
    for guarantee in ("dp", "paper accounting"):
        run = MethodRun(rows=[], epsilons=[1.0] * k, seconds=0.0, guarantee=guarantee)
        rows = epsilon_rows("ProxyFL", split, setup, run)
        assert [r["guarantee"] for r in rows] == [guarantee] * k
    joint = epsilon_rows("Joint", split, setup, MethodRun([], [2.0], 0.0))
    assert [r["n_records"] for r in joint] == [sum(len(X) for X, _ in split.clients)]


def test_seeds_change_the_split_and_seed_0_is_the_default_run() -> None:
    setup = setup_for("digits", smoke=True)
    split = make_federated("digits", **setup.split_kw)  # type: ignore[arg-type]
    default = run_method("Regular", split, rounds=setup.rounds, config=setup.config).rows
    kw = {"dataset": "digits", "method": "Regular", "per_client_budgets": False, "smoke": True}
    seed0, seed1 = (run_accuracy_fold(s, 0, **kw) for s in (0, 1))  # type: ignore[arg-type]
    scores = [[r["accuracy"] for r in rows if r["kind"] == "accuracy"] for rows in (seed0, seed1)]
    assert scores[0] == [r["accuracy"] for r in default]
    assert scores[0] != scores[1]
    assert not {"dataset", "method"} & {k for r in seed0 for k in r}  # setting keys come back
    assert {r["kind"] for r in seed0} == {"accuracy", "epsilon"}


def test_final_table_gives_mean_and_std_over_clients_per_test_set() -> None:
    rows = [
        {"seed": 0, "method": "FedAvg", "dataset": "d", "round": r, "model": "proxy", "arch": "mlp",
         "client": c, "test": t, "accuracy": acc, "macro_accuracy": acc / 2}
        for r, acc0 in ((1, 0.0), (2, 0.5))
        for c, acc in ((0, acc0), (1, acc0 + 0.1))
        for t in ("global", "local")
    ]  # fmt: skip
    table = final_accuracy_table(pd.DataFrame(rows), seeds=1)
    assert list(table.columns) == [
        "dataset", "label", "acc (global)", "acc (local)", "macro (global)", "macro (local)"
    ]  # fmt: skip
    assert table.loc[0, "acc (global)"] == "0.550 ± 0.071"  # round 2 only; std of 0.5, 0.6
    assert table.loc[0, "macro (local)"] == "0.275 ± 0.035"


def test_records_of_kind_restores_integer_columns() -> None:
    table = pd.DataFrame([{"kind": "a", "x": 1, "y": None}, {"kind": "b", "x": None, "y": 2.5}])
    assert records_of_kind(table, "a", ["x"], ["x"])["x"].tolist() == [1]
    assert str(records_of_kind(table, "a", ["x"], ["x"])["x"].dtype) == "int64"


def test_options_that_do_not_apply_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    for bad in ({"folds": 2}, {"seeds": 0}, {"rounds": 5}):
        with pytest.raises(ValueError):
            ACCURACY.run(tmp_path, ACCURACY.options(smoke=True, **bad))
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    with pytest.raises(ValueError, match="not a folder"):
        ACCURACY.run(not_a_folder / "out", ACCURACY.options(smoke=True, progress=False))
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]
    assert not_a_folder.read_text() == ""


@pytest.mark.slow
def test_smoke_run_writes_accuracy_and_epsilon_files(smoke_run: tuple[Path, list[Path]]) -> None:
    out, written = smoke_run
    assert sorted(p.name for p in written) == sorted(
        f"proxyfl-{stem}" for stem in
        ("accuracy.csv", "accuracy.md", "accuracy.png", "epsilon.csv", "epsilon.md")
    )  # fmt: skip
    assert all(p.parent == out and p.stat().st_size > 0 for p in written)
    metrics = pd.read_csv(out / "proxyfl-accuracy.csv")
    assert list(metrics.columns) == ACCURACY_COLUMNS
    # 2 rounds × 4 clients × 2 test sets; FML and ProxyFL score private and proxy models
    assert len(metrics) == 2 * N_CLIENTS * 2 * (5 + 2 * 2)
    assert metrics[["accuracy", "macro_accuracy"]].stack().between(0, 1).all()
    assert set(metrics["round"]) == {1, 2} and set(metrics["seed"]) == {0}


@pytest.mark.slow
def test_smoke_epsilon_table_respects_the_budgets(smoke_run: tuple[Path, list[Path]]) -> None:
    out, _ = smoke_run
    eps = pd.read_csv(out / "proxyfl-epsilon.csv")
    assert list(eps.columns) == EPSILON_COLUMNS
    assert len(eps) == 6 * N_CLIENTS + 1 + N_CLIENTS  # Joint accounts its pooled data once
    unlimited = eps[eps["budget"] == "none"]
    assert (unlimited["epsilon"] > 0).all() and (unlimited["run_seconds"] > 0).all()
    budgeted = eps[eps["budget"] != "none"]
    assert (budgeted["epsilon"] <= budgeted["budget"].astype(float)).all()
    assert budgeted["dp_steps"].min() < unlimited["dp_steps"].max()  # a client dropped out
    guarantees = eps.groupby("method")["guarantee"].first()
    assert guarantees["ProxyFL"] == "paper accounting" and guarantees["FedAvg"] == "dp"


@pytest.mark.slow
def test_smoke_markdown_has_one_row_per_model(smoke_run: tuple[Path, list[Path]]) -> None:
    out, _ = smoke_run
    text = (out / "proxyfl-accuracy.md").read_text()
    assert (
        "(mean ± std over clients)" in text and "`pubsubml bench proxyfl-accuracy --smoke`" in text
    )
    assert (
        "| dataset | label | acc (global) | acc (local) | macro (global) | macro (local) |" in text
    )
    labels = [line.split(" | ")[1] for line in text.splitlines() if line.startswith("| digits |")]
    assert sorted(labels) == sorted(
        ["Regular", "Joint", "FedAvg", "AvgPush", "CWT", "FML-private", "FML-proxy",
         "ProxyFL-private", "ProxyFL-proxy"]
    )  # fmt: skip


@pytest.mark.slow
def test_two_seeds_aggregate_over_seeds(tmp_path: Path) -> None:
    ACCURACY.run(tmp_path, ACCURACY.options(seeds=2, smoke=True, progress=False))
    metrics = pd.read_csv(tmp_path / "proxyfl-accuracy.csv")
    assert metrics.groupby("seed").size().to_dict() == {0: 144, 1: 144}
    last = metrics[(metrics["round"] == 2) & (metrics["test"] == "global")]
    fedavg = last[last["method"] == "FedAvg"].groupby("seed")["accuracy"].mean()
    text = (tmp_path / "proxyfl-accuracy.md").read_text()
    assert "mean ± SE over 2 seeds of the mean over clients" in text
    row = next(line for line in text.splitlines() if line.startswith("| digits | FedAvg |"))
    assert row.split(" | ")[2] == f"{fedavg.mean():.3f} ± {fedavg.sem():.3f}"
    eps = pd.read_csv(tmp_path / "proxyfl-epsilon.csv")
    assert eps.groupby("seed").size().to_dict() == {0: 29, 1: 29}
    assert "| seed | dataset |" in (tmp_path / "proxyfl-epsilon.md").read_text()
