"""A site's commands end to end on temporary files: keygen and schema infer|check."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from click.testing import Result
from typer.testing import CliRunner

from pubsubml.artifacts.signing import load_private_key, public_key_from_base64
from pubsubml.cli.commands import app
from pubsubml.schema import FeatureSchema

runner = CliRunner()


def run(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


def _setup(d: Path) -> None:
    assert run("keygen", "--out", d / "a.key").exit_code == 0
    r = run("schema", "infer", d / "a.csv", "--public-bounds", d / "bounds.json", "--label", "y",
            "--out", d / "schema.json")  # fmt: skip
    assert r.exit_code == 0, r.output


def test_keygen_writes_a_private_key_and_its_public_half_once(tmp_path: Path) -> None:
    r = run("keygen", "--out", tmp_path / "k.key")
    assert r.exit_code == 0, r.output
    key = load_private_key(tmp_path / "k.key")
    public = public_key_from_base64((tmp_path / "k.key.pub").read_text().strip())
    assert public.public_bytes_raw() == key.public_key().public_bytes_raw()
    assert (tmp_path / "k.key").stat().st_mode & 0o077 == 0
    again = run("keygen", "--out", tmp_path / "k.key")
    assert again.exit_code == 1 and "not overwritten" in again.output


def test_schema_infer_takes_bounds_from_the_public_definitions_only(site: Path) -> None:
    _setup(site)
    schema = FeatureSchema.from_json((site / "schema.json").read_text())
    assert schema.names == ["x0", "x1", "x2"]
    assert [(f.lower, f.upper, f.default) for f in schema.features] == [(0, 1, 0.5)] * 3
    (site / "few.json").write_text(json.dumps({"x0": {"lower": 0, "upper": 1, "default": 0}}))
    r = run("schema", "infer", site / "a.csv", "--public-bounds", site / "few.json", "--label", "y")
    assert r.exit_code == 1 and "no public definition" in r.output
    r = run("schema", "infer", site / "a.csv", "--public-bounds", site / "a.csv")
    assert r.exit_code == 2


def test_schema_check_reports_extra_columns_missing_features_and_clipping(site: Path) -> None:
    _setup(site)
    r = run("schema", "check", site / "a.csv", site / "schema.json", "--label", "y")
    assert r.exit_code == 0 and "train accepts this data" in r.output
    frame = pd.read_csv(site / "a.csv").drop(columns=["x2"])
    frame["zz"] = 1
    frame.loc[0, "x0"] = 3.0
    frame.to_csv(site / "b.csv", index=False)
    r = run("schema", "check", site / "b.csv", site / "schema.json", "--label", "y")
    out = " ".join(r.output.split())
    assert r.exit_code == 1
    assert "the data lacks schema feature(s) x2" in out and "--extend-schema" in out
    assert "extra columns (not in the schema): zz" in out
    assert "x0: 1 row(s) outside [0, 1]: clipped to the public bounds" in out
