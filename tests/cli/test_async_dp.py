"""``pubsubml forecast``: the verdict, and a clear error on a bad model file."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from pubsubml.cli import app

runner = CliRunner()


def test_forecast_prints_a_verdict() -> None:
    result = runner.invoke(
        app, ["forecast", "--owners", "10", "--records", "10000", "--epsilon", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "predicted ψ, private collaboration" in result.output
    assert "predicted ψ, one owner alone" in result.output
    assert "Verdict: collaborating is" in result.output


def test_forecast_rejects_bad_model(tmp_path: Path) -> None:
    bad = tmp_path / "model.json"
    bad.write_text("{}")
    result = runner.invoke(
        app, ["forecast", "--owners", "2", "--records", "10", "--epsilon", "1", "--model", str(bad)]
    )
    assert result.exit_code == 2 and "error" in result.output
