"""``pubsub-small``: paired differences, the summary table, the command and its smoke run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pubsubml.experiments.pubsub.small.experiment import (
    SHARED,
    paired_differences,
    summarize_small,
)
from pubsubml.experiments.pubsub.small.scenarios import SMALL_DATASETS


# ---- reporting -------------------------------------------------------------------------------
def _fake_table() -> pd.DataFrame:
    rows = []
    own = [0.70, 0.60, 0.80]
    fl = [0.65, 0.55, 0.85]
    ours = {"mlp": [0.75, 0.62, 0.86], "sgd_linear": [0.70, 0.60, 0.80]}
    for seed in range(3):
        for repeat in range(2):  # repeats are averaged before the SE over seeds
            jitter = 0.01 * (repeat - 0.5)
            common = {"dataset": "hi", "n_sub": 100, "seed": seed, "fold": repeat, "auc": 0.8}
            for method, value in (("Own", own), ("FedAvg(F)", fl)):
                rows.append(
                    common | {"publisher": SHARED, "method": method, "score": value[seed] + jitter}
                )
            for kind, value in ours.items():
                rows.append(
                    common
                    | {"publisher": kind, "method": "PubSub-ML", "score": value[seed] + jitter}
                    | {"fallback": kind == "sgd_linear" or seed == 0}
                )
    return pd.DataFrame(rows)


def test_paired_differences_are_per_seed() -> None:
    diffs = paired_differences(_fake_table(), "Own")
    mlp = diffs[diffs["publisher"] == "mlp"].sort_values("seed")
    np.testing.assert_allclose(mlp["diff"], [0.05, 0.02, 0.06])


def test_summary_shows_differences_with_se_over_seeds_and_fallbacks() -> None:
    summary = summarize_small(_fake_table())
    assert summary[["publisher", "method"]].values.tolist() == [
        [SHARED, "Own"],
        [SHARED, "FedAvg(F)"],
        ["mlp", "PubSub-ML"],
        ["sgd_linear", "PubSub-ML"],
    ]
    assert (summary["n"] == 3).all()  # seeds, not seeds × repeats
    mlp = summary[summary["publisher"] == "mlp"].iloc[0]
    d = np.array([0.05, 0.02, 0.06])
    assert mlp["row − Own"] == f"{d.mean():.4f} ± {d.std(ddof=1) / np.sqrt(3):.4f}"
    d = np.array([0.10, 0.07, 0.01])
    assert mlp["row − FedAvg(F)"] == f"{d.mean():.4f} ± {d.std(ddof=1) / np.sqrt(3):.4f}"
    assert mlp["fallback"] == "33%"
    sgd = summary[summary["publisher"] == "sgd_linear"].iloc[0]
    assert sgd["row − Own"] == "0.0000 ± 0.0000" and sgd["fallback"] == "100%"
    own = summary[summary["method"] == "Own"].iloc[0]
    assert own["row − Own"] == "" and own["fallback"] == ""
    assert own["ROC AUC"].startswith("0.800")


# ---- the command -----------------------------------------------------------------------------
def test_bad_options_exit_with_a_clear_error(tmp_path: Path) -> None:
    from pubsubml.cli import app

    for args, option in (
        (["--seeds", "0"], "--seeds"),
        (["--repeats", "0"], "--repeats"),
        (["--fl-dp", "server"], "--fl-dp"),
    ):
        result = CliRunner().invoke(
            app, ["bench", "pubsub-small", "--smoke", *args, "--out-dir", str(tmp_path)]
        )
        assert result.exit_code == 2 and option in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_smoke_run_writes_the_table(tmp_path: Path) -> None:
    from pubsubml.cli import app

    result = CliRunner().invoke(
        app, ["bench", "pubsub-small", "--smoke", "--seeds", "1", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    for ext in ("csv", "md", "png"):
        assert (tmp_path / f"pubsub-small.{ext}").stat().st_size > 0
    table = pd.read_csv(tmp_path / "pubsub-small.csv")
    assert set(table["dataset"]) == set(SMALL_DATASETS)
    assert set(table["publisher"]) == {SHARED, "mlp", "sgd_linear"}
    assert set(table["method"]) == {"Own", "PubSub-ML", "PubSub-ML*", "FedAvg(V)", "FedAvg(F)",
                                    "Joint"}  # fmt: skip
    ours = table[table["method"] == "PubSub-ML"]
    assert ours["fallback"].notna().all() and (ours["epsilon"] <= 1.0).all()
    assert (table["test_rows"] >= 200).all() and set(table["n_sub"]) == {60}
    text = (tmp_path / "pubsub-small.md").read_text()
    assert "row − Own" in text and "row − FedAvg(F)" in text and "±" in text
