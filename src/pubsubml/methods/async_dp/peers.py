"""Algorithm 1 with the learner and every data owner in its own OS process, over HTTP on 127.0.0.1.

The learner is the only server, a FastAPI application served by uvicorn
(:mod:`~pubsubml.methods.async_dp.peers_server`); owners are httpx clients that act when their own
rate-1 Poisson clock fires, ``clock_unit_s`` seconds per unit of time
(:mod:`~pubsubml.methods.async_dp.peers_client`).  Messages are strict JSON objects of numbers and
lists only (:mod:`~pubsubml.methods.async_dp.peers_protocol`), never pickled, and the learner
rejects any other field, so it can only ever hold what owners chose to send: their size n_i at
registration and Laplace-noised gradients of length p.  Every message the learner receives is
appended to an audit file.

Why HTTP and not ``torch.distributed``: its object collectives pickle, and its process groups need a
fixed world that joins in a synchronous rendezvous, whereas here owners come and go on their own
clocks and one request/response is the natural unit of an update (§3: "the learner only
communicates with that data owner until the update is over").

Each peer is a process started as ``python -m pubsubml.methods.async_dp.peers {learner,owner}
--config FILE``; it imports only its own side's web stack (FastAPI and uvicorn for the learner,
httpx for an owner).

References
----------
async-dp-cost-of-privacy.txt §3 (communication styles, Poisson clocks, Algorithm 1).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from pubsubml.errors import DataValidationError

__all__ = ["PeersResult", "main", "run_async_dp_processes"]


def _write_json(path: Path, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` so that a reader sees the whole file or none of it."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


@dataclasses.dataclass(frozen=True)
class PeersResult:
    """Outcome of a multi-process run.

    Attributes
    ----------
    theta_learner : ndarray of shape (p,)
    owners : ndarray of shape (k,)
        i_k in the order the learner applied the answers.
    times : ndarray of shape (k,)
        t_k in clock units.
    messages : list of dict
        Every message the learner received: ``{"path": ..., "body": ...}``.
    owner_reports : list of dict
        Per owner: answers given, pure-DP ε spent, how it stopped.
    """

    theta_learner: np.ndarray
    owners: np.ndarray
    times: np.ndarray
    messages: list[dict[str, Any]]
    owner_reports: list[dict[str, Any]]


def _spawn(role: str, cfg: dict[str, Any], workdir: Path, name: str) -> subprocess.Popen[bytes]:
    path = workdir / f"{name}.json"
    path.write_text(json.dumps(cfg))
    log = (workdir / f"{name}.log").open("wb")
    cmd = [sys.executable, "-m", "pubsubml.methods.async_dp.peers", role, "--config", str(path)]
    try:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()  # the child holds its own descriptor


def run_async_dp_processes(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    epsilons: Sequence[float],
    horizon: int,
    clip_norm: float,
    theta_max: float,
    reg: float,
    rho: float,
    style: str = "request",
    clock_unit_s: float = 0.01,
    broadcast_interval_s: float = 0.005,
    timeout_s: float = 60.0,
    seed: int = 0,
) -> PeersResult:
    """Run Algorithm 1 with one learner process and one process per owner; always cleans up.

    Parameters
    ----------
    parts : sequence of (X_i, y_i)
        Owner i's data, written to a file only owner i's process reads.
    epsilons : sequence of float
        ε_i of every owner.
    horizon, clip_norm, theta_max, reg, rho
        As for :class:`~pubsubml.methods.async_dp.learner.AsyncDPLearner` and
        :class:`~pubsubml.methods.async_dp.learner.DataOwner`.
    style : {"request", "broadcast"}
    clock_unit_s : float
        Seconds per unit of the owners' rate-1 Poisson clocks.
    broadcast_interval_s : float
    timeout_s : float
        Wall-clock bound of the whole run; every process is terminated (then killed) after it.
    seed : int

    Returns
    -------
    PeersResult

    Raises
    ------
    DataValidationError
        On mismatched inputs, an unknown style, or a run that did not finish within the timeout.
    """
    if style not in ("request", "broadcast") or len(epsilons) != len(parts) or not parts:
        raise DataValidationError("need one epsilon per owner and style 'request' or 'broadcast'")
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="async-dp-") as tmp:
        workdir = Path(tmp)
        deadline = time.monotonic() + timeout_s
        learner_cfg = _learner_config(
            workdir,
            parts,
            horizon=horizon,
            reg=reg,
            theta_max=theta_max,
            rho=rho,
            style=style,
            clock_unit_s=clock_unit_s,
            broadcast_interval_s=broadcast_interval_s,
            timeout_s=timeout_s,
        )
        try:
            _run_peers(procs, workdir, learner_cfg, parts, epsilons, clip_norm, seed, deadline)
            result, reports, messages = _read_outcome(workdir, len(parts))
        except (subprocess.TimeoutExpired, FileNotFoundError) as exc:
            raise DataValidationError(f"the multi-process run did not finish: {exc}") from exc
        finally:
            _stop(procs)
    if result["iterations"] < horizon:
        raise DataValidationError(
            f"only {result['iterations']} of {horizon} iterations ran in {timeout_s} s"
        )
    return PeersResult(
        theta_learner=np.asarray(result["theta_learner"]),
        owners=np.asarray(result["owners"], dtype=np.int64),
        times=np.asarray(result["times"]),
        messages=messages,
        owner_reports=reports,
    )


def _learner_config(
    workdir: Path,
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    horizon: int,
    reg: float,
    theta_max: float,
    rho: float,
    style: str,
    clock_unit_s: float,
    broadcast_interval_s: float,
    timeout_s: float,
) -> dict[str, Any]:
    """The learner process's settings, with the paths of its audit, result and port files."""
    return {
        "n_owners": len(parts),
        "n_features": int(parts[0][0].shape[1]),
        "horizon": horizon,
        "reg": reg,
        "theta_max": theta_max,
        "rho": rho,
        "style": style,
        "clock_unit_s": clock_unit_s,
        "broadcast_interval_s": broadcast_interval_s,
        "lease_s": 5.0,
        "deadline_s": timeout_s,
        "grace_s": max(0.2, 20 * clock_unit_s),
        "audit_path": str(workdir / "audit.jsonl"),
        "result_path": str(workdir / "result.json"),
        "port_path": str(workdir / "port.json"),
    }


