"""``pubsubml customize|predict|evaluate`` end to end on temporary files.

Two publishers train DP models with ``pubsubml train`` into an inbox; a subscriber fuses them with
its own rows (``customize``), then scores (``evaluate``) and applies (``predict``) the stored
customized model.  Every refusal exits non-zero with one ``error:`` line and writes nothing.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_friedman1
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    log_loss,
    mean_absolute_error,
    r2_score,
)
from typer.testing import CliRunner, Result

from pubsubml.artifacts import load_artifact
from pubsubml.artifacts.signing import key_id, public_key_from_base64
from pubsubml.cli.commands import app
from pubsubml.errors import SignatureError
from pubsubml.methods.pubsub.storage import load_customizer
from pubsubml.methods.pubsub.subscription import (
    SubscriptionError,
    prepare_subscription,
    read_trusted_keys,
)

runner = CliRunner()

FEATURES = [f"x{i}" for i in range(10)]
SUBSCRIBER = FEATURES[:8]
REG_FEATURES = [f"f{i}" for i in range(5)]
N_NEW = 20


def run(*args: str | Path) -> Result:
    """Run ``pubsubml ARGS`` in this process."""
    return runner.invoke(app, [str(a) for a in args])


def refused(r: Result, code: int, *words: str) -> str:
    """Assert a refusal: exit ``code``, nothing on stdout, one ``error:`` line naming ``words``."""
    assert r.exit_code == code, (r.exit_code, r.output)
    assert r.stdout == "", r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def flip_byte(path: Path, offset: int = -1) -> None:
    """Invert one byte of ``path`` in place."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def public_bounds(names: list[str]) -> str:
    """Public feature definitions (``name → spec``): every feature in [0, 1]."""
    return json.dumps({n: {"lower": 0, "upper": 1, "default": 0.5} for n in names})


@dataclass
class World:
    """The files of a small consortium: keys, data, inboxes and one customized model."""

    root: Path
    inbox: Path
    reg_inbox: Path
    customized: Path
    customize_result: Result

    def __truediv__(self, name: str) -> Path:
        return self.root / name

    @property
    def trust(self) -> list[str | Path]:
        """``--trust`` options for both publishers."""
        return ["--trust", self.root / "a.key.pub", "--trust", self.root / "b.key.pub"]


def _classification_rows(rng: np.random.Generator, n: int, columns: list[str]) -> pd.DataFrame:
    w = np.linspace(-2.0, 2.5, len(FEATURES))
    X = rng.uniform(0, 1, (n, len(FEATURES)))
    frame = pd.DataFrame(X, columns=FEATURES)[columns]
    frame["y"] = (X @ w + rng.normal(0, 0.3, n) > w.sum() / 2).astype(int)
    return frame


def _regression_rows(seed: int, n: int) -> pd.DataFrame:
    X, y = make_friedman1(n_samples=n, n_features=len(REG_FEATURES), noise=1.0, random_state=seed)
    frame = pd.DataFrame(X, columns=REG_FEATURES)
    frame["y"] = np.clip(y, 0, 30)
    return frame


