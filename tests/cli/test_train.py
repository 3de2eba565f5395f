"""``pubsubml train`` end to end on temporary files: the card, the ledger, the refusals."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import Result

# The runner and the key + schema set-up of the schema commands' tests (``site``: conftest).
from cli.test_site import _setup, run
from pubsubml.artifacts import load_artifact
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.ledger import PrivacyLedger


def test_schema_check_and_train_apply_one_rule(site: Path) -> None:
    """Missing features, clipping and --strict: check and train agree, message for message."""
    _setup(site)
    frame = pd.read_csv(site / "a.csv")
    frame.loc[:2, "x1"] = 1.5  # three rows above the public upper bound
    frame.to_csv(site / "c.csv", index=False)
    common = ["--label", "y"]
    train = ["train", site / "c.csv", "--schema", site / "bounds.json", *common,
             "--key", site / "a.key", "--class", "0", "--class", "1", "--learner", "dp_linear",
             "--ledger", site / "ledger.json", "--site", "a", "--budget", "5", "--quiet"]  # fmt: skip
    check = ["schema", "check", site / "c.csv", site / "bounds.json", *common]
    missing = "the data lacks schema feature(s) x3"
    r_check, r_train = run(*check), run(*train, "--out", site / "m1")
    for r in (r_check, r_train):
        assert r.exit_code == 1 and missing in " ".join(r.output.split())
    r_check = run(*check, "--extend-schema", "--strict")
    r_train = run(*train, "--out", site / "m2", "--extend-schema", "--strict")
    for r in (r_check, r_train):
        out = " ".join(r.output.split())
        assert r.exit_code == 1 and "x1: 3 row(s) outside [0, 1] (refused by --strict)" in out
    assert not (site / "ledger.json").exists() and not (site / "m1").exists()
    assert not (site / "m2").exists()
    r_check = run(*check, "--extend-schema")
    assert r_check.exit_code == 0, r_check.output
    r_train = run(*train, "--out", site / "m3", "--extend-schema")
    assert r_train.exit_code == 0, r_train.output
    clipped = "x1: 3 row(s) outside [0, 1]: clipped to the public bounds"
    for r in (r_check, r_train):
        assert clipped in " ".join(r.output.split())
    card = load_artifact(site / "m3").card
    assert card.input_features == ["x0", "x1", "x2", "x3"] and card.defaulted_features == ["x3"]
    assert card.trained_features == ["x0", "x1", "x2"]


def test_a_card_lists_the_columns_the_site_trained_on(site: Path) -> None:
    _setup(site)
    r = run("train", site / "a.csv", "--schema", site / "schema.json", "--label", "y",
            "--key", site / "a.key", "--out", site / "art", "--site", "a", "--budget", "2",
            "--ledger", site / "ledger.json", "--class", "0", "--class", "1",
            "--learner", "dp_linear", "--quiet")  # fmt: skip
    assert r.exit_code == 0, r.output
    card = load_artifact(site / "art").card
    assert card.input_features == card.trained_features == ["x0", "x1", "x2"]
    assert card.defaulted_features is None and card.privacy.noise == "secure"


def test_two_default_train_runs_draw_different_noise(site: Path) -> None:
    _setup(site)
    base = ["train", site / "a.csv", "--schema", site / "schema.json", "--label", "y",
            "--key", site / "a.key", "--site", "a", "--budget", "3", "--seed", "7",
            "--ledger", site / "ledger.json", "--class", "0", "--class", "1",
            "--learner", "dp_linear", "--quiet"]  # fmt: skip
    for out in ("r1", "r2"):
        r = run(*base, "--out", site / out)
        assert r.exit_code == 0, r.output
    one, two = load_artifact(site / "r1"), load_artifact(site / "r2")
    assert one.card.privacy.events == two.card.privacy.events  # the same DP run, planned alike
    assert one.weights != two.weights and one.card.model_id != two.card.model_id


def test_train_charges_the_ledger_then_writes_the_signed_artifact(site: Path) -> None:
    _setup(site)
    r = run("train", site / "a.csv", "--schema", site / "schema.json", "--label", "y",
            "--key", site / "a.key", "--out", site / "art", "--site", "a", "--budget", "1.5",
        "--ledger", site / "ledger.json",
            "--class", "0", "--class", "1", "--learner", "dp_linear", "--epsilon", "1")  # fmt: skip
    assert r.exit_code == 0, r.output
    card = load_artifact(site / "art").card
    ledger = PrivacyLedger.from_json((site / "ledger.json").read_text())
    assert card.publisher == "a" and [x.release_id for x in ledger.releases] == [card.model_id]
    assert ledger.spent_epsilon() == pytest.approx(compute_epsilon(card.privacy.events, 1e-5))
    assert card.privacy.epsilon <= 1.0 + 1e-9
    assert "(PLD)" in r.output and "(RDP)" in r.output


def test_train_over_budget_or_on_a_mismatch_writes_nothing(site: Path) -> None:
    _setup(site)
    common = ["--schema", site / "schema.json", "--label", "y", "--key", site / "a.key",
              "--class", "0", "--class", "1", "--learner", "dp_linear",
              "--ledger", site / "ledger.json"]  # fmt: skip
    first = run("train", site / "a.csv", *common, "--out", site / "a1", "--site", "a",
                "--budget", "1.2")  # fmt: skip
    assert first.exit_code == 0, first.output
    before = (site / "ledger.json").read_bytes()
    r = run("train", site / "a.csv", *common, "--out", site / "a2", "--seed", "1")
    assert r.exit_code == 1 and "above its budget" in r.output
    assert "remaining" in r.output
    frame = pd.read_csv(site / "a.csv")
    frame["zz"] = 1
    frame.to_csv(site / "b.csv", index=False)
    r = run("train", site / "b.csv", *common, "--out", site / "a3")
    assert r.exit_code == 1 and "does not fit" in r.output
    r = run("train", site / "a.csv", *common, "--out", site / "a4", "--learner", "nope")
    assert r.exit_code == 2 and "train accepts dp_mlp, dp_linear" in " ".join(r.output.split())
    assert "logistic_regression," not in r.output.replace("dp_logistic_regression", "")
    assert not any((site / d).exists() for d in ("a2", "a3", "a4"))
    assert (site / "ledger.json").read_bytes() == before


def test_train_needs_public_classes_and_a_ledger_to_start(site: Path) -> None:
    _setup(site)
    base = ["train", site / "a.csv", "--schema", site / "schema.json", "--label", "y",
            "--key", site / "a.key", "--out", site / "x", "--ledger", site / "ledger.json"]  # fmt: skip
    r = run(*base, "--site", "a", "--budget", "1")
    assert r.exit_code == 2 and "public classes" in r.output
    r = run(*base, "--class", "0", "--class", "1")
    assert r.exit_code == 2 and "--site and --budget" in r.output
    assert not (site / "ledger.json").exists() and not (site / "x").exists()


BAD_INPUTS = {
    "unknown learner": (["--learner", "nope"], 2, "unknown learner 'nope'"),
    "bad task": (["--task", "ranking"], 2, "--task must be"),
    "missing feature": (["--schema", "bounds.json"], 1, "lacks schema feature(s) x3"),
    "over budget": (["--epsilon", "8"], 1, "above its budget"),
    "not a private key": (["--key", "a.key.pub"], 2, "not a private key"),
    "bad schema file": (["--schema", "a.csv"], 2, "a.csv"),
    "other site's ledger": (["--site", "b"], 1, "is the ledger of site 'a'"),
    "output not empty": (["--out", "art"], 1, "not an empty folder"),
    "strict": (["--strict"], 1, "refused by --strict"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_every_bad_input_is_one_line_and_changes_nothing(site: Path, case: str) -> None:
    _setup(site)
    frame = pd.read_csv(site / "a.csv")
    frame.loc[0, "x0"] = 2.0  # out of bounds: clipped, or refused with --strict
    frame.to_csv(site / "a.csv", index=False)
    (site / "art").mkdir()
    (site / "art" / "keep.txt").write_text("x")
    options = {"--schema": "schema.json", "--key": "a.key", "--out": "new", "--site": "a",
               "--ledger": "ledger.json", "--learner": "dp_linear", "--epsilon": "1"}  # fmt: skip
    paths = ("--schema", "--key", "--out", "--ledger")

    def train(changes: dict[str, str], *flags: str) -> Result:
        merged = {**options, **changes}
        args = [v for k, x in merged.items() for v in (k, site / x if k in paths else x)]
        return run("train", site / "a.csv", "--label", "y", "--class", "0", "--class", "1",
                   "--budget", "2", "--quiet", *args, *flags)  # fmt: skip

    assert train({}).exit_code == 0
    shutil.rmtree(site / "new")
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    extra, code, message = BAD_INPUTS[case]
    changes = dict(zip(extra[::2], extra[1::2], strict=False))

    r = train(changes, *([] if len(extra) % 2 == 0 else extra[-1:]))

    assert r.exit_code == code, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.stderr
    after = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert after == before  # no file written or changed, the ledger included
    assert not (site / "new").exists()
