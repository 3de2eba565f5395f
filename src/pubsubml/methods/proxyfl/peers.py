"""ProxyFL between real peer processes: PushSum over ``torch.distributed`` (gloo), and a launcher.

Each client is one OS process holding a :class:`~pubsubml.methods.proxyfl.local.ClientCohort` of
one client and running the same :func:`~pubsubml.methods.proxyfl.protocol.run_rounds` as the simulation,
with :class:`GlooPushSum` as its communicator.  Per round a client

1. joins a tiny membership all-reduce (one float per client: "I share this round"), so that clients
   that reached their ε budget leave the exponential graph and the others re-route around them;
2. ``isend``s its PushSum message (one flat float32 tensor, ``share·[w θ, w]``) to its out-peer and
   ``irecv``s one from its in-peer (:func:`~pubsubml.methods.proxyfl.pushsum.exponential_edges`).

Only tensors cross process boundaries: ``dist.isend/irecv/all_reduce`` of float tensors, never
``send_object_list``/``broadcast_object_list`` (which pickle).  The launcher hands each process its
own data as an ``.npz`` read with ``allow_pickle=False`` and a JSON spec; results come back as JSON
and safetensors files.  The same launcher works across machines: start it on each machine with the
ranks it hosts, the same ``--clients`` and the address and port of rank 0's machine.

A client that dropped out stays in the process group until the last round (gloo groups are fixed)
and only takes part in the membership all-reduce; it sends no model.

References
----------
proxyfl.txt §3.4 and §4 (exponential graph, one message per client per round; the authors used
OpenMPI); PyTorch ``torch.distributed`` point-to-point communication with the gloo backend.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from safetensors.torch import save_file
from torch import Tensor

from pubsubml.errors import DataValidationError, PubsubmlError
from pubsubml.methods.proxyfl.protocol import ClientCohort, DMLConfig, ProxyFL
from pubsubml.methods.proxyfl.pushsum import combine_messages, exponential_edges, push_message

__all__ = [
    "GlooCentralAveraging",
    "GlooPushSum",
    "PeerError",
    "free_port",
    "launch",
    "launch_comm_bench",
    "main",
    "write_client_data",
]


class PeerError(PubsubmlError, RuntimeError):
    """A peer process failed or did not finish in time."""


def _wait(requests: Sequence[dist.Work | None]) -> None:
    for request in requests:
        if request is not None:
            request.wait()


class GlooPushSum:
    """PushSum between processes: one client per process, rank = client id.

    Attributes
    ----------
    bytes_sent : int
        Bytes of the PushSum messages this process sent (``4 (d + 1)`` per round it shared).
    sent_numels : list of int
        Number of values of every message sent (what left the client, for audits and tests).
    exchange_seconds, membership_seconds : list of float
        Per-round wall time of the PushSum exchange and of the membership all-reduce.
    """

    def __init__(self, *, world_size: int, share: float = 0.5) -> None:
        self.world_size, self.share = world_size, share
        self.bytes_sent = 0
        self.sent_numels: list[int] = []
        self.exchange_seconds: list[float] = []
        self.membership_seconds: list[float] = []

    def membership(self, client_ids: Sequence[int], willing: Tensor) -> Tensor:
        """All-reduce of one flag per client (float32 tensor of shape (K,))."""
        start = time.perf_counter()
        flags = torch.zeros(self.world_size, dtype=torch.float32)
        flags[list(client_ids)] = willing.to(torch.float32)
        dist.all_reduce(flags)
        self.membership_seconds.append(time.perf_counter() - start)
        return flags > 0.5

    def exchange(
        self,
        round_: int,
        client_ids: Sequence[int],
        theta: Tensor,
        weights: Tensor,
        participants: Sequence[int],
    ) -> tuple[Tensor, Tensor]:
        """Send ``share·[w θ, w]`` to the out-peer, receive from the in-peer, de-bias."""
        (rank,) = client_ids
        start = time.perf_counter()
        edges = exponential_edges(round_, participants)
        if rank not in participants or not edges:
            self.exchange_seconds.append(0.0)
            return theta, weights
        out = next(e.receiver for e in edges if e.sender == rank)
        src = next(e.sender for e in edges if e.receiver == rank)
        message, kept = push_message(theta[0], weights[0], self.share)
        received = torch.empty_like(message)
        requests = [dist.isend(message, dst=out), dist.irecv(received, src=src)]
        _wait(requests)
        new_theta, new_w = combine_messages(kept, [received])
        self.bytes_sent += message.numel() * message.element_size()
        self.sent_numels.append(message.numel())
        self.exchange_seconds.append(time.perf_counter() - start)
        return new_theta.unsqueeze(0), new_w.reshape(1)


class GlooCentralAveraging:
    """Central averaging between processes, rank 0 doubling as the server (for the comparison).

    Every client sends its flat model to rank 0, which averages and sends the mean back: the
    server handles ``2 (K − 1)`` messages per round against one message per client for PushSum.
    """

    def __init__(self, *, world_size: int) -> None:
        self.world_size = world_size
        self.bytes_sent = 0
        self.exchange_seconds: list[float] = []

    def exchange_flat(self, rank: int, flat: Tensor) -> Tensor:
        """The mean of all ranks' ``flat`` tensors, computed at rank 0."""
        start = time.perf_counter()
        if rank == 0:
            buffers = [torch.empty_like(flat) for _ in range(1, self.world_size)]
            _wait([dist.irecv(b, src=r) for r, b in enumerate(buffers, start=1)])
            mean = torch.stack([flat, *buffers]).mean(0)
            _wait([dist.isend(mean, dst=r) for r in range(1, self.world_size)])
            self.bytes_sent += (self.world_size - 1) * flat.numel() * flat.element_size()
        else:
            dist.send(flat, dst=0)
            mean = torch.empty_like(flat)
            dist.recv(mean, src=0)
            self.bytes_sent += flat.numel() * flat.element_size()
        self.exchange_seconds.append(time.perf_counter() - start)
        return mean


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for a local launch)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_client_data(
    directory: Path,
    clients: Sequence[tuple[np.ndarray, np.ndarray]],
    tests: Sequence[tuple[np.ndarray, np.ndarray]],
    global_test: tuple[np.ndarray, np.ndarray],
    ranks: Sequence[int] | None = None,
) -> None:
    """Write each client's data to ``client{k}.npz`` (plain arrays; read with allow_pickle=False)."""
    directory.mkdir(parents=True, exist_ok=True)
    for k in ranks if ranks is not None else range(len(clients)):
        np.savez(
            directory / f"client{k}.npz",
            X=clients[k][0].astype(np.float32),
            y=clients[k][1].astype(np.int64),
            X_local=tests[k][0].astype(np.float32),
            y_local=tests[k][1].astype(np.int64),
            X_global=global_test[0].astype(np.float32),
            y_global=global_test[1].astype(np.int64),
        )


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
    from pubsubml.methods.proxyfl.models import private_factory

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