def _train(data: Path, schema: Path, key: Path, site: str, out: Path, *extra: str) -> None:
    """``pubsubml train`` of a dp_linear model of ``site`` (its ledger next to ``data``)."""
    r = run("train", data, "--schema", schema, "--label", "y", "--key", key,
            "--ledger", data.parent / f"{site}-ledger.json", "--site", site, "--budget", "3",
            "--out", out, "--learner", "dp_linear", "--quiet", "--extend-schema", *extra)  # fmt: skip
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """Publishers hospital-a (x0..x6) and hospital-b (x3..x9), 300 rows each; a subscriber with
    150 rows of x0..x7; regression publishers lab-a and lab-b on Friedman #1 (f0..f4); and the
    subscriber's customized classification model (with --contributions)."""
    root = tmp_path_factory.mktemp("consortium")
    rng = np.random.default_rng(0)
    _classification_rows(rng, 300, FEATURES[:7]).to_csv(root / "a.csv", index=False)
    _classification_rows(rng, 300, FEATURES[3:]).to_csv(root / "b.csv", index=False)
    _classification_rows(rng, 150, SUBSCRIBER).to_csv(root / "sub.csv", index=False)
    _classification_rows(rng, 200, SUBSCRIBER).to_csv(root / "test.csv", index=False)
    new = _classification_rows(rng, N_NEW, SUBSCRIBER).drop(columns=["y"])
    new.insert(0, "id", [f"p{i:02d}" for i in range(N_NEW)])
    new.to_csv(root / "new.csv", index=False)
    (root / "bounds.json").write_text(public_bounds(FEATURES))
    for i, name in enumerate(("reg-a", "reg-b", "reg-sub", "reg-test")):
        _regression_rows(i, 150 if name == "reg-sub" else 300).to_csv(
            root / f"{name}.csv", index=False
        )
    (root / "reg-bounds.json").write_text(public_bounds(REG_FEATURES))

    for key in ("a", "b"):
        assert run("keygen", "--out", root / f"{key}.key").exit_code == 0
    inbox, reg_inbox = root / "inbox", root / "reg-inbox"
    for s in ("a", "b"):
        private = root / f"{s}.key"
        _train(root / f"{s}.csv", root / "bounds.json", private, f"hospital-{s}",
               inbox / f"hospital-{s}", "--class", "0", "--class", "1")  # fmt: skip
        _train(root / f"reg-{s}.csv", root / "reg-bounds.json", private, f"lab-{s}",
               reg_inbox / f"lab-{s}", "--task", "regression",
               "--target-bounds", "0", "30")  # fmt: skip

    customized = root / "customized"
    r = run("customize", root / "sub.csv", "--label", "y", "--inbox", inbox,
            "--trust", root / "a.key.pub", "--trust", root / "b.key.pub",
            "--out", customized, "--cv", "3", "--contributions")  # fmt: skip
    assert r.exit_code == 0, r.output
    return World(root, inbox, reg_inbox, customized, r)


def _model_ids(inbox: Path) -> list[str]:
    """Ids of the models in ``inbox``, sorted."""
    return sorted(load_artifact(p).card.model_id for p in inbox.iterdir() if p.is_dir())


def _received_ids(customized: Path) -> list[str]:
    """Ids of the received models a stored customized model keeps, sorted."""
    return sorted(m.model_id for m in load_customizer(customized).models or [])


# ---- customize → evaluate → predict -------------------------------------------------------
def test_customize_writes_the_folder_and_reports_progress_on_stderr_only(world: World) -> None:
    r = world.customize_result
    assert {p.name for p in world.customized.iterdir()} >= {"customized.json", "own", "models"}
    assert "customized model written to" in r.stdout
    assert "verifying 2 model(s)" in r.stderr and "CUSTOMIZE on 150 rows" in r.stderr
    assert "verifying" not in r.stdout and "error" not in r.output
    assert _received_ids(world.customized) == _model_ids(world.inbox)
    assert load_customizer(world.customized).metadata_["label"] == "y"


def test_contributions_table_names_every_candidate_and_sums_to_one(world: World) -> None:
    rows = {}
    for line in world.customize_result.stdout.splitlines():
        found = re.search(r"\b(own|[0-9a-f]{32})\b\W+([0-9]+\.[0-9]{3})\b", line)
        if found:
            rows[found.group(1)] = float(found.group(2))
    assert set(rows) == {"own", *_model_ids(world.inbox)}
    assert all(0.0 <= v <= 1.0 for v in rows.values())
    assert sum(rows.values()) == pytest.approx(1.0, abs=0.005)


