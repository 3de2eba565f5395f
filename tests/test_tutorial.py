"""``docs/tutorial.md`` runs as written: every ``bash`` block, in order, in an empty folder.

Part 1 takes two publishers and a subscriber from CSV files to a customized model in at most
twelve commands; Part 2 sends the same models through a registry on 127.0.0.1 (on a free port
instead of the documented 8000).  The outputs the tutorial quotes are checked against the run.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of ``language`` in ``text``, in order."""
    return [body for lang, body in FENCE.findall(text) if lang == language]


def commands(script: str) -> list[str]:
    """The ``pubsubml`` invocations of a script (continuation lines joined)."""
    joined = script.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if "pubsubml " in line]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_blocks_are_found_and_part_one_takes_at_most_twelve_commands() -> None:
    text = TUTORIAL.read_text()
    part1, part2 = text.split("## Part 2", 1)
    first = [c for b in blocks(part1, "bash") for c in commands(b)]
    assert len(first) == 12  # as the tutorial says
    assert any(c.startswith("pubsubml customize") for c in first)
    assert any(c.startswith("pubsubml publish") for b in blocks(part2, "bash") for c in commands(b))


@pytest.mark.slow
def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    text = TUTORIAL.read_text()
    port = free_port()
    script = "\n".join(blocks(text, "bash"))
    script = script.replace("127.0.0.1:8000", f"127.0.0.1:{port}").replace(
        "--port 8000", f"--port {port}"
    )
    prologue = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PUBSUBML_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "120"
    done = subprocess.run(
        ["bash", "-c", prologue + script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout

    # Part 1: what follows from public inputs is quoted exactly; the rest moves with the noise.
    err = " ".join(done.stderr.split())
    assert "the data lacks schema feature(s) x7, x8, x9" in err
    assert "schema of 7 feature(s) written to hospital-a.schema.json" in out
    quoted = re.search(r"```text\n(model \S+ by hospital-a.*?)```", text, re.DOTALL)
    assert quoted is not None
    for line in quoted.group(1).splitlines()[1:]:  # all but the model id
        assert line in out, line
    refusal = re.search(r"^(error: training would bring site .*)$", text, re.MULTILINE)
    assert refusal is not None and refusal.group(1) in err
    assert not (tmp_path / "inbox/too-much").exists()
    ledger = json.loads((tmp_path / "hospital-a-ledger.json").read_text())
    assert len(ledger["releases"]) == 1
    cards = {
        name: json.loads((tmp_path / f"inbox/{name}/card.json").read_text())
        for name in ("hospital-a", "hospital-b")
    }
    assert [f["name"] for f in cards["hospital-a"]["input_schema"]["features"]] == [
        f"x{i}" for i in range(7)
    ]
    assert all(c["privacy"]["noise"] == "secure" for c in cards.values())
    assert [r["release_id"] for r in ledger["releases"]] == [cards["hospital-a"]["model_id"]]
    # Every model of the customization shows a weight; the scores are a table of four rows.
    assert re.search(r"^  own: own model, weight [0-9.]+$", out, re.MULTILINE)
    assert (
        len(re.findall(r"^│ (customized|own model alone|hospital-[ab] )", out, re.MULTILINE)) == 4
    )
    predictions = pd.read_csv(tmp_path / "predictions.csv")
    assert len(predictions) == 20
    assert list(predictions.columns) == ["prediction", "proba[0]", "proba[1]"]

    # Part 2: pulled through the registry, verified, customized to the same model.
    received = tmp_path / "received"
    assert (received / "trusted_keys.json").is_file()
    assert len([p for p in received.iterdir() if (p / "card.json").is_file()]) == 2
    first = json.loads((tmp_path / "customized/customized.json").read_text())
    second = json.loads((tmp_path / "customized-from-registry/customized.json").read_text())
    assert first["selected_ids"] == second["selected_ids"]
    assert first["fusion_weights"] == second["fusion_weights"]
