"""The result files of the Hyperplane experiments, written from small hand-made tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pubsubml.experiments.base import RunOptions
from pubsubml.experiments.pubsub.scale.noisy import NOISY_METHODS
from pubsubml.experiments.pubsub.scale.reports import (
    OWN_NOTE,
    PAPER_OWN_NOTE,
    own_note,
    paired_gain,
    report_noisy,
    report_streams,
    table_subscribers,
)
from pubsubml.experiments.pubsub.scale.streams import STREAM_SIZES


def _streams_table() -> pd.DataFrame:
    rows = []
    for seed in (0, 1):
        for k, lift in ((1, 0.0), (5, 0.02)):
            for chunk in range(10):
                score = 0.8 + lift + 0.001 * chunk + 0.01 * seed
                rows.append({"seed": seed, "subscriber": "s0", "chunk": chunk, "k": k})
                rows[-1] |= {"score": score, "epsilon": 1.0}
    return pd.DataFrame(rows)


def test_paired_gain_is_mean_and_se_of_the_paired_difference() -> None:
    gains = paired_gain(_streams_table(), pd.Series([1, 5]))
    assert gains == ["0.000 ± 0.000", "0.020 ± 0.000"]


def test_own_note_follows_the_customizer() -> None:
    assert own_note(RunOptions(params={"customizer": "paper"})) == PAPER_OWN_NOTE
    assert own_note(RunOptions()) == OWN_NOTE


def test_table_subscribers_caps_at_the_subscribers() -> None:
    assert table_subscribers(pd.DataFrame({"n_publishers": [5, 10, 20]}), 10) == ["5", "10", "10"]


def test_report_streams_writes_the_three_files(tmp_path: Path) -> None:
    table = _streams_table()
    opts = RunOptions(smoke=True)
    assert max(STREAM_SIZES["smoke"].ensemble_sizes) < 10
    paths = report_streams(table, tmp_path, opts)
    assert sorted(p.name for p in paths) == [f"pubsub-streams.{x}" for x in ("csv", "md", "png")]
    text = (tmp_path / "pubsub-streams.md").read_text()
    assert "gain over k = 1 (paired)" in text and "Theorems 5–6" in text


def test_report_noisy_summarizes_both_consortia(tmp_path: Path) -> None:
    table = pd.DataFrame(
        [
            {"n_noisy": n, "method": m, "score": 0.7 + 0.1 * (m == "PubSub-ML") + 0.01 * s}
            for n in (2, 0)
            for m in NOISY_METHODS
            for s in range(3)
        ]
    )
    report_noisy(table, tmp_path, RunOptions(smoke=True, folds=1))
    text = (tmp_path / "pubsub-noisy.md").read_text()
    assert "| 2 | PubSub-ML | 0.810 ± 0.006 | 3 |" in text
    assert "| 0 | Own | 0.710 ± 0.006 | 3 |" in text