def test_evaluate_json_scores_the_customized_model_its_parts_and_matches_a_reload(
    world: World,
) -> None:
    r = run("evaluate", world.customized, world / "test.csv", "--json", "--quiet")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    test = pd.read_csv(world / "test.csv")
    assert report["rows"] == len(test)
    scores = report["scores"]
    received = [k for k in scores if k not in ("customized", "own model alone")]
    assert {"customized", "own model alone"} <= set(scores) and len(received) == 2
    assert {k.split()[0] for k in received} == {"hospital-a", "hospital-b"}
    for values in scores.values():
        assert set(values) == {"accuracy", "balanced accuracy", "log-loss"}
        assert 0.0 <= values["accuracy"] <= 1.0 and 0.0 <= values["balanced accuracy"] <= 1.0
        assert values["log-loss"] >= 0.0

    customizer = load_customizer(world.customized)
    proba = customizer.predict_proba(test[list(customizer.feature_names_in_)])
    truth = np.searchsorted(np.asarray(customizer.classes_), test["y"].to_numpy())
    expected = {
        "accuracy": accuracy_score(truth, proba.argmax(axis=1)),
        "balanced accuracy": balanced_accuracy_score(truth, proba.argmax(axis=1)),
        "log-loss": log_loss(truth, proba, labels=[0, 1]),
    }
    assert scores["customized"] == pytest.approx(expected, rel=1e-6)


def test_evaluate_table_lists_every_part(world: World) -> None:
    r = run("evaluate", world.customized, world / "test.csv", "--quiet")
    assert r.exit_code == 0, r.output
    for word in ("customized", "own model alone", "hospital-a", "hospital-b", "accuracy"):
        assert word in r.stdout


def test_predict_writes_one_row_per_input_row_in_order(world: World, tmp_path: Path) -> None:
    out = tmp_path / "pred.csv"
    r = run("predict", world.customized, world / "new.csv", "--proba", "--keep", "id",
            "--out", out, "--quiet")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert f"{N_NEW} prediction(s) written" in r.stderr
    new, pred = pd.read_csv(world / "new.csv"), pd.read_csv(out)
    assert list(pred.columns) == ["id", "prediction", "proba[0]", "proba[1]"]
    assert pred["id"].tolist() == new["id"].tolist()
    np.testing.assert_allclose(pred["proba[0]"] + pred["proba[1]"], 1.0, atol=1e-6)
    customizer = load_customizer(world.customized)
    X = new[list(customizer.feature_names_in_)]
    assert pred["prediction"].tolist() == customizer.predict(X).tolist()
    np.testing.assert_allclose(pred[["proba[0]", "proba[1]"]], customizer.predict_proba(X))

    printed = run("predict", world.customized, world / "new.csv", "--keep", "id", "--quiet")
    assert printed.exit_code == 0 and printed.stderr == "", printed.output
    shown = pd.read_csv(io.StringIO(printed.stdout))
    pd.testing.assert_frame_equal(shown, pred[["id", "prediction"]])


def test_predict_without_quiet_draws_its_steps_on_stderr(world: World) -> None:
    r = run("predict", world.customized, world / "new.csv")
    assert r.exit_code == 0, r.output
    assert "loading and verifying" in r.stderr and f"predicting {N_NEW} row(s)" in r.stderr
    assert len(pd.read_csv(io.StringIO(r.stdout))) == N_NEW


def test_predict_to_stdout_keeps_bracketed_column_names_of_text_classes(
    world: World, tmp_path: Path
) -> None:
    sub = pd.read_csv(world / "sub.csv")
    sub["y"] = np.where(sub["y"] == 1, "yes", "no")
    sub.to_csv(tmp_path / "sub.csv", index=False)
    (tmp_path / "empty").mkdir()
    r = run("customize", tmp_path / "sub.csv", "--label", "y", "--inbox", tmp_path / "empty",
            *world.trust, "--schema", world / "bounds.json", "--own", "logistic", "--cv", "3",
            "--out", tmp_path / "c", "--quiet")  # fmt: skip
    assert r.exit_code == 0, r.output
    printed = run("predict", tmp_path / "c", world / "new.csv", "--proba", "--quiet")
    assert printed.exit_code == 0, printed.output
    assert printed.stdout.splitlines()[0] == "prediction,proba[no],proba[yes]"


