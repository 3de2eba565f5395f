"""``pubsubml train`` killed with SIGKILL at each step, and two runs on one ledger at once.

Whatever the step a run dies at, the ledger file is a whole ledger that shows at least what was
released (every artifact written is charged) and never more than the budget; the lock dies with
the process, so the next run goes through.  Each run is a real process: the step is reached by
wrapping one function of the package so that the process kills itself there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pubsubml.artifacts import load_artifact
from pubsubml.privacy.ledger import PrivacyLedger

pytestmark = pytest.mark.slow

# Where to die: ("module" or "module:Class", attribute, "before" or "after" the call, which call).
LEDGER_FILE = "pubsubml.privacy.ledger_file:LedgerFile"
STEPS = {
    "training": ("pubsubml.learners.dpsgd_base", "_fit_sites", "before", 1),
    "after training, before the ledger": (LEDGER_FILE, "save", "before", 1),
    "after the ledger, before the artifact": (LEDGER_FILE, "save", "after", 1),
    "between the weights and the card": (
        "pubsubml.artifacts.artifact",
        "_write_atomic",
        "after",
        1,
    ),
    "after the artifact": ("pubsubml.artifacts.artifact:Artifact", "save", "after", 1),
}

KILLER = textwrap.dedent(
    """
    import importlib, os, signal, sys
    target, name, when, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    module, _, cls = target.partition(":")
    owner = importlib.import_module(module)
    if cls:
        owner = getattr(owner, cls)
    original = getattr(owner, name)
    calls = [0]

    def wrapped(*args, **kwargs):
        calls[0] += 1
        die = calls[0] == nth
        if die and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(*args, **kwargs)
        if die and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, wrapped)
    from pubsubml.cli.commands import app
    app(sys.argv[5:], prog_name="pubsubml")
    """
)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (200, 3))
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"])
    frame["y"] = (X[:, 0] + X[:, 1] > 1).astype(int)
    frame.to_csv(tmp_path / "a.csv", index=False)
    bounds = {f"x{i}": {"lower": 0, "upper": 1, "default": 0.5} for i in range(3)}
    (tmp_path / "bounds.json").write_text(json.dumps(bounds))
    subprocess.run([_cli(), "keygen", "--out", str(tmp_path / "a.key")], check=True)
    return tmp_path


def _cli() -> str:
    return str(Path(sys.executable).with_name("pubsubml"))


def _train_args(site: Path, out: str, budget: float = 2.5) -> list[str]:
    return ["train", str(site / "a.csv"), "--schema", str(site / "bounds.json"), "--label", "y",
            "--key", str(site / "a.key"), "--out", str(site / out), "--site", "a",
            "--budget", str(budget), "--ledger", str(site / "ledger.json"), "--class", "0",
            "--class", "1", "--learner", "dp_linear", "--quiet"]  # fmt: skip


def _killed(site: Path, step: str, out: str) -> subprocess.CompletedProcess[str]:
    target, name, when, nth = STEPS[step]
    return subprocess.run(
        [sys.executable, "-c", KILLER, target, name, when, str(nth), *_train_args(site, out)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _check_ledger_covers_artifacts(site: Path, budget: float) -> PrivacyLedger | None:
    """The ledger is whole, within budget, and charges every artifact written."""
    path = site / "ledger.json"
    ledger = PrivacyLedger.from_json(path.read_bytes()) if path.exists() else None
    charged = {r.release_id for r in ledger.releases} if ledger is not None else set()
    for folder in site.iterdir():
        if (folder / "card.json").exists():
            assert load_artifact(folder).card.model_id in charged, folder
    if ledger is not None:
        assert ledger.spent_epsilon() <= budget
    assert not [p for p in site.rglob("*.tmp")], "a temporary file was left visible"  # hidden
    return ledger


@pytest.mark.parametrize("step", list(STEPS))
def test_a_train_killed_at_any_step_leaves_a_ledger_that_covers_what_was_released(
    site: Path, step: str
) -> None:
    result = _killed(site, step, "killed")

    assert result.returncode == -signal.SIGKILL, result.stderr
    ledger = _check_ledger_covers_artifacts(site, 2.5)
    released = (site / "killed" / "card.json").exists()
    if step in ("training", "after training, before the ledger"):
        assert ledger is None and not released
    if step.startswith("after the ledger") or step.startswith("between"):
        assert ledger is not None and len(ledger.releases) == 1 and not released
    if step == "after the artifact":
        assert ledger is not None and released
    if step != "training":
        return
    # the lock, held while training, died with the process: the next run goes through
    again = subprocess.run([_cli(), *_train_args(site, "next")], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    after = _check_ledger_covers_artifacts(site, 2.5)
    assert after is not None and len(after.releases) == 1


def test_two_concurrent_runs_on_one_ledger_never_overspend(site: Path) -> None:
    """A budget for one release: the runs take turns on the lock, the second sees the charge."""
    budget, succeed = 1.2, 1
    runs = [
        subprocess.Popen(
            [_cli(), *_train_args(site, f"out{i}", budget)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    results = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in runs]

    assert sorted(code for code, _ in results) == [0] * succeed + [1] * (2 - succeed), results
    ledger = _check_ledger_covers_artifacts(site, budget)
    assert ledger is not None and len(ledger.releases) == succeed
    refused = [err for code, err in results if code == 1]
    for err in refused:
        assert "above its budget" in err and "nothing was trained" in err
        assert len(err.strip().splitlines()) == 1
    assert sum((site / f"out{i}" / "card.json").exists() for i in range(2)) == succeed
    assert os.path.exists(site / "ledger.json.lock")