def _spawn(
    spec: dict[str, Any],
    *,
    world_size: int,
    ranks: Sequence[int],
    master_addr: str,
    master_port: int,
    timeout_s: float,
) -> list[dict[str, Any]]:
    out = Path(spec["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    procs = []
    for rank in ranks:
        cmd = [sys.executable, "-m", "pubsubml.methods.proxyfl.peers", "--rank", str(rank)]
        cmd += ["--world-size", str(world_size), "--master-addr", master_addr]
        cmd += ["--master-port", str(master_port), "--spec", str(spec_path)]
        log = open(out / f"rank{rank}.log", "w")
        procs.append(
            (rank, subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log)
        )
    deadline = time.monotonic() + timeout_s
    failed: list[int] = []
    running = {rank: proc for rank, proc, _ in procs}
    while running and not failed and time.monotonic() < deadline:
        for rank, proc in list(running.items()):
            code = proc.poll()
            if code is not None:
                del running[rank]
                if code != 0:
                    failed.append(rank)
        time.sleep(0.05)
    for rank, proc in running.items():  # a peer failed or time is up: stop the others
        proc.kill()
        proc.wait()
        if not failed:
            failed.append(rank)
    for _, _, log in procs:
        log.close()
    if failed:
        tail = (out / f"rank{failed[0]}.log").read_text()[-2000:]
        raise PeerError(f"peer processes {failed} failed; log of rank {failed[0]}:\n{tail}")
    return [json.loads((out / f"rank{r}.json").read_text()) for r in ranks]


def launch(
    *,
    n_clients: int,
    data_dir: Path,
    out_dir: Path,
    n_classes: int,
    input_shape: tuple[int, ...],
    rounds: int,
    config: DMLConfig,
    private: Sequence[str],
    proxy_hidden: tuple[int, ...] = (200, 200),
    push_share: float = 0.5,
    seed: int = 0,
    ranks: Sequence[int] | None = None,
    master_addr: str = "127.0.0.1",
    master_port: int | None = None,
    timeout_s: float = 600.0,
) -> list[dict[str, Any]]:
    """Start one process per client in ``ranks`` (default all) and wait for them.

    Parameters
    ----------
    n_clients : int
        World size ``K`` (all clients, on every machine).
    data_dir : Path
        Holds ``client{k}.npz`` for the local ranks (:func:`write_client_data`).
    out_dir : Path
        Receives ``rank{k}.json``, ``proxy{k}.safetensors`` and ``rank{k}.log``.
    private : sequence of str
        Private architecture of each client (:data:`~pubsubml.methods.proxyfl.models.ARCHITECTURES`).
    ranks : sequence of int, optional
        Ranks to start on this machine.
    master_addr, master_port : str, int
        Address of rank 0's machine; the port defaults to a free local one.

    Returns
    -------
    list of dict
        The local ranks' results (ε, steps, bytes sent, timings, evaluations).

    Raises
    ------
    PeerError
        A process failed or timed out (its log is quoted).
    DataValidationError
        Inconsistent arguments.
    """
    ranks = list(range(n_clients)) if ranks is None else list(ranks)
    if len(private) != n_clients or any(not 0 <= r < n_clients for r in ranks):
        raise DataValidationError("need one private architecture per client and ranks in range")
    spec = {
        "n_classes": n_classes,
        "input_shape": list(input_shape),
        "rounds": rounds,
        "config": asdict(config),
        "private": list(private),
        "proxy_hidden": list(proxy_hidden),
        "push_share": push_share,
        "seed": seed,
        "data_dir": str(data_dir),
        "out_dir": str(out_dir),
        "timeout_s": timeout_s,
        "mode": "train",
    }
    port = master_port if master_port is not None else free_port()
    return _spawn(
        spec,
        world_size=n_clients,
        ranks=ranks,
        master_addr=master_addr,
        master_port=port,
        timeout_s=timeout_s,
    )


def launch_comm_bench(
    *,
    n_clients: int,
    scheme: str,
    dim: int,
    rounds: int,
    out_dir: Path,
    warmup: int = 3,
    timeout_s: float = 300.0,
) -> list[dict[str, Any]]:
    """Time ``rounds`` exchanges of ``dim`` float32 values between ``n_clients`` local processes.

    ``scheme`` is ``"pushsum"`` (exponential graph) or ``"central"`` (rank 0 averages).
    """
    if scheme not in ("pushsum", "central"):
        raise DataValidationError(f"scheme must be 'pushsum' or 'central', got {scheme!r}")
    spec = {"mode": "comm", "scheme": scheme, "dim": dim, "rounds": rounds, "warmup": warmup}
    spec |= {"out_dir": str(out_dir), "timeout_s": timeout_s}
    return _spawn(
        spec,
        world_size=n_clients,
        ranks=range(n_clients),
        master_addr="127.0.0.1",
        master_port=free_port(),
        timeout_s=timeout_s,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of one peer process (started by :func:`launch`)."""
    parser = argparse.ArgumentParser(description="one ProxyFL peer process")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--spec", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    spec = json.loads(args.spec.read_text())
    run = run_comm_bench if spec["mode"] == "comm" else run_peer
    run(args.rank, args.world_size, args.master_addr, args.master_port, spec)


if __name__ == "__main__":
    main()
