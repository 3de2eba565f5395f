"""The four domain-experts experiments as the catalog sees them (fl-domain-experts.txt §4, §7)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from pubsubml.experiments.base import Experiment
from pubsubml.experiments.domain_experts.benches import EXPERIMENTS

BY_NAME = {e.name: e for e in EXPERIMENTS}


def test_every_experiment_once_with_no_folds() -> None:
    assert sorted(BY_NAME) == [
        "domain-experts-classification", "domain-experts-incentives", "domain-experts-mnist1d",
        "domain-experts-regression",
    ]  # fmt: skip
    for exp in EXPERIMENTS:
        assert (exp.folds, exp.min_folds, exp.max_folds, exp.seeds) == (1, 1, 1, 1)
        assert exp.folds_help.startswith("no cross-validation")
        assert exp.params == ()  # the old --seed is the common --seeds
        assert "fl-domain-experts.txt §4" in exp.summary
        # A process pool pickles run_fold by reference (jobs > 1): a module-level name.
        module = importlib.import_module(exp.run_fold.__module__)
        assert getattr(module, exp.run_fold.__qualname__) is exp.run_fold


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_grid_carries_smoke_and_seeds_come_from_the_runner(exp: Experiment) -> None:
    smoke, full = exp.grid(exp.options(smoke=True)), exp.grid(exp.options())
    assert smoke and all(s["smoke"] is True for s in smoke)
    assert len(full) >= len(smoke) and all(s["smoke"] is False for s in full)
    assert all("seed" not in s and "fold" not in s for s in smoke)


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.name)
def test_bad_options_fail_before_anything_is_written(exp: Experiment, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="has no folds"):
        exp.options(folds=2, smoke=True)
    with pytest.raises(ValueError, match="takes no option"):
        exp.options(seed=3)
    with pytest.raises(ValueError, match="seeds"):
        exp.options(seeds=0)
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="not a folder"):
        exp.run(blocker / "out", exp.options(smoke=True, progress=False))
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]
