"""What one ProxyFL peer process runs: training and gossip, or the communication benchmark.

proxyfl.txt §3.4 and §4: each client is one OS process holding a
:class:`~pubsubml.methods.proxyfl.local.ClientCohort` of one client and running the same
:func:`~pubsubml.methods.proxyfl.protocol.run_rounds` as the simulation, with
:class:`~pubsubml.methods.proxyfl.peers_gloo.GlooPushSum` as its communicator.  :func:`run_peer`
reads the client's data (``.npz`` with ``allow_pickle=False``) and a JSON spec, trains, evaluates
and writes its results as JSON and its proxy as safetensors; :func:`run_comm_bench` times the
exchanges alone.  :func:`~pubsubml.methods.proxyfl.peers.launch` starts these processes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import save_file

from pubsubml.methods.proxyfl.peers_gloo import GlooCentralAveraging, GlooPushSum
from pubsubml.methods.proxyfl.protocol import ClientCohort, DMLConfig, ProxyFL

__all__ = ["run_comm_bench", "run_peer"]


def _init(rank: int, world_size: int, master_addr: str, master_port: int, timeout_s: float) -> None:
    from datetime import timedelta

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{master_addr}:{master_port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
    )


def _accuracy(cohort: ClientCohort, X: np.ndarray, y: np.ndarray, model: str) -> float:
    pred = cohort.predict_proba(0, torch.as_tensor(X), model).argmax(1).numpy()  # type: ignore[arg-type]
    return float((pred == y).mean())


def run_peer(
    rank: int, world_size: int, master_addr: str, master_port: int, spec: dict[str, Any]
) -> None:
    """One client's process: train, gossip, evaluate, write ``rank{r}.json`` and its proxy."""
    from pubsubml.methods.proxyfl.architectures import private_factory

    out = Path(spec["out_dir"])
    with np.load(Path(spec["data_dir"]) / f"client{rank}.npz", allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    archs = spec["private"]
    method = ProxyFL(
        n_classes=spec["n_classes"],
        rounds=spec["rounds"],
        proxy_hidden=tuple(spec["proxy_hidden"]),
        private_model=private_factory(archs[rank], tuple(spec["input_shape"])),
        config=DMLConfig(**spec["config"]),
        push_share=spec["push_share"],
        seed=spec["seed"],
    )
    evals: list[dict[str, Any]] = []

    def evaluate(t: int, cohort: ClientCohort) -> None:
        for model in ("private", "proxy"):
            for test in ("local", "global"):
                acc = _accuracy(cohort, arrays[f"X_{test}"], arrays[f"y_{test}"], model)
                evals.append({"round": t + 1, "model": model, "test": test, "accuracy": acc})

    _init(rank, world_size, master_addr, master_port, spec["timeout_s"])
    try:
        comm = GlooPushSum(world_size=world_size, share=spec["push_share"])
        method.fit(
            [(arrays["X"], arrays["y"])], client_ids=[rank], communicator=comm, callback=evaluate
        )
        dist.barrier()  # no process tears its gloo connections down while a peer still uses them
    finally:
        dist.destroy_process_group()
    cohort = method.cohort_
    save_file(
        {
            "proxy": cohort.flat_proxies()[0].contiguous(),
            "push_weight": cohort.push_weights.contiguous(),
        },
        str(out / f"proxy{rank}.safetensors"),
    )
    result = {
        "rank": rank,
        "epsilon": method.epsilons_[0],
        "guarantee": method.privacy_guarantee_,
        "dp_steps": cohort.dp_steps()[0],
        "active": [r.active[0] for r in method.history_],
        "bytes_sent": comm.bytes_sent,
        "sent_numels": comm.sent_numels,
        "proxy_numel": int(cohort.flat_proxies().shape[1]),
        "exchange_seconds": comm.exchange_seconds,
        "membership_seconds": comm.membership_seconds,
        "train_seconds": [r.train_seconds for r in method.history_],
        "evals": evals,
    }
    (out / f"rank{rank}.json").write_text(json.dumps(result))


def run_comm_bench(
    rank: int, world_size: int, master_addr: str, master_port: int, spec: dict[str, Any]
) -> None:
    """Exchange random proxies only, ``spec["rounds"]`` times, with PushSum or central averaging."""
    _init(rank, world_size, master_addr, master_port, spec["timeout_s"])
    try:
        flat = torch.randn(1, spec["dim"], generator=torch.Generator().manual_seed(rank))
        weights = torch.ones(1)
        push, central = (
            GlooPushSum(world_size=world_size),
            GlooCentralAveraging(world_size=world_size),
        )
        everyone = list(range(world_size))
        times = []
        for t in range(spec["warmup"] + spec["rounds"]):
            dist.barrier()  # time the exchange, not the wait for the slowest process
            start = time.perf_counter()
            if spec["scheme"] == "pushsum":
                flat, weights = push.exchange(t, [rank], flat, weights, everyone)
            else:
                flat = central.exchange_flat(rank, flat[0]).unsqueeze(0)
            if t >= spec["warmup"]:
                times.append(time.perf_counter() - start)
        sent = push.bytes_sent if spec["scheme"] == "pushsum" else central.bytes_sent
    finally:
        dist.destroy_process_group()
    result = {
        "rank": rank,
        "seconds": times,
        "bytes_sent": sent / (spec["warmup"] + spec["rounds"]),
    }
    (Path(spec["out_dir"]) / f"rank{rank}.json").write_text(json.dumps(result))
