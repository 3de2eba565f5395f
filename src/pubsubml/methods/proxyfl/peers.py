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

from pubsubml.errors import DataValidationError, PubsubmlError
from pubsubml.methods.proxyfl.peers_gloo import GlooCentralAveraging, GlooPushSum
from pubsubml.methods.proxyfl.peers_process import run_comm_bench, run_peer
from pubsubml.methods.proxyfl.protocol import DMLConfig

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
        Private architecture of each client (:data:`~pubsubml.methods.proxyfl.architectures.ARCHITECTURES`).
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