def test_predict_prints_kept_values_verbatim(world: World, tmp_path: Path) -> None:
    new = pd.read_csv(world / "new.csv").head(3)
    new["id"] = ["[b]p0[/b]", ":ok:", "[p2]"]
    new.to_csv(tmp_path / "new.csv", index=False)
    printed = run("predict", world.customized, tmp_path / "new.csv", "--keep", "id", "--quiet")
    assert printed.exit_code == 0, printed.output
    shown = pd.read_csv(io.StringIO(printed.stdout))
    assert shown["id"].tolist() == ["[b]p0[/b]", ":ok:", "[p2]"]


# ---- regression ---------------------------------------------------------------------------
def test_regression_customize_evaluate_and_predict(world: World, tmp_path: Path) -> None:
    out = tmp_path / "reg"
    r = run("customize", world / "reg-sub.csv", "--label", "y", "--inbox", world.reg_inbox,
            *world.trust, "--task", "regression", "--target-bounds", "0", "30", "--cv", "3",
            "--out", out, "--quiet")  # fmt: skip
    assert r.exit_code == 0, r.output

    table = run("evaluate", out, world / "reg-test.csv", "--quiet")
    assert table.exit_code == 0, table.output
    for word in ("R²", "RMSE", "MAE", "customized", "own model alone", "lab-a", "lab-b"):
        assert word in table.stdout

    r = run("evaluate", out, world / "reg-test.csv", "--json", "--quiet")
    assert r.exit_code == 0, r.output
    scores = json.loads(r.stdout)["scores"]
    assert len(scores) == 4
    for values in scores.values():
        assert set(values) == {"R²", "RMSE", "MAE"}
        assert values["RMSE"] >= values["MAE"] >= 0.0
    test = pd.read_csv(world / "reg-test.csv")
    customizer = load_customizer(out)
    pred = customizer.predict(test[list(customizer.feature_names_in_)])
    expected = {
        "R²": r2_score(test["y"], pred),
        "RMSE": float(np.sqrt(np.mean((pred - test["y"].to_numpy()) ** 2))),
        "MAE": mean_absolute_error(test["y"], pred),
    }
    assert scores["customized"] == pytest.approx(expected, rel=1e-6)

    printed = run("predict", out, world / "reg-test.csv", "--proba", "--quiet")
    assert printed.exit_code == 0, printed.output
    shown = pd.read_csv(io.StringIO(printed.stdout))
    assert list(shown.columns) == ["prediction"] and len(shown) == len(test)
    np.testing.assert_allclose(shown["prediction"], pred, rtol=1e-6)


