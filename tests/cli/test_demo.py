"""The main job runs end to end on a small configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from pubsubml.cli import app
from pubsubml.cli.demo import SUBSCRIBERS, DemoConfig, run_demo


@pytest.mark.slow
def test_demo_runs_end_to_end_over_the_embedded_registry(tmp_path: Path) -> None:
    console = Console(record=True, width=160)
    config = DemoConfig(publisher_rows=300, subscriber_rows=200, test_rows=500)

    scores = run_demo(workdir=tmp_path, seed=1, config=config, console=console)

    assert set(scores) == set(SUBSCRIBERS)
    for per_method in scores.values():
        assert set(per_method) == {"Own", "PubSub-ML", "PubSub-ML*"}
        assert all(0.0 <= v <= 1.0 for v in per_method.values())
    text = console.export_text()
    assert (
        "ε PLD" in text
        and "contribution scores reported to the registry (opt-in, not DP): 4 models" in text
    )
    assert text.count("accuracy on 500 fresh rows") == len(SUBSCRIBERS)
    assert "chosen by 5-fold CV) on 200 rows" in text
    assert "fell back to Own" in text or "weights: own" in text
    assert (tmp_path / "registry.db").exists()
    assert any((tmp_path / "store").rglob("*")), "artifacts are stored by the registry"


@pytest.mark.parametrize(
    "command",
    [
        "demo",
        "registry",
        "site",
        "features",
        "models",
        "publish",
        "subscribe",
        "pull",
        "budget",
        "bench",
        "proxyfl",
        "forecast",
    ],
)
def test_every_command_is_registered_and_answers_help(command: str) -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]

    result = CliRunner().invoke(app, [command, "--help"])

    assert command in commands
    assert result.exit_code == 0, result.output
    assert f"pubsubml {command}" in result.output.replace("\n", " ")  # its own usage line


def test_demo_over_seeds_prints_mean_and_se(monkeypatch: pytest.MonkeyPatch) -> None:
    import pubsubml.cli.demo as demo

    # Each seed's run is the end-to-end demo tested above; here its scores are fixed so the
    # summary's arithmetic can be checked.
    def fake_run(*, seed: int, config: DemoConfig | None, console: Console) -> dict[str, Any]:
        return {
            sub: {"Own": 0.8 + 0.01 * seed, "PubSub-ML": 0.81 + 0.03 * seed, "PubSub-ML*": 0.9}
            for sub in SUBSCRIBERS
        }

    monkeypatch.setattr(demo, "run_demo", fake_run)
    console = Console(record=True, width=200)

    table = demo.run_demo_seeds([0, 1, 2], console=console)

    assert len(table) == 3 * len(SUBSCRIBERS) and set(table["seed"]) == {0, 1, 2}
    text = console.export_text()
    assert text.count("mean ± SE") == len(SUBSCRIBERS)
    # Own 0.80, 0.81, 0.82: mean 0.81, SE 0.01/√3 · √3 = 0.0058; gain 0.01, 0.03, 0.05.
    assert text.count("0.8100 ± 0.0058") == len(SUBSCRIBERS)
    assert text.count("+0.0300 ± 0.0115") == len(SUBSCRIBERS)
