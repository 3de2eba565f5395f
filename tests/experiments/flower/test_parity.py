"""flower-parity: the federations, the table and the report (Flower's path runs in the bench and
in tests/methods/flower/test_simulation.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pubsubml.data.heart_disease import flamby_split, read_hospital
from pubsubml.experiments.flower.parity import EXPERIMENTS, federation
from pubsubml.experiments.heart_disease.splits import flamby_frame as heart_frames


def test_heart_frames_undo_flambys_one_hot_columns() -> None:
    split = flamby_split()["cleveland"]
    frame = heart_frames(split.X_train, split.columns)
    raw = read_hospital("cleveland")
    assert set(frame["cp"]) <= {1, 2, 3, 4} and set(frame["restecg"]) <= {0, 1, 2}
    # FLamby keeps every Cleveland row: the multiset of (age, cp, restecg) rows must be the file's
    train_and_test = np.vstack(
        [heart_frames(X, split.columns)[["age", "cp", "restecg"]].to_numpy()
         for X in (split.X_train, split.X_test)]
    )  # fmt: skip
    expected = raw[["age", "cp", "restecg"]].to_numpy(dtype=float)
    assert sorted(map(tuple, train_and_test)) == sorted(map(tuple, expected))


def test_the_federations_are_fixed_and_encode_by_the_public_schema() -> None:
    heart = federation("heart")
    assert [len(X) for X, _ in heart.sites] == [199, 172, 30, 85] and len(heart.test[0]) == 254
    heart.schema.encode(heart.test[0])  # every row fits the public schema
    plane = federation("hyperplane")
    assert len(plane.sites) == 10 and {len(X) for X, _ in plane.sites} == {200}


def test_an_unknown_federation_is_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="--federations takes"):
        EXPERIMENTS[0].options(federations="hyperplane,mnist")


def test_the_smoke_run_writes_the_table_and_report(tmp_path: Path) -> None:
    exp = EXPERIMENTS[0]
    options = exp.options(smoke=True, progress=False, flower=False)
    table = exp.table(options)
    assert set(table["path"]) == {"ours"} and len(table) == 1
    assert table["epsilon_max"].iloc[0] == pytest.approx(1.0, rel=1e-3)
    paths = exp.report(table, tmp_path, options)
    text = (tmp_path / "flower-parity.md").read_text()
    assert {p.name for p in paths} >= {"flower-parity.md", "flower-parity.csv"}
    assert "accuracy (ours)" in text


def test_the_package_and_its_commands_import_without_flower() -> None:
    """``pubsubml[flower]`` is optional: with flwr unimportable, the package, the catalog (this
    bench included) and the command line still load."""
    import subprocess
    import sys

    code = """
import sys
class NoFlower:
    def find_spec(self, name, path=None, target=None):
        if name == "flwr" or name.startswith("flwr."):
            raise ImportError("flwr is not installed")
sys.meta_path.insert(0, NoFlower())
import pubsubml, pubsubml.methods, pubsubml.experiments.catalog
from pubsubml.cli import app
print(sorted(m for m in sys.modules if m.startswith("flwr")))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
