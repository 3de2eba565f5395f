"""``proxyfl-communication``: time and bytes per round of PushSum vs a central server (Fig. 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pubsubml.experiments.proxyfl import communication
from pubsubml.experiments.proxyfl.communication import (
    COMMUNICATION,
    MEASURES,
    PROXY_FLOATS,
    communication_grid,
)


class _FakeLaunch:
    """Stands in for the peer processes: rank r takes (r + 1 + calls) ms per round."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(
        self, *, n_clients: int, scheme: str, dim: int, rounds: int, out_dir: Path
    ) -> list[dict[str, Any]]:
        self.calls += 1
        sent = [4 * (dim + 1) * (n_clients - 1 if scheme == "central" and r == 0 else 1)
                for r in range(n_clients)]  # fmt: skip
        return [
            {"seconds": [(r + self.calls) / 1e3] * rounds, "bytes_sent": sent[r]}
            for r in range(n_clients)
        ]


def test_grid_crosses_client_counts_and_schemes() -> None:
    grid = communication_grid(COMMUNICATION.options())
    assert [(s["clients"], s["scheme"]) for s in grid[:3]] == [
        (2, "pushsum"), (2, "central"), (4, "pushsum")
    ]  # fmt: skip
    assert sorted({s["clients"] for s in grid}) == [2, 4, 8, 16]
    assert len(communication_grid(COMMUNICATION.options(smoke=True))) == 2


def test_parallel_jobs_and_folds_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--jobs 1"):
        COMMUNICATION.run(tmp_path, COMMUNICATION.options(jobs=2, smoke=True))
    with pytest.raises(ValueError, match="no folds"):
        COMMUNICATION.options(folds=3)
    assert list(tmp_path.iterdir()) == []


def test_two_seeds_aggregate_to_mean_and_se(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(communication, "launch_comm_bench", _FakeLaunch())
    COMMUNICATION.run(tmp_path, COMMUNICATION.options(seeds=2, smoke=True, progress=False))
    raw = pd.read_csv(tmp_path / "proxyfl-communication.csv")
    assert list(raw.columns) == ["seed", "clients", "scheme", *MEASURES]
    # calls in grid order: pushsum seeds 0, 1, then central seeds 0, 1; slowest rank is 1
    assert raw["ms_per_round_median"].tolist() == pytest.approx([2.0, 3.0, 4.0, 5.0])
    busiest = raw.groupby("scheme")["KB_busiest_node"].first()
    assert (
        busiest["pushsum"] == busiest["central"] == pytest.approx(2 * 4 * (PROXY_FLOATS + 1) / 1e3)
    )
    text = (tmp_path / "proxyfl-communication.md").read_text()
    assert "| 2 | pushsum | 2.500 ± 0.500 | 2.500 ± 0.500 |" in text
    assert "2 repetitions (--seeds): mean ± SE over them" in text
    assert (tmp_path / "proxyfl-communication.png").stat().st_size > 0


@pytest.mark.slow
def test_smoke_run_times_real_peer_processes(tmp_path: Path) -> None:
    written = COMMUNICATION.run(tmp_path, COMMUNICATION.options(smoke=True, progress=False))
    assert sorted(p.name for p in written) == [
        f"proxyfl-communication.{ext}" for ext in ("csv", "md", "png")
    ]
    raw = pd.read_csv(tmp_path / "proxyfl-communication.csv").set_index("scheme")
    assert list(raw["clients"]) == [2, 2]
    assert (raw["ms_per_round_median"] > 0).all() and (raw["ms_per_round_median"] < 5e3).all()
    floats = PROXY_FLOATS + 1  # PushSum sends the proxy and its weight
    assert raw.loc["pushsum", "KB_sent_per_client"] == pytest.approx(4 * floats / 1e3, rel=0.01)
    assert raw.loc["pushsum", "KB_busiest_node"] == pytest.approx(2 * 4 * floats / 1e3, rel=0.01)
    text = (tmp_path / "proxyfl-communication.md").read_text()
    assert "| clients | scheme | ms_per_round_median |" in text and "3 timed rounds" in text
