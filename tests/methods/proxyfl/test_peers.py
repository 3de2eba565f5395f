"""ProxyFL between real processes (gloo on loopback) gives the simulation's proxies."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from pubsubml.errors import DataValidationError
from pubsubml.methods.proxyfl.architectures import private_factory
from pubsubml.methods.proxyfl.peers import launch, write_client_data
from pubsubml.methods.proxyfl.protocol import DMLConfig, ProxyFL, WeakPrivacyWarning
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread: the 2-core test machine is shared, and spinning threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


K, D, C = 4, 10, 3


@pytest.mark.slow
def test_four_peer_processes_match_the_simulation(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    sizes = (80, 80, 40, 80)  # client 2: q = 0.5, it runs out of budget after its first round
    clients = [(rng.normal(size=(n, D)).astype(np.float32), rng.integers(0, C, n)) for n in sizes]
    tests = [
        (rng.normal(size=(20, D)).astype(np.float32), rng.integers(0, C, 20)) for _ in range(K)
    ]
    budget = compute_epsilon(
        [DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.0, sample_rate=0.25, count=8)],
        1e-3,
    )
    cfg = DMLConfig(batch_size=20, delta=1e-3, epsilon_budget=budget + 1e-9)
    archs = ["mlp", "cnn1", "mlp", "cnn1"]
    write_client_data(tmp_path / "data", clients, tests, tests[0])

    results = launch(
        n_clients=K,
        data_dir=tmp_path / "data",
        out_dir=tmp_path / "out",
        n_classes=C,
        input_shape=(1, D),
        rounds=2,
        config=cfg,
        private=archs,
        proxy_hidden=(16,),
        seed=7,
        timeout_s=240,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakPrivacyWarning)
        sim = ProxyFL(
            n_classes=C,
            rounds=2,
            proxy_hidden=(16,),
            config=cfg,
            seed=7,
            private_model=[private_factory(a, (1, D)) for a in archs],
        ).fit(clients)
    flat = sim.cohort_.flat_proxies()
    for k, result in enumerate(results):
        saved = load_file(str(tmp_path / "out" / f"proxy{k}.safetensors"))
        torch.testing.assert_close(saved["proxy"], flat[k], atol=1e-6, rtol=1e-5)
        assert result["epsilon"] == pytest.approx(sim.epsilons_[k])
        # only proxy messages left the process: d_θ + 1 values each (proxy numerator + weight)
        assert all(n == result["proxy_numel"] + 1 for n in result["sent_numels"])
    assert [len(r["sent_numels"]) for r in results] == [2, 2, 1, 2]  # client 2 stopped sending
    assert [r["active"] for r in results][2] == [True, False]


def test_launch_checks_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(DataValidationError):
        launch(
            n_clients=2,
            data_dir=tmp_path,
            out_dir=tmp_path,
            n_classes=2,
            input_shape=(3,),
            rounds=1,
            config=DMLConfig(),
            private=["mlp"],
        )
