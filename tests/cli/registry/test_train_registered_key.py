"""``pubsubml train --registry``: the signing key is checked against the registered one first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from pubsubml.artifacts import load_artifact
from pubsubml.artifacts.signing import generate_signing_key, save_private_key
from pubsubml.cli.commands import app


def _files(tmp_path: Path, key: Any) -> list[str]:
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (150, 2))
    frame = pd.DataFrame(X, columns=["u", "v"])
    frame["y"] = (X[:, 0] > X[:, 1]).astype(int)
    frame.to_csv(tmp_path / "a.csv", index=False)
    bounds = {n: {"lower": 0, "upper": 1, "default": 0.5} for n in ("u", "v")}
    (tmp_path / "bounds.json").write_text(json.dumps(bounds))
    save_private_key(key, tmp_path / "site.key")
    return ["train", str(tmp_path / "a.csv"), "--schema", str(tmp_path / "bounds.json"),
            "--label", "y", "--key", str(tmp_path / "site.key"), "--site", "a", "--budget", "2",
            "--ledger", str(tmp_path / "ledger.json"), "--class", "0", "--class", "1",
            "--learner", "dp_linear", "--quiet"]  # fmt: skip


def test_a_key_the_registry_does_not_hold_is_refused_before_training(
    server: dict[str, Any], artifacts: Any, tmp_path: Path
) -> None:
    args = _files(tmp_path, generate_signing_key())
    env = {"PUBSUBML_TOKEN": server["tokens"]["a"]}

    r = CliRunner().invoke(
        app, [*args, "--out", str(tmp_path / "m"), "--registry", server["url"]], env=env
    )

    assert r.exit_code == 1 and "not the one" in r.output and "nothing was trained" in r.output
    assert not (tmp_path / "m").exists() and not (tmp_path / "ledger.json").exists()


def test_the_registered_key_trains(server: dict[str, Any], artifacts: Any, tmp_path: Path) -> None:
    args = _files(tmp_path, artifacts.key("a"))
    env = {"PUBSUBML_TOKEN": server["tokens"]["a"]}

    r = CliRunner().invoke(
        app, [*args, "--out", str(tmp_path / "m"), "--registry", server["url"]], env=env
    )

    assert r.exit_code == 0, r.output
    assert load_artifact(tmp_path / "m").card.signer_key_id is not None
