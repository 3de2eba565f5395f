"""Fig. 8 as the paper sets it up: n publishers × n subscribers on an executor, the time and
memory of each n and the growth exponent (pubsub-ml.txt appendix B)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.experiments.catalog import get as get_experiment
from pubsubml.experiments.executors import make_executor
from pubsubml.experiments.pubsub.scale.publishers_scale import growth, scale_counts, scale_run
from pubsubml.experiments.pubsub.scale.sizes import SIZES

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = replace(SIZES["smoke"], rows=50, hidden=(4,), epochs=1)


def test_scale_run_has_n_subscribers_and_a_run_record(monkeypatch: pytest.MonkeyPatch) -> None:
    with make_executor("process", jobs=1) as pool:
        records = scale_run(pool, 3, TINY, seed=0, fold=0)
        probe = scale_run(pool, 3, TINY, seed=0, fold=0, subscribers=1)
    table = pd.DataFrame(records)
    run = table[table["method"] == "run"].iloc[0]
    assert sorted(table.loc[table["method"] == "PubSub-ML", "subscriber"]) == ["s0", "s1", "s2"]
    assert (table.loc[table["method"] == "PubSub-ML", "n_models"] == 4).all()  # own + 3
    assert run["n_subscribers"] == 3 and run["total_s"] >= run["publishers_s"] > 0
    assert run["parent_peak_gib"] > 0 and run["worker_peak_gib"] > 0
    first = pd.DataFrame(probe)
    assert first.loc[first["method"] == "run", "n_subscribers"].item() == 1
    assert first.loc[first["method"] == "PubSub-ML", "score"].tolist() == (
        table.loc[
            (table["method"] == "PubSub-ML") & (table["subscriber"] == "s0"), "score"
        ].tolist()
    )


def test_scale_run_with_the_papers_customize() -> None:
    with make_executor("process", jobs=1) as pool:
        records = scale_run(pool, 3, TINY, seed=0, fold=0, protocol="paper")
        default = scale_run(pool, 3, TINY, seed=0, fold=0, subscribers=1)
        with pytest.raises(ValueError, match="unknown CUSTOMIZE protocol 'fast'"):
            scale_run(pool, 3, TINY, seed=0, fold=0, protocol="fast")
    table = pd.DataFrame(records)
    run = table[table["method"] == "run"].iloc[0]
    assert run["protocol"] == "paper" and run["n_subscribers"] == 3
    fused = table[table["method"] == "PubSub-ML"]
    assert sorted(fused["subscriber"]) == ["s0", "s1", "s2"]
    assert (fused["n_models"] == 4).all() and fused["score"].between(0, 1).all()
    assert pd.DataFrame(default).query("method == 'run'")["protocol"].item() == "default"


def test_counts_growth_and_options() -> None:
    assert scale_counts(False, 5000) == [5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
    assert scale_counts(False, 60) == [5, 10, 20, 50]
    assert scale_counts(True, 5000) == list(SIZES["smoke"].publisher_counts)
    with pytest.raises(ValueError, match="below the smallest n"):
        scale_counts(False, 4)
    b_all, b_last = growth([10, 20, 40], [3.0, 12.0, 48.0])
    assert b_all == pytest.approx(2.0) and b_last == pytest.approx(2.0)
    assert all(np.isnan(growth([10], [1.0])))

    exp = get_experiment("pubsub-publishers")
    assert exp.options(subscribers="all").params == {
        "subscribers": "all",
        "max_publishers": 5000,
        "customizer": "default",
    }
    assert exp.options(customizer="paper").params["customizer"] == "paper"
    with pytest.raises(ValueError, match="--subscribers must be one of"):
        exp.options(subscribers="some")
    with pytest.raises(ValueError, match="--customizer must be one of"):
        exp.options(customizer="fast")
    with pytest.raises(ValueError, match="below the smallest n"):
        exp.options(max_publishers=3)


@pytest.mark.slow
def test_bench_all_subscribers_writes_time_and_memory_per_n(tmp_path: Path) -> None:
    exp = get_experiment("pubsub-publishers")
    opts = exp.options(smoke=True, folds=1, subscribers="all", max_publishers=2, progress=False)
    paths = exp.run(tmp_path, opts)
    assert {p.suffix for p in paths} == {".csv", ".md", ".png"}
    text = (tmp_path / "pubsub-publishers.md").read_text()
    assert "## Time and memory per n" in text and "Growth exponent" in text
    table = pd.read_csv(tmp_path / "pubsub-publishers.csv")
    assert set(table["n_publishers"]) == {2}
    assert set(table["method"]) == {"PubSub-ML", "Own (M^s)", "run"}


@pytest.mark.slow
@pytest.mark.ray
def test_ray_and_the_process_pool_give_the_same_simulation(ray_session: Any) -> None:
    tables = []
    for executor, jobs in (("process", 1), ("ray", 2)):
        with make_executor(executor, jobs=jobs) as pool:
            records = scale_run(pool, 3, TINY, seed=1, fold=0)
        tables.append(pd.DataFrame([r for r in records if r["method"] != "run"]))
    keep = ["n_publishers", "subscriber", "method", "score", "n_models"]
    pd.testing.assert_frame_equal(tables[0][keep], tables[1][keep])
