"""Smoke runs of the asynchronous DP experiments, each run once per session and seed count."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from pubsubml.experiments.async_dp.experiments import EXPERIMENTS

SmokeRun = Callable[[str, int], Path]


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> SmokeRun:
    """``smoke_run(name, seeds)``: the folder holding the files of that smoke run (run once)."""
    by_name = {exp.name: exp for exp in EXPERIMENTS}
    done: dict[tuple[str, int], Path] = {}

    def run(name: str, seeds: int = 1) -> Path:
        if (name, seeds) not in done:
            exp = by_name[name]
            out = tmp_path_factory.mktemp(f"{name}-{seeds}")
            exp.run(out, exp.options(seeds=seeds, smoke=True, progress=False))
            done[name, seeds] = out
        return done[name, seeds]

    return run


def _markdown_rows(path: Path) -> pd.DataFrame:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return pd.DataFrame(cells[2:], columns=cells[0])


@pytest.fixture
def markdown_rows() -> Callable[[Path], pd.DataFrame]:
    """``markdown_rows(path)``: the first Markdown table of ``path`` as strings."""
    return _markdown_rows
