"""``pubsubml publish|subscribe|pull|models list|budget`` against a real registry."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import typer
from click.testing import Result
from typer.testing import CliRunner

from pubsubml.cli.registry import pull_command, subscribe_command


def test_publish_subscribe_pull_and_list(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    a, b = server["tokens"]["a"], server["tokens"]["b"]
    art = artifacts("a", seed=77)
    art.save(tmp_path / "card")
    r = invoke(["publish", str(tmp_path / "card")], token=a)
    assert r.exit_code == 0 and f"published: {art.card.model_id}" in r.output, r.output
    r = invoke(["publish", str(tmp_path / "card")], token=a)
    assert "already published" in r.output

    r = invoke(["subscribe", "age & sex", "--class", "0", "--class", "1"], token=b)
    assert r.exit_code == 0, r.output
    sub = r.stdout.strip()
    r = invoke(["subscribe", "age &"], token=b)
    assert r.exit_code == 2 and r.stderr.startswith("error: channel 'age &'")  # bad usage
    r = invoke(["pull", sub, "--into", str(tmp_path / "inbox")], token=b)
    assert r.exit_code == 0 and "1 model(s) pulled" in r.output, r.output
    assert (tmp_path / "inbox" / art.card.model_id / "card.json").exists()
    r = invoke(["pull", sub, "--into", str(tmp_path / "inbox")], token=b)
    assert "0 model(s) pulled" in r.output  # resumed from the saved cursor

    r = invoke(["models", "list", "--publisher", "a"], token=b)
    assert r.exit_code == 0 and art.card.model_id[:8] in r.output


def test_budget_shows_the_own_ledger_and_refuses_another_sites(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    a = server["tokens"]["a"]
    artifacts("a", seed=78).save(tmp_path / "card")
    assert invoke(["publish", str(tmp_path / "card")], token=a).exit_code == 0
    r = invoke(["budget"], token=a)
    assert r.exit_code == 0 and "site a: spent ε" in r.output
    r = invoke(["budget", "a"], token=server["tokens"]["b"])
    assert r.exit_code == 1 and "may not read the privacy ledger" in r.output


def test_publish_over_budget_is_refused_and_nothing_is_listed(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    artifacts("poor", seed=79).save(tmp_path / "card")
    r = invoke(["publish", str(tmp_path / "card")], token=server["tokens"]["poor"])
    assert r.exit_code == 1 and "budget" in r.output
    r = invoke(["models", "list", "--publisher", "poor"], token=server["tokens"]["b"])
    assert r.exit_code == 0 and "poor" not in r.stdout


def test_client_commands_without_a_token_exit_2(invoke: Callable[..., Result]) -> None:
    r = invoke(["budget"])
    assert r.exit_code == 2 and "no token" in r.output


def test_subscribe_help_gives_the_channel_grammar_and_the_wildcard() -> None:
    app = typer.Typer()
    app.command("subscribe")(subscribe_command)
    app.command("pull")(pull_command)

    r = CliRunner().invoke(app, ["subscribe", "--help"], env={"COLUMNS": "200"})

    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "'&' binds tighter than '|'" in text
    assert "'*' alone is the channel of every model of the task" in text
    assert "'*' for every model of the task" in text


def _pull_two_publishers(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> tuple[Path, list[str]]:
    """Publish a model of a and one of b, pull both as a new subscriber site; returns the inbox
    and the model ids."""
    ids = []
    for site, seed in (("a", 90), ("b", 91)):
        art = artifacts(site, seed=seed)
        art.save(tmp_path / f"card-{site}")
        r = invoke(["publish", str(tmp_path / f"card-{site}")], token=server["tokens"][site])
        assert r.exit_code == 0, r.output
        ids.append(art.card.model_id)
    r = invoke(["site", "add", "clinic", "--roles", "subscriber", "--epsilon", "1"])
    assert r.exit_code == 0, r.output
    clinic = r.stdout.strip()
    r = invoke(["subscribe", "age & sex", "--class", "0", "--class", "1"], token=clinic)
    assert r.exit_code == 0, r.output
    inbox = tmp_path / "inbox"
    r = invoke(["pull", r.stdout.strip(), "--into", str(inbox)], token=clinic)
    assert r.exit_code == 0 and "2 model(s) pulled" in r.output, r.output
    return inbox, sorted(ids)


def test_pull_writes_the_keys_of_every_publisher_and_they_verify_the_cards(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    from pubsubml.artifacts import load_artifact
    from pubsubml.artifacts.signing import key_id, public_key_from_base64, verify_card
    from pubsubml.errors import SignatureError

    inbox, ids = _pull_two_publishers(invoke, artifacts, tmp_path, server)

    raw = json.loads((inbox / "trusted_keys.json").read_text())
    keys = {kid: public_key_from_base64(value) for kid, value in raw.items()}
    assert all(key_id(k) == kid for kid, k in keys.items())
    assert set(keys) == {key_id(artifacts.key(s).public_key()) for s in ("a", "b", "poor")}
    cards = {p.name: load_artifact(p).card for p in inbox.iterdir() if p.is_dir()}
    assert sorted(cards) == ids
    for card in cards.values():
        verify_card(card, keys)
    a_card = next(c for c in cards.values() if c.publisher == "a")
    without_a = {kid: k for kid, k in keys.items() if kid != a_card.signer_key_id}
    with pytest.raises(SignatureError):
        verify_card(a_card, without_a)


def test_customize_on_a_pulled_inbox_trusts_its_keys_file_by_default(
    invoke: Callable[..., Result], artifacts: Any, tmp_path: Path, server: dict[str, Any]
) -> None:
    from pubsubml.cli.commands import app
    from pubsubml.methods.pubsub.storage import load_customizer

    inbox, ids = _pull_two_publishers(invoke, artifacts, tmp_path, server)
    rng = np.random.default_rng(0)
    age = rng.uniform(0, 100, 120)
    data = pd.DataFrame({"age": age, "sex": rng.choice(["f", "m"], 120), "y": (age > 50) * 1})
    data.to_csv(tmp_path / "rows.csv", index=False)
    args = ["customize", str(tmp_path / "rows.csv"), "--label", "y", "--inbox", str(inbox),
            "--own", "logistic", "--cv", "3", "--quiet", "--out"]  # fmt: skip

    r = CliRunner().invoke(app, [*args, str(tmp_path / "customized")])

    assert r.exit_code == 0, r.output
    received = load_customizer(tmp_path / "customized").models or []
    assert sorted(m.model_id for m in received) == ids
    (inbox / "trusted_keys.json").unlink()
    r = CliRunner().invoke(app, [*args, str(tmp_path / "again")])
    assert r.exit_code == 2 and "trusted_keys.json" in r.stderr, r.output
    assert not (tmp_path / "again").exists()
