"""One ProxyFL peer's process body, run in this process as a one-client gloo group: what it writes
(its result JSON and its proxy as safetensors) and what the exchange benchmark records."""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
from safetensors.torch import load_file

from pubsubml.methods.proxyfl.peers import free_port, write_client_data
from pubsubml.methods.proxyfl.peers_process import run_comm_bench, run_peer
from pubsubml.methods.proxyfl.protocol import DMLConfig
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent


def test_run_peer_writes_its_accounted_result_and_proxy(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X, y = rng.random((40, 3)).astype(np.float32), rng.integers(0, 2, 40)
    write_client_data(tmp_path / "data", [(X, y)], [(X[:10], y[:10])], (X[10:], y[10:]))
    config = DMLConfig(batch_size=10, delta=1e-3, noise_multiplier=1.0)
    spec = {
        "n_classes": 2,
        "input_shape": [3],
        "rounds": 2,
        "config": asdict(config),
        "private": ["mlp"],
        "proxy_hidden": [4],
        "push_share": 0.5,
        "seed": 0,
        "data_dir": str(tmp_path / "data"),
        "out_dir": str(tmp_path),
        "timeout_s": 30.0,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_peer(0, 1, "127.0.0.1", free_port(), spec)
    result = json.loads((tmp_path / "rank0.json").read_text())
    proxy = load_file(str(tmp_path / "proxy0.safetensors"))
    assert proxy["proxy"].numel() == result["proxy_numel"] == (3 * 4 + 4) + (4 * 2 + 2)
    assert result["active"] == [True, True] and result["bytes_sent"] == 0
    event = DPEvent(
        mechanism="subsampled_gaussian",
        noise_multiplier=1.0,
        sample_rate=10 / 40,
        count=result["dp_steps"],
    )
    assert result["dp_steps"] > 0
    assert np.isclose(result["epsilon"], compute_epsilon([event], 1e-3), rtol=1e-6)
    assert {e["round"] for e in result["evals"]} == {1, 2}
    assert all(0.0 <= e["accuracy"] <= 1.0 for e in result["evals"])


def test_comm_bench_times_every_measured_round(tmp_path: Path) -> None:
    spec = {
        "scheme": "central",
        "dim": 8,
        "rounds": 3,
        "warmup": 1,
        "out_dir": str(tmp_path),
        "timeout_s": 30.0,
    }
    run_comm_bench(0, 1, "127.0.0.1", free_port(), spec)
    result = json.loads((tmp_path / "rank0.json").read_text())
    assert result["rank"] == 0 and len(result["seconds"]) == 3
    assert result["bytes_sent"] == 0  # a server alone sends nothing
