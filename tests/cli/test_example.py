"""``pubsubml example-data``: the three-site example's files, written once, from a seed."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner, Result

import pubsubml.cli.example as example
import pubsubml.cli.site as site_cli
from pubsubml.data import hyperplane
from pubsubml.schema import FeatureSchema

runner = CliRunner()

CSV_FILES = {
    "hospital-a.csv": (1500, [f"x{i}" for i in range(7)] + ["y"]),
    "hospital-b.csv": (1500, [f"x{i}" for i in range(3, 10)] + ["y"]),
    "clinic-c.csv": (200, [f"x{i}" for i in range(8)] + ["y"]),
    "clinic-c-test.csv": (4000, [f"x{i}" for i in range(8)] + ["y"]),
    "clinic-c-new.csv": (20, [f"x{i}" for i in range(8)]),
}
ALL_FILES = [*CSV_FILES, "bounds.json"]
SHARED = ["x3", "x4", "x5", "x6"]  # the columns every file holds


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test root."""

    app.command("example-data")(example.example_data_command)
    app.add_typer(site_cli.schema_app, name="schema")
    return app


APP = _app()


def run(*args: str | Path) -> Result:
    return runner.invoke(APP, [str(a) for a in args])


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("example") / "new" / "folder"
    r = run("example-data", out)
    assert r.exit_code == 0, r.output
    return out


def _read(out: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_csv(out / name) for name in CSV_FILES}


def test_writes_the_six_files_with_their_columns_and_row_counts(written: Path) -> None:
    assert sorted(p.name for p in written.iterdir()) == sorted(ALL_FILES)
    for name, frame in _read(written).items():
        n_rows, columns = CSV_FILES[name]
        assert list(frame.columns) == columns, name
        assert len(frame) == n_rows, name


def test_prints_one_line_per_file_and_a_closing_line(tmp_path: Path) -> None:
    r = run("example-data", tmp_path, "--seed", "3")
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    assert len(lines) == len(ALL_FILES) + 1
    for name, (n_rows, _) in CSV_FILES.items():
        assert any(name in line and f"{n_rows:,} rows" in line for line in lines), name
    assert "bounds.json" in lines[-2] and "10" in lines[-2]
    assert "seed 3" in lines[-1]


def test_sizes_are_the_demos(written: Path) -> None:
    from pubsubml.cli.demo import DemoConfig

    config = DemoConfig()
    assert example.PUBLISHER_ROWS == config.publisher_rows
    assert example.SUBSCRIBER_ROWS == config.subscriber_rows
    assert example.TEST_ROWS == config.test_rows


def test_labels_are_integers_and_features_lie_in_the_public_bounds(written: Path) -> None:
    for name, frame in _read(written).items():
        if "y" in frame:
            assert frame["y"].dtype.kind == "i", name
            assert set(frame["y"]) <= {0, 1}, name
        features = frame.drop(columns="y", errors="ignore").to_numpy()
        assert features.dtype == np.float64
        assert ((features >= 0) & (features <= 1)).all(), name
    text = (written / "clinic-c.csv").read_text().splitlines()
    assert re.fullmatch(r"(\S+,){8}[01]", text[1])


def test_rows_are_disjoint_across_files(written: Path) -> None:
    frames = _read(written)
    keys = {name: set(map(tuple, f[SHARED].to_numpy())) for name, f in frames.items()}
    for name, frame in frames.items():
        assert len(keys[name]) == len(frame), name  # no row repeated within a file
    for a, b in itertools.combinations(keys, 2):
        assert not keys[a] & keys[b], (a, b)
    full = [f"x{i}" for i in range(8)]
    train = set(map(tuple, frames["clinic-c.csv"][full].to_numpy()))
    for held_out in ("clinic-c-test.csv", "clinic-c-new.csv"):
        assert not train & set(map(tuple, frames[held_out][full].to_numpy()))


def test_values_round_trip_to_the_generated_rows(written: Path) -> None:
    data = hyperplane(sum(n for n, _ in CSV_FILES.values()), seed=0)
    generated = data.X.assign(y=data.y)
    label_of = {tuple(r[:-1]): r[-1] for r in generated[[*SHARED, "y"]].to_numpy()}
    used: set[tuple[float, ...]] = set()
    for name, frame in _read(written).items():
        keys = list(map(tuple, frame[SHARED].to_numpy()))
        assert set(keys) <= set(label_of), name  # exact floats: nothing lost in the CSV
        if "y" in frame:
            assert [label_of[k] for k in keys] == frame["y"].tolist(), name
        used.update(keys)
    assert used == set(label_of)  # every generated row is used, once


def test_same_seed_gives_identical_bytes_and_another_seed_differs(
    written: Path, tmp_path: Path
) -> None:
    assert run("example-data", tmp_path / "same").exit_code == 0
    assert run("example-data", tmp_path / "other", "--seed", "1").exit_code == 0
    for name in ALL_FILES:
        assert (tmp_path / "same" / name).read_bytes() == (written / name).read_bytes(), name
    for name in CSV_FILES:
        assert (tmp_path / "other" / name).read_bytes() != (written / name).read_bytes(), name


@pytest.mark.parametrize("existing", ["hospital-a.csv", "clinic-c-new.csv", "bounds.json"])
def test_an_existing_file_is_refused_and_nothing_is_written(tmp_path: Path, existing: str) -> None:
    (tmp_path / existing).write_text("mine\n")
    r = run("example-data", tmp_path)
    assert r.exit_code == 1
    assert "error:" in r.stderr and existing in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == [existing]
    assert (tmp_path / existing).read_text() == "mine\n"


def test_a_file_in_place_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("")
    r = run("example-data", tmp_path / "out")
    assert r.exit_code != 0
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_bounds_are_the_public_hyperplane_schema(written: Path) -> None:
    schema = FeatureSchema.from_json((written / "bounds.json").read_text())
    assert schema.names == [f"x{i}" for i in range(10)]
    assert all(f.lower == 0.0 and f.upper == 1.0 for f in schema)


def test_schema_infer_reads_the_bounds(written: Path, tmp_path: Path) -> None:
    r = run("schema", "infer", written / "hospital-b.csv", "--public-bounds",
            written / "bounds.json", "--label", "y", "--out", tmp_path / "schema.json")  # fmt: skip
    assert r.exit_code == 0, r.output
    schema = FeatureSchema.from_json((tmp_path / "schema.json").read_text())
    assert schema.names == [f"x{i}" for i in range(3, 10)]


def test_help_says_the_data_are_generated() -> None:
    r = run("example-data", "--help")
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "generated" in text and "nothing is downloaded" in text
    assert "hospital-a.csv" in text and "bounds.json" in text
