"""The experiment contract: options with defaults and checks, the run, and what reaches report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pubsubml.experiments.base import Experiment, Param, RunOptions
from pubsubml.experiments.runner import Record


def measure(seed: int, fold: int, *, shift: float, smoke: bool) -> list[Record]:
    """A fold whose score is known: seed + fold / 10 + shift (+ 100 in smoke runs)."""
    return [{"method": "m", "score": seed + fold / 10 + shift + (100 if smoke else 0)}]


def _report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
    path = out_dir / "toy.csv"
    table.assign(label=opts.params["label"]).to_csv(path, index=False)
    return [path]


def _no_big_shift_in_smoke(opts: RunOptions) -> None:
    if opts.smoke and opts.params["shift"] > 1:
        raise ValueError("--shift must be <= 1 with --smoke")


TOY = Experiment(
    "toy",
    "A toy.",
    grid=lambda o: [{"shift": o.params["shift"], "smoke": o.smoke}],
    run_fold=measure,
    report=_report,
    seeds=2,
    folds=3,
    smoke_folds=2,
    params=(
        Param("shift", 0.0, "Added to every score.", minimum=0),
        Param("label", "x", "A label.", choices=("x", "y")),
        Param("limit", None, "An optional count.", kind=int),
        Param("dry", False, "A switch."),
    ),
    check=_no_big_shift_in_smoke,
)


def test_defaults_come_from_the_experiment_and_smoke_has_its_own_folds() -> None:
    opts = TOY.options()
    assert (opts.seeds, opts.folds, opts.jobs, opts.smoke) == (2, 3, 1, False)
    assert opts.params == {"shift": 0.0, "label": "x", "limit": None, "dry": False}
    assert TOY.options(smoke=True).folds == 2
    assert TOY.options(smoke=True, folds=4).folds == 4


def test_params_are_converted_and_checked() -> None:
    assert TOY.options(shift="0.5", limit="7").params["shift"] == 0.5
    assert TOY.options(limit="7").params["limit"] == 7
    for kwargs, message in (
        ({"shift": -1}, "--shift must be >= 0"),
        ({"shift": "big"}, "--shift must be a float"),
        ({"label": "z"}, "--label must be one of"),
        ({"colour": 1}, "takes no option"),
        ({"dry": "false"}, "--dry must be True or False"),
        ({"seeds": 0}, "--seeds >= 1"),
        ({"jobs": 0}, "--jobs >= 1"),
        ({"folds": 1}, "--folds >= 2"),
        ({"smoke": True, "shift": 2}, "with --smoke"),
    ):
        with pytest.raises(ValueError, match=message):
            TOY.options(**kwargs)


def test_an_experiment_without_folds_refuses_them_and_aliases_are_named() -> None:
    single = Experiment(
        "one", "One run.", grid=lambda o: [{}], run_fold=measure, report=_report, folds=1,
        min_folds=1, max_folds=1, folds_help="one simulation per seed",
    )  # fmt: skip
    assert single.options().folds == 1
    with pytest.raises(ValueError, match="one has no folds"):
        single.options(folds=2)
    repeats = Experiment(
        "rep", "Repeats.", grid=lambda o: [{}], run_fold=measure, report=_report, folds=1,
        min_folds=1, fold_aliases=("repeats",),
    )  # fmt: skip
    with pytest.raises(ValueError, match="--folds/--repeats >= 1"):
        repeats.options(folds=0)


def test_run_passes_every_seed_fold_and_setting_to_the_report(tmp_path: Path) -> None:
    paths = TOY.run(tmp_path, TOY.options(shift=0.5, label="y", progress=False))
    table = pd.read_csv(paths[0])
    assert table[["seed", "fold"]].values.tolist() == [[s, f] for s in (0, 1) for f in (0, 1, 2)]
    assert table["score"].tolist() == pytest.approx(
        [s + f / 10 + 0.5 for s in (0, 1) for f in (0, 1, 2)]
    )
    assert set(table["shift"]) == {0.5} and set(table["label"]) == {"y"}
    smoke = pd.read_csv(TOY.run(tmp_path, TOY.options(smoke=True, progress=False))[0])
    assert len(smoke) == 4 and (smoke["score"] >= 100).all()


def test_parallel_run_gives_the_same_table() -> None:
    serial = TOY.table(TOY.options(progress=False))
    parallel = TOY.table(TOY.options(jobs=2, progress=False))
    pd.testing.assert_frame_equal(serial, parallel)


def test_a_bad_output_folder_fails_before_anything_runs(tmp_path: Path) -> None:
    ran: list[int] = []

    def report(table: pd.DataFrame, out_dir: Path, opts: RunOptions) -> list[Path]:
        ran.append(1)
        return []

    blocker = tmp_path / "file"
    blocker.write_text("x")
    exp = Experiment("t", "T.", grid=lambda o: [{}], run_fold=measure, report=report)
    with pytest.raises(ValueError, match="is not a folder"):
        exp.run(blocker / "sub", exp.options())
    assert ran == [] and sorted(p.name for p in tmp_path.iterdir()) == ["file"]
