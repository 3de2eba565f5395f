"""The main job runs end to end on a small configuration."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from pubsubml.cli import app
from pubsubml.demo import SUBSCRIBERS, DemoConfig, run_demo


def test_demo_runs_end_to_end_over_the_embedded_registry(tmp_path: Path) -> None:
    console = Console(record=True, width=160)
    config = DemoConfig(publisher_rows=300, subscriber_rows=200, epochs=2)

    scores = run_demo(workdir=tmp_path, seed=1, config=config, console=console)

    assert set(scores) == set(SUBSCRIBERS)
    for per_method in scores.values():
        assert set(per_method) == {"Own", "PubSub-ML", "PubSub-ML*"}
        assert all(0.0 <= v <= 1.0 for v in per_method.values())
    text = console.export_text()
    assert "ε PLD" in text and "contribution scores reported to the registry: 4 models" in text
    assert (tmp_path / "registry.db").exists()
    assert any((tmp_path / "store").rglob("*")), "artifacts are stored by the registry"


def test_cli_lists_the_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])

    assert result.exit_code == 0
    for command in ("demo", "registry", "site", "publish", "subscribe", "pull", "budget", "bench"):
        assert command in result.output
