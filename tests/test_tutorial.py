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
    assert len(first) == 10  # as the tutorial says; at most twelve
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

    # Part 1: the quoted outputs are this run's.
    assert "missing (the public default will be used): x7, x8, x9" in out
    assert "ok: 7 column(s) fit the schema (1500 rows)" in out
    for line in ("ledger of hospital-a: spent ε 0.9999 of 3", "at δ 1e-05"):
        assert line in out
    assert "above its budget ε=3" in done.stderr and "nothing was charged" in done.stderr
    assert not (tmp_path / "inbox/too-much").exists()
    ledger = json.loads((tmp_path / "hospital-a-ledger.json").read_text())
    assert len(ledger["releases"]) == 1
    quoted = re.findall(r"^│ (customized|own model alone) +│ ([0-9.]+) ", text, re.MULTILINE)
    measured = dict(re.findall(r"^│ (customized|own model alone) +│ ([0-9.]+) ", out, re.MULTILINE))
    assert quoted and all(measured[who] == value for who, value in quoted), (quoted, measured)
    # Model ids are digests of the weights' bytes, which move with the last bit of the numerical
    # libraries; who contributed and with what weight is the quoted result.
    weights = re.findall(r"^  \S+: (.*weight [0-9.]+)$", text, re.MULTILINE)
    got = re.findall(r"^  \S+: (.*weight [0-9.]+)$", out, re.MULTILINE)
    assert weights and got[: len(weights)] == weights, (weights, got)  # Part 1 comes first
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
