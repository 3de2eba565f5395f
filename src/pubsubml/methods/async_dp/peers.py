"""Algorithm 1 with the learner and every data owner in its own OS process, over HTTP on 127.0.0.1.

The learner is the only server (stdlib ``ThreadingHTTPServer``); owners are clients that act when
their own rate-1 Poisson clock fires (``clock_unit_s`` seconds per unit of time).  Messages are
JSON objects of numbers and lists only, never pickled, and the learner rejects any other field,
so it can only ever hold what owners chose to send: their size n_i at registration and Laplace-
noised gradients of length p.  Every message the learner receives is appended to an audit file.

Why HTTP and not ``torch.distributed``: its object collectives pickle, and its process groups need a
fixed world that joins in a synchronous rendezvous, whereas here owners come and go on their own
clocks and one request/response is the natural unit of an update (§3: "the learner only
communicates with that data owner until the update is over").

Styles (§3): ``request`` — the learner listens and serves the first owner that asks while it is
idle; ``broadcast`` — the learner opens a query round every ``broadcast_interval_s`` seconds once
idle, and the first owner whose clock fires while a round is open answers it.

References
----------
async-dp-cost-of-privacy.txt §3 (communication styles, Poisson clocks, Algorithm 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from pubsubml.errors import DataValidationError, PrivacyBudgetExceededError, PubsubmlError
from pubsubml.methods.async_dp.learner import AsyncDPLearner, DataOwner

__all__ = ["PeersResult", "main", "run_async_dp_processes"]

_MAX_BODY = 1 << 16  # bytes: far below any raw data set, far above a p-vector of floats
_FIELDS = {
    "/register": {"owner", "n_records"},
    "/request": {"owner"},
    "/answer": {"owner", "ticket", "gradient"},
    "/refuse": {"owner", "ticket"},
}


def _post(url: str, payload: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    data = json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:  # the learner refused this message: report and go on
        return dict(json.loads(exc.read() or b"{}")) | {"status": "error"}


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


class _LearnerState:
    """The learner's side: Algorithm 1 state plus the lease of the owner being served."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.lock = threading.Lock()
        self.sizes: dict[int, int] = {}
        self.learner: AsyncDPLearner | None = None
        self.lease: tuple[int, int, np.ndarray, float] | None = None  # owner, ticket, θ̂, expiry
        self.round_open = False
        self.tickets = 0
        self.start = 0.0
        self.history: list[tuple[int, float]] = []
        self.done = threading.Event()
        self.audit = Path(cfg["audit_path"]).open("a")

    def record(self, path: str, body: Any) -> None:
        self.audit.write(json.dumps({"path": path, "body": body}) + "\n")
        self.audit.flush()

    def handle(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        owner = body["owner"]
        if type(owner) is not int or not 0 <= owner < self.cfg["n_owners"]:
            raise DataValidationError(f"unknown owner {owner!r}")
        if path == "/register":
            return self._register(owner, body["n_records"])
        if self.done.is_set():
            return {"status": "done"}
        if self.learner is None:
            return {"status": "wait"}
        if self.lease is not None and time.monotonic() > self.lease[3]:
            self.lease = None  # the owner vanished mid-update: free the learner
        if path == "/request":
            return self._request(owner)
        if self.lease is None or (owner, body["ticket"]) != self.lease[:2]:
            raise DataValidationError("no open query for this owner and ticket")
        theta_hat = self.lease[2]
        self.lease = None
        if path == "/answer":
            self.learner.update(owner, theta_hat, np.asarray(body["gradient"], dtype=np.float64))
            self.history.append((owner, (time.monotonic() - self.start) / self.cfg["clock_unit_s"]))
            if self.learner.iteration >= self.cfg["horizon"]:
                self.done.set()
        return {"status": "ok"}

    def _register(self, owner: int, n_records: Any) -> dict[str, Any]:
        if not isinstance(n_records, int) or n_records < 1:
            raise DataValidationError("n_records must be a positive int")
        self.sizes[owner] = n_records
        if self.learner is None and len(self.sizes) == self.cfg["n_owners"]:
            self.learner = AsyncDPLearner(
                n_records=[self.sizes[i] for i in range(self.cfg["n_owners"])],
                n_features=self.cfg["n_features"],
                horizon=self.cfg["horizon"],
                reg=self.cfg["reg"],
                theta_max=self.cfg["theta_max"],
                rho=self.cfg["rho"],
            )
            self.start = time.monotonic()
        return {"status": "ok"}

    def _request(self, owner: int) -> dict[str, Any]:
        assert self.learner is not None
        if self.lease is not None or (self.cfg["style"] == "broadcast" and not self.round_open):
            return {"status": "wait"}
        self.round_open = False
        self.tickets += 1
        theta_hat = self.learner.query(owner)
        self.lease = (owner, self.tickets, theta_hat, time.monotonic() + self.cfg["lease_s"])
        return {"status": "query", "ticket": self.tickets, "theta": theta_hat.tolist()}

    def open_rounds(self) -> None:
        """Broadcast style: open a query round every interval while idle."""
        while not self.done.wait(self.cfg["broadcast_interval_s"]):
            with self.lock:
                if self.learner is not None and self.lease is None:
                    self.round_open = True

    def finish(self) -> None:
        self.audit.close()
        learner = self.learner
        _write_json(
            Path(self.cfg["result_path"]),
            {
                "theta_learner": None if learner is None else learner.theta_learner.tolist(),
                "iterations": 0 if learner is None else learner.iteration,
                "owners": [o for o, _ in self.history],
                "times": [t for _, t in self.history],
            },
        )


def _serve_learner(cfg: dict[str, Any]) -> None:
    state = _LearnerState(cfg)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # silence per-request logging
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                if length > _MAX_BODY or self.path not in _FIELDS:
                    raise DataValidationError("unknown path or body too large")
                body = json.loads(self.rfile.read(length))
                with state.lock:
                    state.record(self.path, body)
                    if not isinstance(body, dict) or set(body) != _FIELDS[self.path]:
                        raise DataValidationError(
                            f"fields must be exactly {sorted(_FIELDS[self.path])}"
                        )
                    reply, code = state.handle(self.path, body), 200
            except (PubsubmlError, ValueError, KeyError, TypeError) as exc:
                reply, code = {"status": "error", "detail": str(exc)}, 400
            data = json.dumps(reply).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if cfg["style"] == "broadcast":
        threading.Thread(target=state.open_rounds, daemon=True).start()
    _write_json(Path(cfg["port_path"]), server.server_address[1])
    state.done.wait(cfg["deadline_s"])
    time.sleep(cfg["grace_s"])  # let owners hear "done"
    server.shutdown()
    with state.lock:
        state.finish()


def _run_owner(cfg: dict[str, Any]) -> None:
    with np.load(cfg["data_path"], allow_pickle=False) as data:  # never allow pickles here
        X, y = data["X"], data["y"]
    owner = DataOwner(
        site=f"owner{cfg['owner']}",
        X=X,
        y=y,
        epsilon=cfg["epsilon"],
        horizon=cfg["horizon"],
        clip_norm=cfg["clip_norm"],
        theta_max=cfg["theta_max"],
        rng=np.random.default_rng(cfg["seed"]),
    )
    url, me = cfg["url"], cfg["owner"]
    clock = np.random.default_rng(cfg["seed"] + 1)
    deadline = time.monotonic() + cfg["deadline_s"]
    status = "refused"
    try:
        _post(url + "/register", {"owner": me, "n_records": owner.n_records})
        while time.monotonic() < deadline:
            time.sleep(clock.exponential(cfg["clock_unit_s"]))  # this owner's Poisson clock
            reply = _post(url + "/request", {"owner": me})
            if reply["status"] == "done":
                status = "done"
                break
            if reply["status"] != "query":
                continue
            try:
                gradient = owner.answer(reply["theta"]).tolist()
            except PrivacyBudgetExceededError:
                _post(url + "/refuse", {"owner": me, "ticket": reply["ticket"]})
                break
            except DataValidationError:  # a query outside Θ: refuse it, nothing was charged
                _post(url + "/refuse", {"owner": me, "ticket": reply["ticket"]})
                continue
            _post(url + "/answer", {"owner": me, "ticket": reply["ticket"], "gradient": gradient})
    except (urllib.error.URLError, OSError):
        status = "learner gone"
    _write_json(
        Path(cfg["report_path"]),
        {"answers": owner.answers_given, "spent_epsilon": owner.spent_epsilon(), "status": status},
    )


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
        learner_cfg = {
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
        try:
            procs.append(_spawn("learner", learner_cfg, workdir, "learner"))
            port_path = workdir / "port.json"
            while not port_path.exists():
                if time.monotonic() > deadline or procs[0].poll() is not None:
                    raise DataValidationError("the learner process did not start")
                time.sleep(0.02)
            url = f"http://127.0.0.1:{json.loads(port_path.read_text())}"
            for i, ((X, y), eps) in enumerate(zip(parts, epsilons, strict=True)):
                data_path = workdir / f"owner{i}.npz"
                np.savez(
                    data_path, X=np.asarray(X, dtype=np.float64), y=np.asarray(y, dtype=np.float64)
                )
                owner_cfg = {
                    "owner": i,
                    "data_path": str(data_path),
                    "epsilon": float(eps),
                    "horizon": horizon,
                    "clip_norm": clip_norm,
                    "theta_max": theta_max,
                    "seed": seed + 1000 * (i + 1),
                    "url": url,
                    "clock_unit_s": clock_unit_s,
                    "deadline_s": timeout_s,
                    "report_path": str(workdir / f"owner{i}-report.json"),
                }
                procs.append(_spawn("owner", owner_cfg, workdir, f"owner{i}"))
            for proc in procs:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            result = json.loads((workdir / "result.json").read_text())
            reports = [
                json.loads((workdir / f"owner{i}-report.json").read_text())
                for i in range(len(parts))
            ]
            messages = [
                json.loads(line) for line in (workdir / "audit.jsonl").read_text().splitlines()
            ]
        except (subprocess.TimeoutExpired, FileNotFoundError) as exc:
            raise DataValidationError(f"the multi-process run did not finish: {exc}") from exc
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
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


def main(argv: Sequence[str] | None = None) -> None:
    """Process entry point: ``python -m pubsubml.methods.async_dp.peers {learner,owner} --config F``."""
    parser = argparse.ArgumentParser(prog="async_dp_peers")
    parser.add_argument("role", choices=["learner", "owner"])
    parser.add_argument("--config", required=True, type=Path)
    args = parser.parse_args(argv)
    cfg = json.loads(args.config.read_text())
    if not math.isfinite(cfg["deadline_s"]):
        raise DataValidationError("deadline_s must be finite")
    (_serve_learner if args.role == "learner" else _run_owner)(cfg)


if __name__ == "__main__":
    main()
