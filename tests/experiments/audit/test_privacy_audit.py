"""``pubsubml bench privacy-audit``: the grid, one audit record, and a smoke run's files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pubsubml.experiments.audit.privacy_audit import AUDIT, EPSILONS, TARGETS, audit_fold
from pubsubml.experiments.catalog import get


def test_registered_once_with_every_target_epsilon_and_variant() -> None:
    assert get("privacy-audit") is AUDIT
    grid = AUDIT.grid(AUDIT.options(smoke=True))
    dpsgd = [g for g in grid if g["learner"] in ("mlp", "linear")]
    laplace = [g for g in grid if g["learner"] == "async_dp"]
    logistic = [g for g in grid if g["learner"] == "dp_logistic"]
    assert len(dpsgd) == (len(TARGETS) - 2) * len(EPSILONS) * 4
    assert len(laplace) == len(EPSILONS) * 3 and len(logistic) == len(EPSILONS) * 2
    assert {g["variant"] for g in dpsgd} == {"correct", "noise-off", "noise-x0.1", "clip-off"}
    assert {g["variant"] for g in laplace} == {"correct", "noise-x0.1", "l2-clip"}


def test_a_fold_is_one_flat_record_with_the_claim_and_the_bound() -> None:
    [row] = audit_fold(
        0,
        0,
        learner="linear",
        path="stacked",
        epsilon=1.0,
        variant="noise-off",
        canaries=200,
        rows=200,
    )
    assert row["target_epsilon"] == pytest.approx(1.0, abs=0.01)
    assert row["lower_bound"] > row["target_epsilon"] and row["violated"]
    assert "variant" not in row and "canaries" not in row  # they are the setting's


def test_folds_are_refused() -> None:
    with pytest.raises(ValueError, match="no folds"):
        AUDIT.options(folds=5)


@pytest.mark.slow
def test_smoke_run_writes_the_table_and_the_figure(tmp_path: Path) -> None:
    paths = AUDIT.run(tmp_path, AUDIT.options(smoke=True, progress=False))

    assert sorted(p.name for p in paths) == [
        "privacy-audit.csv",
        "privacy-audit.md",
        "privacy-audit.png",
    ]
    table = pd.read_csv(tmp_path / "privacy-audit.csv")
    correct = table[table.variant == "correct"]
    assert (correct.lower_bound <= correct.target_epsilon).all()
    assert set(table.target) == {"dpsgd-mlp", "dpsgd-linear", "async-dp-answer", "dp-logistic"}
    assert "| target | path |" in (tmp_path / "privacy-audit.md").read_text()
