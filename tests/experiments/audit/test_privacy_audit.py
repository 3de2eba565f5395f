"""``pubsubml bench privacy-audit``: the grid, one audit record, and a smoke run's files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pubsubml.audit.catalog import AUDITS
from pubsubml.experiments.audit.privacy_audit import AUDIT, EPSILONS, TARGETS, audit_fold
from pubsubml.experiments.catalog import get


def test_registered_once_with_every_target_epsilon_and_variant() -> None:
    assert get("privacy-audit") is AUDIT
    grid = AUDIT.grid(AUDIT.options(smoke=True))
    for target, path in TARGETS:
        cells = [g for g in grid if (g["learner"], g["path"]) == (target, path)]
        assert len(cells) == len(EPSILONS) * len(AUDITS[target].variants), target
        assert {g["variant"] for g in cells} == set(AUDITS[target].variants)
    assert {t for t, _ in TARGETS} == set(AUDITS)  # every catalogued mechanism is in the grid
    full = AUDIT.grid(AUDIT.options())
    assert all(g["canaries"] is None for g in full)  # the audits' own sizes


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
    assert row["size"] == 200 and row["method"] == "one-run"


def test_folds_are_refused() -> None:
    with pytest.raises(ValueError, match="no folds"):
        AUDIT.options(folds=5)


@pytest.mark.slow
def test_smoke_run_writes_the_table_and_the_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one target per kind of audit (one run, canary clients, many runs, black-box fits) keeps
    # the end-to-end run short; the grid test above covers every target
    from pubsubml.experiments.audit import privacy_audit

    kinds = (
        ("linear", "stacked"),
        ("dp-fedavg", "central"),
        ("async-dp", "laplace"),
        ("dp-forest", "diffprivlib"),
    )
    monkeypatch.setattr(privacy_audit, "TARGETS", kinds)
    monkeypatch.setattr(privacy_audit, "EPSILONS", (1.0, 8.0))
    paths = AUDIT.run(tmp_path, AUDIT.options(smoke=True, progress=False))

    assert sorted(p.name for p in paths) == [
        "privacy-audit.csv",
        "privacy-audit.md",
        "privacy-audit.png",
    ]
    table = pd.read_csv(tmp_path / "privacy-audit.csv")
    correct = table[table.variant == "correct"]
    assert (correct.lower_bound <= correct.target_epsilon).all()
    assert set(table.target) == {
        "dpsgd-linear",
        "dp-fedavg-central",
        "async-dp-answer",
        "dp-random-forest",
    }
    assert set(table.epsilon) == {1.0, 8.0}
    assert "| target | path |" in (tmp_path / "privacy-audit.md").read_text()