def _run_peers(
    procs: list[subprocess.Popen[bytes]],
    workdir: Path,
    learner_cfg: dict[str, Any],
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    epsilons: Sequence[float],
    clip_norm: float,
    seed: int,
    deadline: float,
) -> None:
    """Start the learner, then every owner once it listens (each appended to ``procs`` as it
    starts, for the caller to stop), and wait for all of them until ``deadline``."""
    procs.append(_spawn("learner", learner_cfg, workdir, "learner"))
    url = _learner_url(workdir / "port.json", procs[0], deadline)
    for i, ((X, y), eps) in enumerate(zip(parts, epsilons, strict=True)):
        procs.append(_spawn_owner(i, X, y, float(eps), clip_norm, workdir, url, seed, learner_cfg))
    for proc in procs:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))


def _learner_url(port_path: Path, learner: subprocess.Popen[bytes], deadline: float) -> str:
    """The learner's address, once it has written the port it listens on."""
    while not port_path.exists():
        if time.monotonic() > deadline or learner.poll() is not None:
            raise DataValidationError("the learner process did not start")
        time.sleep(0.02)
    return f"http://127.0.0.1:{json.loads(port_path.read_text())}"


def _spawn_owner(
    i: int,
    X: np.ndarray,
    y: np.ndarray,
    epsilon: float,
    clip_norm: float,
    workdir: Path,
    url: str,
    seed: int,
    learner_cfg: dict[str, Any],
) -> subprocess.Popen[bytes]:
    """Start owner ``i`` on its own data file, which only its process reads; the horizon, θ_max,
    clock and deadline are the learner's (``learner_cfg``)."""
    data_path = workdir / f"owner{i}.npz"
    np.savez(data_path, X=np.asarray(X, dtype=np.float64), y=np.asarray(y, dtype=np.float64))
    owner_cfg = {
        "owner": i,
        "data_path": str(data_path),
        "epsilon": epsilon,
        "horizon": learner_cfg["horizon"],
        "clip_norm": clip_norm,
        "theta_max": learner_cfg["theta_max"],
        "seed": seed + 1000 * (i + 1),
        "url": url,
        "clock_unit_s": learner_cfg["clock_unit_s"],
        "deadline_s": learner_cfg["deadline_s"],
        "report_path": str(workdir / f"owner{i}-report.json"),
    }
    return _spawn("owner", owner_cfg, workdir, f"owner{i}")


def _read_outcome(
    workdir: Path, n_owners: int
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The learner's result, every owner's report and the learner's audit of messages."""
    result = json.loads((workdir / "result.json").read_text())
    reports = [json.loads((workdir / f"owner{i}-report.json").read_text()) for i in range(n_owners)]
    messages = [json.loads(line) for line in (workdir / "audit.jsonl").read_text().splitlines()]
    return result, reports, messages


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate every process still running, then kill any that does not exit in 2 s."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _PeerRole(enum.StrEnum):
    """Which side of Algorithm 1 a peer process runs."""

    LEARNER = "learner"
    OWNER = "owner"


def _run_peer(
    role: Annotated[_PeerRole, typer.Argument(help="The learner (server) or one data owner.")],
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            help="JSON settings written by run_async_dp_processes.",
            exists=True,
            dir_okay=False,
        ),
    ],
) -> None:
    """Run one peer of Algorithm 1 and write its outcome where its settings say."""
    cfg = json.loads(config.read_text())
    if not math.isfinite(cfg["deadline_s"]):
        raise DataValidationError("deadline_s must be finite")
    # Each side imports only its own web stack: FastAPI and uvicorn, or httpx.
    if role is _PeerRole.LEARNER:
        from pubsubml.methods.async_dp.peers_server import serve_learner

        port_path = Path(cfg["port_path"])
        result = serve_learner(cfg, on_listening=lambda port: _write_json(port_path, port))
        _write_json(Path(cfg["result_path"]), result)
    else:
        from pubsubml.methods.async_dp.peers_client import run_owner

        _write_json(Path(cfg["report_path"]), run_owner(cfg))


def main(argv: Sequence[str] | None = None) -> None:
    """Process entry point: ``python -m pubsubml.methods.async_dp.peers {learner,owner} --config F``.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name (default: ``sys.argv[1:]``).

    Raises
    ------
    SystemExit
        With a non-zero code on bad arguments (usage on stderr).
    """
    command = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    command.command()(_run_peer)
    try:
        command(args=None if argv is None else list(argv), prog_name="async_dp_peers")
    except SystemExit as exc:  # click ends every run with SystemExit; only failures go on
        if exc.code:
            raise


if __name__ == "__main__":
    main()
