"""The main job runs end to end on a small configuration."""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from pubsubml.cli import app
from pubsubml.cli.demo import DemoConfig, run_demo
from pubsubml.cli.demo_consortium import PUBLISHERS, SUBSCRIBERS
from pubsubml.errors import SeededNoiseWarning

SMALL = DemoConfig(publisher_rows=300, subscriber_rows=200, test_rows=500)


def _noise_on_cards(workdir: Path) -> dict[str, str | None]:
    """Each stored card's publisher and ``privacy.noise``, read from the registry's database."""
    with sqlite3.connect(workdir / "registry.db") as db:
        cards = [json.loads(row[0]) for row in db.execute("SELECT card_json FROM models")]
    return {card["publisher"]: card["privacy"].get("noise") for card in cards}


@pytest.mark.slow
def test_demo_runs_end_to_end_over_the_embedded_registry(tmp_path: Path) -> None:
    console = Console(record=True, width=160)

    scores = run_demo(workdir=tmp_path, seed=1, config=SMALL, console=console, summary_seeds=())

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
    # As deployed: secure noise, recorded on every card the (default) registry accepted.
    assert _noise_on_cards(tmp_path) == dict.fromkeys(PUBLISHERS, "secure")
    assert "the scores' last digits change from run to run" in text


@pytest.mark.slow
def test_seeded_demo_is_a_reproducible_simulation(tmp_path: Path) -> None:
    consoles = [Console(record=True, width=160) for _ in range(2)]

    with warnings.catch_warnings():
        warnings.simplefilter("error", SeededNoiseWarning)  # expected there, so silenced
        runs = [
            run_demo(
                workdir=tmp_path / str(i),
                seed=2,
                config=SMALL,
                console=console,
                seeded_noise=True,
                summary_seeds=(),
            )
            for i, console in enumerate(consoles)
        ]

    assert runs[0] == runs[1]
    for i, console in enumerate(consoles):
        assert _noise_on_cards(tmp_path / str(i)) == dict.fromkeys(PUBLISHERS, "seeded")
        assert "Simulation" in console.export_text()


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


def _fake_simulation(seed: int, config: DemoConfig | None) -> dict[str, Any]:
    # Each seed's run is the seeded end-to-end demo tested above; here its scores are fixed so
    # the summary's arithmetic can be checked.
    return {
        sub: {"Own": 0.8 + 0.01 * seed, "PubSub-ML": 0.81 + 0.03 * seed, "PubSub-ML*": 0.9}
        for sub in SUBSCRIBERS
    }


def test_demo_over_seeds_prints_mean_and_se(monkeypatch: pytest.MonkeyPatch) -> None:
    import pubsubml.cli.demo as demo

    monkeypatch.setattr(demo, "_simulate", _fake_simulation)
    console = Console(record=True, width=200)

    table = demo.run_demo_seeds([0, 1, 2], console=console)

    assert len(table) == 3 * len(SUBSCRIBERS) and set(table["seed"]) == {0, 1, 2}
    text = console.export_text()
    assert "Simulation over seeds 0–2 (DP noise seeded by each seed" in text
    assert text.count("mean ± SE") == len(SUBSCRIBERS)
    # Own 0.80, 0.81, 0.82: mean 0.81, SE 0.01/√3 · √3 = 0.0058; gain 0.01, 0.03, 0.05.
    assert text.count("0.8100 ± 0.0058") == len(SUBSCRIBERS)
    assert text.count("+0.0300 ± 0.0115") == len(SUBSCRIBERS)


def test_the_summary_over_one_seed_prints_its_se_as_nan(monkeypatch: pytest.MonkeyPatch) -> None:
    import pubsubml.cli.demo as demo

    monkeypatch.setattr(demo, "_simulate", _fake_simulation)
    console = Console(record=True, width=200)

    demo.run_demo_seeds([1], console=console, per_seed=False)

    text = console.export_text()  # one seed: no spread to estimate, the SE is not a number
    assert text.count("0.8100 ± nan") == len(SUBSCRIBERS)
    assert text.count("+0.0300 ± nan") == len(SUBSCRIBERS)


def test_the_summary_alone_prints_one_mean_row_per_subscriber(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pubsubml.cli.demo as demo

    monkeypatch.setattr(demo, "_simulate", _fake_simulation)
    console = Console(record=True, width=200)

    demo.run_demo_seeds(range(3), console=console, per_seed=False)

    text = console.export_text()
    assert text.count("mean ± SE") == 1  # the title's: no per-seed rows to set the mean apart
    assert text.count("0.8100 ± 0.0058") == len(SUBSCRIBERS)
    assert "0.8200" not in text, "no per-seed rows"


def test_the_demo_prints_the_simulation_over_ten_seeds_after_its_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pubsubml.cli.demo as demo

    verbose: list[dict[str, Any]] = []
    simulated: list[int] = []

    def fake_run(url: str, admin_token: str, seed: int, *args: Any) -> dict[str, Any]:
        verbose.append({"seed": seed, "seeded_noise": args[-1]})
        return _fake_simulation(seed, None)

    def fake_simulation(seed: int, config: DemoConfig | None) -> dict[str, Any]:
        simulated.append(seed)
        return _fake_simulation(seed, config)

    monkeypatch.setattr(demo, "_run", fake_run)
    monkeypatch.setattr(demo, "_simulate", fake_simulation)
    console = Console(record=True, width=200)

    scores = demo.run_demo(console=console)

    assert verbose == [{"seed": 0, "seeded_noise": False}]
    assert scores == _fake_simulation(0, None)
    assert simulated == list(range(10))
    text = console.export_text()
    assert "last digits change from run to run" in text
    assert "Simulation over seeds 0–9" in text