def test_models_of_the_other_task_are_skipped_with_a_message(world: World, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    shutil.copytree(world.inbox, inbox)
    shutil.copytree(world.reg_inbox / "lab-a", inbox / "lab-a")
    r = run("customize", world / "sub.csv", "--label", "y", "--inbox", inbox, *world.trust,
            "--own", "logistic", "--cv", "3", "--out", tmp_path / "c", "--quiet")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "skipped 1 regression model(s): lab-a" in r.stderr
    assert _received_ids(tmp_path / "c") == _model_ids(world.inbox)


# ---- trusted keys -------------------------------------------------------------------------
def _key_map(*pub_files: Path) -> str:
    keys = [public_key_from_base64(p.read_text().strip()) for p in pub_files]
    return json.dumps(
        {key_id(k): p.read_text().strip() for k, p in zip(keys, pub_files, strict=True)}
    )


def test_trust_takes_a_json_map_of_keys_next_to_a_pub_file(world: World, tmp_path: Path) -> None:
    (tmp_path / "a-keys.json").write_text(_key_map(world / "a.key.pub"))
    r = run("customize", world / "sub.csv", "--label", "y", "--inbox", world.inbox,
            "--trust", tmp_path / "a-keys.json", "--trust", world / "b.key.pub",
            "--own", "logistic", "--cv", "3", "--out", tmp_path / "c", "--quiet")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert _received_ids(tmp_path / "c") == _model_ids(world.inbox)


def test_without_trust_the_inboxs_trusted_keys_file_is_used(world: World, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    shutil.copytree(world.inbox, inbox)
    common: list[str | Path] = ["customize", world / "sub.csv", "--label", "y", "--inbox", inbox,
                                "--own", "logistic", "--cv", "3", "--out", tmp_path / "c",
                                "--quiet"]  # fmt: skip
    (inbox / "trusted_keys.json").write_text(_key_map(world / "a.key.pub"))
    refused(run(*common), 1, str(inbox / "hospital-b"))
    assert not (tmp_path / "c").exists()
    (inbox / "trusted_keys.json").write_text(_key_map(world / "a.key.pub", world / "b.key.pub"))
    r = run(*common)
    assert r.exit_code == 0, r.output
    assert _received_ids(tmp_path / "c") == _model_ids(world.inbox)


# ---- customize refusals -------------------------------------------------------------------
def _customize(world: World, out: Path, *extra: str | Path, data: Path | None = None) -> Result:
    return run("customize", data or world / "sub.csv", "--label", "y", "--out", out, "--cv", "3",
               "--quiet", *extra)  # fmt: skip


def test_customize_refuses_an_untrusted_model(world: World, tmp_path: Path) -> None:
    out = tmp_path / "c"
    r = _customize(world, out, "--inbox", world.inbox, "--trust", world / "a.key.pub")
    refused(r, 1, str(world.inbox / "hospital-b"))
    assert not out.exists()


def test_customize_without_trusted_keys_exits_2(world: World, tmp_path: Path) -> None:
    out = tmp_path / "c"
    refused(_customize(world, out, "--inbox", world.inbox), 2, "--trust", "trusted_keys.json")
    assert not out.exists()


def test_customize_refuses_a_trust_file_that_holds_no_key(world: World, tmp_path: Path) -> None:
    out = tmp_path / "c"
    r = _customize(world, out, "--inbox", world.inbox, "--trust", world / "sub.csv")
    refused(r, 2, "holds no public key")
    assert not out.exists()


def test_customize_refuses_a_tampered_inbox_model(world: World, tmp_path: Path) -> None:
    inbox, out = tmp_path / "inbox", tmp_path / "c"
    shutil.copytree(world.inbox, inbox)
    flip_byte(inbox / "hospital-b" / "weights.safetensors")
    refused(_customize(world, out, "--inbox", inbox, *world.trust), 1, str(inbox / "hospital-b"))
    assert not out.exists()


def test_customize_does_not_overwrite_a_nonempty_out(world: World, tmp_path: Path) -> None:
    out = tmp_path / "c"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refused(_customize(world, out, "--inbox", world.inbox, *world.trust), 1, "not overwritten")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "mine"


def test_customize_needs_a_public_definition_of_every_column(world: World, tmp_path: Path) -> None:
    frame = pd.read_csv(world / "sub.csv")
    frame["zz"] = 0.5
    frame.to_csv(tmp_path / "sub.csv", index=False)
    out = tmp_path / "c"
    r = _customize(world, out, "--inbox", world.inbox, *world.trust, data=tmp_path / "sub.csv")
    refused(r, 2, "zz", "pass --schema")
    assert not out.exists()

    (tmp_path / "schema.json").write_text(public_bounds([*FEATURES, "zz"]))
    r = _customize(world, out, "--inbox", world.inbox, *world.trust, "--own", "logistic",
                   "--schema", tmp_path / "schema.json", data=tmp_path / "sub.csv")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "zz" in load_customizer(out).feature_names_in_


def test_customize_refuses_cards_that_define_a_feature_differently(
    world: World, tmp_path: Path
) -> None:
    bounds = json.loads(public_bounds(FEATURES))
    bounds["x3"]["upper"] = 2
    (tmp_path / "other-bounds.json").write_text(json.dumps(bounds))
    shutil.copy(world / "b.csv", tmp_path / "b.csv")
    inbox = tmp_path / "inbox"
    shutil.copytree(world.inbox / "hospital-a", inbox / "hospital-a")
    _train(tmp_path / "b.csv", tmp_path / "other-bounds.json", world / "b.key", "hospital-b",
           inbox / "hospital-b", "--class", "0", "--class", "1")  # fmt: skip
    out = tmp_path / "c"
    r = _customize(world, out, "--inbox", inbox, *world.trust)
    line = refused(r, 2, "'x3'", "differently", "--schema")
    assert not out.exists()
    received, X, y = _library(world, inbox, "a.key.pub", "b.key.pub")
    keys = read_trusted_keys([world / "a.key.pub", world / "b.key.pub"])
    with pytest.raises(SubscriptionError, match="schema=") as disagree:
        prepare_subscription(received, X, y, trusted_keys=keys)
    assert disagree.value.kind == "cards_disagree" and disagree.value.problem in line
    r = _customize(world, out, "--inbox", inbox, *world.trust, "--own", "logistic",
                   "--schema", world / "bounds.json")  # fmt: skip
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(
    ("extra", "code", "words"),
    [
        (["--task", "clustering"], 2, ["--task", "clustering"]),
        (["--class", "zero", "--class", "one"], 2, ["--class"]),
    ],
    ids=["invalid-task", "text-classes-for-integer-labels"],
)
def test_customize_refuses_invalid_options(
    world: World, tmp_path: Path, extra: list[str], code: int, words: list[str]
) -> None:
    out = tmp_path / "c"
    r = _customize(world, out, "--inbox", world.inbox, *world.trust, *extra)
    refused(r, code, *words)
    assert not out.exists()


def test_customize_refuses_a_missing_label_column(world: World, tmp_path: Path) -> None:
    out = tmp_path / "c"
    r = run("customize", world / "sub.csv", "--label", "outcome", "--inbox", world.inbox,
            *world.trust, "--out", out, "--quiet")  # fmt: skip
    refused(r, 1, "'outcome'")
    assert not out.exists()


# ---- predict / evaluate refusals ----------------------------------------------------------
@pytest.fixture
def tampered(world: World, tmp_path: Path) -> Path:
    """A copy of the customized model with one byte of its fusion weights flipped."""
    folder = tmp_path / "tampered"
    shutil.copytree(world.customized, folder)
    flip_byte(folder / "fusion.safetensors")
    return folder


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_predict_and_evaluate_refuse_a_folder_that_is_not_a_customized_model(
    world: World, tmp_path: Path, command: str
) -> None:
    data = world / "test.csv"
    for folder in (world.inbox / "hospital-a", tmp_path / "absent"):
        refused(run(command, folder, data, "--quiet"), 1, str(folder))


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_predict_and_evaluate_refuse_a_tampered_customized_model(
    world: World, tampered: Path, tmp_path: Path, command: str
) -> None:
    out: list[str | Path] = ["--out", tmp_path / "pred.csv"] if command == "predict" else []
    refused(run(command, tampered, world / "test.csv", *out, "--quiet"), 1, "fusion.safetensors")
    assert not (tmp_path / "pred.csv").exists()


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_predict_and_evaluate_refuse_data_lacking_a_fitted_column(
    world: World, tmp_path: Path, command: str
) -> None:
    pd.read_csv(world / "test.csv").drop(columns=["x2"]).to_csv(tmp_path / "d.csv", index=False)
    out: list[str | Path] = ["--out", tmp_path / "pred.csv"] if command == "predict" else []
    r = run(command, world.customized, tmp_path / "d.csv", *out, "--quiet")
    refused(r, 1, "['x2']")
    assert not (tmp_path / "pred.csv").exists()


def test_predict_does_not_overwrite_an_existing_file(world: World, tmp_path: Path) -> None:
    out = tmp_path / "pred.csv"
    out.write_text("mine\n")
    refused(
        run("predict", world.customized, world / "new.csv", "--out", out, "--quiet"), 1, str(out)
    )
    assert out.read_text() == "mine\n"


def test_predict_refuses_a_keep_column_not_in_the_data(world: World, tmp_path: Path) -> None:
    out = tmp_path / "pred.csv"
    r = run(
        "predict", world.customized, world / "new.csv", "--keep", "mrn", "--out", out, "--quiet"
    )
    refused(r, 2, "mrn")
    assert not out.exists()


def test_evaluate_refuses_labels_outside_the_models_classes(world: World, tmp_path: Path) -> None:
    frame = pd.read_csv(world / "test.csv")
    frame.loc[3, "y"] = 7
    frame.to_csv(tmp_path / "d.csv", index=False)
    refused(run("evaluate", world.customized, tmp_path / "d.csv", "--quiet"), 1, "'7'", "classes")


def test_evaluate_refuses_data_without_the_label_column(world: World) -> None:
    r = run("evaluate", world.customized, world / "new.csv", "--quiet")
    refused(r, 1, "'y'")


def test_a_public_key_given_as_the_signing_key_is_refused(tmp_path: Path) -> None:
    from pubsubml.artifacts.signing import generate_signing_key, public_key_to_base64

    key = generate_signing_key()
    (tmp_path / "site.key.pub").write_text(public_key_to_base64(key.public_key()) + "\n")
    data = tmp_path / "d.csv"
    data.write_text("x0,y\n0.5,1\n")
    (tmp_path / "inbox").mkdir()
    out = tmp_path / "customized"

    r = CliRunner().invoke(
        app,
        [
            *("customize", str(data), "--label", "y", "--inbox", str(tmp_path / "inbox")),
            *("--out", str(out), "--trust", str(tmp_path / "site.key.pub")),
            *("--key", str(tmp_path / "site.key.pub")),
        ],
    )

    assert r.exit_code != 0 and "not a private key" in r.stderr
    assert not out.exists()


# ---- contributions ------------------------------------------------------------------------
def _score_rows(text: str) -> dict[str, float]:
    """``model id → score`` from a printed table whose rows start with a model id and end with
    a score (``customize --contributions`` and ``contributions`` print such tables)."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│") if c.strip()]
        if (
            len(cells) >= 2
            and re.fullmatch(r"own|[0-9a-f]{32}", cells[0])
            and re.fullmatch(r"[0-9]+\.[0-9]{3}", cells[-1])
        ):
            rows[cells[0]] = float(cells[-1])
    return rows


def test_contributions_refuse_without_disclose_as_a_non_dp_disclosure(
    world: World, tmp_path: Path
) -> None:
    for folder in (world.customized, tmp_path / "absent"):
        line = refused(run("contributions", folder), 1, "not differentially private", "--disclose")
        assert "private rows" in line


def test_contributions_print_the_scores_customize_printed_with_each_publisher(
    world: World,
) -> None:
    r = run("contributions", world.customized, "--disclose")

    assert r.exit_code == 0 and r.stderr == "", r.output
    assert _score_rows(r.stdout) == _score_rows(world.customize_result.stdout)
    assert "hospital-a" in r.stdout and "hospital-b" in r.stdout and "not DP" in r.stdout


def test_contributions_json_sums_to_one_by_model_and_by_publisher(world: World) -> None:
    r = run("contributions", world.customized, "--disclose", "--json")

    assert r.exit_code == 0, r.output
    document = json.loads(r.stdout)
    assert document["differentially_private"] is False
    assert document["method"] == "coefficients"
    scores = {row["model_id"]: row["score"] for row in document["models"]}
    assert set(scores) == {"own", *_model_ids(world.inbox)}
    assert sum(scores.values()) == pytest.approx(1.0)
    assert set(document["publishers"]) == {"hospital-a", "hospital-b"}
    assert document["self_importance"] == scores["own"]
    assert sum(document["publishers"].values()) + scores["own"] == pytest.approx(1.0)


def test_contributions_refuse_a_fusion_stored_as_onnx_and_a_folder_that_is_no_model(
    world: World, tmp_path: Path
) -> None:
    out = tmp_path / "linear"
    r = _customize(world, out, "--inbox", world.inbox, *world.trust, "--fusion", "linear")
    assert r.exit_code == 0, r.output

    refused(run("contributions", out, "--disclose"), 1, "ONNX", "stacked")
    refused(run("contributions", world.inbox, "--disclose"), 1, str(world.inbox))


def test_contributions_of_publishers_that_carry_weight_match_customizes(
    world: World, tmp_path: Path
) -> None:
    out = tmp_path / "no-own"
    made = _customize(world, out, "--inbox", world.inbox, *world.trust, "--own", "none",
                      "--contributions")  # fmt: skip
    assert made.exit_code == 0, made.output

    r = run("contributions", out, "--disclose", "--json")

    assert r.exit_code == 0, r.output
    scores = {row["model_id"]: row["score"] for row in json.loads(r.stdout)["models"]}
    printed = _score_rows(made.stdout)
    assert set(scores) == set(printed) == set(_model_ids(world.inbox))
    assert max(scores.values()) > 0.5  # the publishers carry the fusion here
    assert {k: round(v, 3) for k, v in scores.items()} == printed


# ---- the library and the command line prepare a subscription alike ---------------------------
def _library(world: World, inbox: Path, *pub: str) -> tuple[Any, pd.DataFrame, Any]:
    """What a library user passes to ``prepare_subscription``: keys, opened artifacts, rows."""
    keys = read_trusted_keys([world / p for p in pub])
    received = [load_artifact(p).open(keys) for p in sorted(inbox.iterdir()) if p.is_dir()]
    frame = pd.read_csv(world / "sub.csv")
    return received, frame.drop(columns=["y"]), frame["y"]


def test_the_library_prepares_the_schema_and_classes_customize_fused(world: World) -> None:
    received, X, y = _library(world, world.inbox, "a.key.pub", "b.key.pub")
    keys = read_trusted_keys([world / "a.key.pub", world / "b.key.pub"])
    sub = prepare_subscription(received[::-1], X, y, trusted_keys=keys)
    stored = load_customizer(world.customized)
    assert sub.schema == stored.schema
    assert sub.classes == stored.classes_.tolist() == [0, 1]
    assert [m.model_id for m in sub.models] == stored.model_ids == _model_ids(world.inbox)
    assert sub.customizer(cv=3).get_params()["schema"] == stored.schema


def test_the_library_and_customize_refuse_the_same_bad_inputs(world: World, tmp_path: Path) -> None:
    received, X, y = _library(world, world.inbox, "a.key.pub", "b.key.pub")
    # No trusted key.
    with pytest.raises(SubscriptionError) as no_keys:
        prepare_subscription(received, X, y, trusted_keys={})
    line = refused(_customize(world, tmp_path / "c", "--inbox", world.inbox), 2)
    assert no_keys.value.kind == "no_trusted_keys" and no_keys.value.problem in line
    # A model whose signer is not trusted: the same SignatureError text.
    only_a = read_trusted_keys([world / "a.key.pub"])
    with pytest.raises(SignatureError) as untrusted:
        prepare_subscription(received, X, y, trusted_keys=only_a)
    r = _customize(world, tmp_path / "c", "--inbox", world.inbox, "--trust", world / "a.key.pub")
    assert str(untrusted.value).splitlines()[0] in refused(r, 1)
    # A column without a public definition.
    with pytest.raises(SubscriptionError) as undefined:
        prepare_subscription(received, X.assign(zz=0.5), y, trusted_keys=only_a | _b(world))
    X.assign(zz=0.5, y=y).to_csv(tmp_path / "sub.csv", index=False)
    r = _customize(world, tmp_path / "c", "--inbox", world.inbox, *world.trust,
                   data=tmp_path / "sub.csv")  # fmt: skip
    assert undefined.value.kind == "undefined_columns" and undefined.value.problem in refused(r, 2)
    assert not (tmp_path / "c").exists()


def _b(world: World) -> dict[str, Any]:
    return read_trusted_keys([world / "b.key.pub"])
