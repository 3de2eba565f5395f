"""Algorithm 1 with the learner and the owners in separate OS processes (HTTP on 127.0.0.1).

The end-to-end runs start real processes; the protocol tests run the learner's uvicorn server in a
thread of this process, on an ephemeral loopback port, and talk to it with httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from socket import IPPROTO_TCP, TCP_NODELAY
from typing import Any, NamedTuple

import httpx
import numpy as np
import pytest

from pubsubml.errors import DataValidationError
from pubsubml.methods.async_dp.learner import AsyncDPLearner
from pubsubml.methods.async_dp.peers import main, run_async_dp_processes
from pubsubml.methods.async_dp.peers_client import learner_client, run_owner
from pubsubml.methods.async_dp.peers_protocol import MAX_BODY_BYTES
from pubsubml.methods.async_dp.peers_server import _loopback_listener, serve_learner
from pubsubml.methods.async_dp.theory import gradient_norm_bound


@pytest.mark.parametrize("style", ["request", "broadcast"])
def test_processes_run_algorithm_1_and_learner_never_sees_rows(style: str) -> None:
    rng = np.random.default_rng(3)
    p, horizon, eps = 3, 12, [2.0, 4.0]
    parts = []
    for n in (60, 90):
        X = rng.uniform(-0.5, 0.5, (n, p))
        parts.append((X, np.clip(X @ [0.3, -0.2, 0.1] + 0.1 * rng.normal(size=n), -1, 1)))
    xi = gradient_norm_bound(x_l1_bound=1.5, y_abs_bound=1.0, theta_max=1.0)
    result = run_async_dp_processes(
        parts, epsilons=eps, horizon=horizon, clip_norm=xi, theta_max=1.0, reg=1e-3, rho=1.0,
        style=style, clock_unit_s=0.01, timeout_s=90.0, seed=1,
    )  # fmt: skip

    # Algorithm 1 ran T iterations, one owner at a time, in increasing time.
    assert len(result.owners) == horizon and np.all(np.diff(result.times) > 0)
    assert result.theta_learner.shape == (p,) and np.abs(result.theta_learner).max() <= 1.0
    # Each owner enforced its own budget: k_i answers cost k_i·ε_i/T.
    answers = [r["answers"] for r in result.owner_reports]
    assert answers == np.bincount(result.owners, minlength=2).tolist()
    for report, budget in zip(result.owner_reports, eps, strict=True):
        assert report["spent_epsilon"] == pytest.approx(report["answers"] * budget / horizon)

    # The learner received registrations, requests and p-vectors of noisy gradients, nothing else.
    raw = {float(v) for X, y in parts for v in np.concatenate([X.ravel(), y])}
    allowed = {"/register": {"owner", "n_records"}, "/request": {"owner"},
               "/answer": {"owner", "ticket", "gradient"}}  # fmt: skip
    gradients = 0
    for message in result.messages:
        body = message["body"]
        assert set(body) == allowed[message["path"]]
        assert all(isinstance(v, int) for k, v in body.items() if k != "gradient")
        if message["path"] == "/answer":
            gradients += 1
            assert len(body["gradient"]) == p and not raw & set(body["gradient"])
    assert gradients == horizon
    assert sorted(m["body"]["n_records"] for m in result.messages if m["path"] == "/register") == [
        60,
        90,
    ]


def _children() -> set[int]:
    """PIDs of this process's children (Linux /proc)."""
    me, found = os.getpid(), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.add(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_run_is_bounded_and_cleans_up() -> None:
    before = _children()
    X = np.zeros((5, 2))
    with pytest.raises(DataValidationError, match="did not"):
        run_async_dp_processes(
            [(X, np.zeros(5))] * 2, epsilons=[1.0, 1.0], horizon=10**6, clip_norm=1.0,
            theta_max=1.0, reg=1e-3, rho=1.0, timeout_s=1.0,
        )  # fmt: skip
    assert _children() <= before


# --- the learner's HTTP interface, served by uvicorn in a thread of this process ---------------

P, N_RECORDS, REG = 3, 50, 1e-3
GOOD = [0.5, -0.25, 0.125]  # a well-formed answer: p finite floats


class _Learner:
    """A learner served on 127.0.0.1 by :func:`serve_learner` in a thread, and a client of it."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.outcome: dict[str, Any] = {}
        ports: queue.Queue[int] = queue.Queue()
        self.thread = threading.Thread(target=self._serve, args=(ports,), daemon=True)
        self.thread.start()
        self.port = ports.get(timeout=30)
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = learner_client(self.url)

    def _serve(self, ports: queue.Queue[int]) -> None:
        self.outcome["result"] = serve_learner(self.cfg, on_listening=ports.put)

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(path, json=body)

    def result(self) -> dict[str, Any]:
        """Wait until the server stopped (T updates or deadline); its result."""
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        return dict(self.outcome["result"])

    def audit(self) -> list[dict[str, Any]]:
        lines = Path(self.cfg["audit_path"]).read_text().splitlines()
        return [json.loads(line) for line in lines]


@contextlib.contextmanager
def _serving(tmp_path: Path, **overrides: Any) -> Iterator[_Learner]:
    cfg = {
        "n_owners": 1, "n_features": P, "horizon": 2, "reg": REG, "theta_max": 1.0, "rho": 1.0,
        "style": "request", "clock_unit_s": 0.005, "broadcast_interval_s": 0.005,
        "lease_s": 30.0, "deadline_s": 20.0, "grace_s": 0.05,
        "audit_path": str(tmp_path / "audit.jsonl"),
    } | overrides  # fmt: skip
    learner = _Learner(cfg)
    try:
        yield learner
    finally:
        learner.client.close()
        learner.thread.join(timeout=cfg["deadline_s"] + 10)


def _reference(answers: int) -> AsyncDPLearner:
    """The same learner in this process after ``answers`` updates of owner 0 with GOOD."""
    learner = AsyncDPLearner(
        n_records=[N_RECORDS], n_features=P, horizon=2, reg=REG, theta_max=1.0, rho=1.0
    )
    for _ in range(answers):
        learner.update(0, learner.query(0), np.array(GOOD))
    return learner


class Bad(NamedTuple):
    """A bad request: what is sent, the reply it must get, and whether the audit lists it."""

    method: str
    path: str
    body: dict[str, Any] | bytes | list[bytes] | None  # JSON, raw bytes, or chunks of a body
    status: int
    detail: str  # words the reply's detail must hold
    audited: bool  # parsed as JSON on one of the learner's paths


def _answer(**fields: Any) -> dict[str, Any]:
    return {"owner": 0, "ticket": 1, "gradient": GOOD} | fields


_OVERSIZED = json.dumps(_answer(gradient=[0.1] * (MAX_BODY_BYTES // 4))).encode()

BAD_REQUESTS = {
    "not JSON": Bad("POST", "/answer", b'{"owner": 0, "ticket": 1, "gradient": [0.5,', 400,
                    "body is not JSON", audited=False),
    "a JSON list": Bad("POST", "/answer", b"[0, 1, [0.5, -0.25, 0.125]]", 400,
                       "valid dictionary", audited=True),
    "another field": Bad("POST", "/answer", _answer(rows=[[1.0, 2.0, 3.0]]), 400,
                         "rows: Extra inputs", audited=True),
    "a missing field": Bad("POST", "/answer", {"owner": 0, "ticket": 1}, 400,
                           "gradient: Field required", audited=True),
    "a bool for the owner": Bad("POST", "/answer", _answer(owner=False), 400,
                                "owner: Input should be a valid integer", audited=True),
    "numbers as strings": Bad("POST", "/answer", _answer(gradient=["0.5", "-0.25", "0.125"]), 400,
                              "gradient.0: Input should be a valid number", audited=True),
    "a nested gradient": Bad("POST", "/answer", _answer(gradient=[GOOD]), 400,
                             "gradient.0: Input should be a valid number", audited=True),
    "a short gradient": Bad("POST", "/answer", _answer(gradient=GOOD[:2]), 400,
                            "length 3, got 2", audited=True),
    "a long gradient": Bad("POST", "/answer", _answer(gradient=[*GOOD, 0.0]), 400,
                           "length 3, got 4", audited=True),
    "NaN": Bad("POST", "/answer", b'{"owner": 0, "ticket": 1, "gradient": [NaN, 0.1, 0.2]}', 400,
               "gradient.0: Input should be a finite number", audited=True),
    "infinity": Bad("POST", "/answer", b'{"owner": 0, "ticket": 1, "gradient": [0, -Infinity, 0]}',
                    400, "gradient.1: Input should be a finite number", audited=True),
    "a wrong ticket": Bad("POST", "/answer", _answer(ticket=2), 400, "no open query",
                          audited=True),
    "an unknown owner": Bad("POST", "/answer", _answer(owner=1), 400, "unknown owner",
                            audited=True),
    "a refusal of another ticket": Bad("POST", "/refuse", {"owner": 0, "ticket": 7}, 400,
                                       "no open query", audited=True),
    "a body over 64 KiB": Bad("POST", "/answer", _OVERSIZED, 413, "is over 65536", audited=False),
    "a chunked body over 64 KiB": Bad("POST", "/answer", [_OVERSIZED[:40000], _OVERSIZED[40000:]],
                                      413, "Content Too Large", audited=False),
    "an unknown path": Bad("POST", "/gradient", {"owner": 0}, 404, "Not Found", audited=False),
    "another method": Bad("GET", "/answer", None, 405, "Method Not Allowed", audited=False),
}  # fmt: skip


def _send(client: httpx.Client, bad: Bad) -> httpx.Response:
    if bad.body is None or isinstance(bad.body, dict):
        return client.request(bad.method, bad.path, json=bad.body)
    json_type = {"content-type": "application/json"}
    if isinstance(bad.body, bytes):
        return client.request(bad.method, bad.path, content=bad.body, headers=json_type)
    chunked = client.request(bad.method, bad.path, content=iter(bad.body), headers=json_type)
    assert "content-length" not in chunked.request.headers  # the server counts bytes as they come
    return chunked


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
def test_bad_request_gets_4xx_json_and_changes_nothing(tmp_path: Path, name: str) -> None:
    bad = BAD_REQUESTS[name]
    with _serving(tmp_path) as learner:
        registered = learner.post("/register", {"owner": 0, "n_records": N_RECORDS})
        assert registered.json() == {"status": "ok"}
        query = learner.post("/request", {"owner": 0}).json()
        assert query == {"status": "query", "ticket": 1, "theta": [0.0, 0.0, 0.0]}

        reply = _send(learner.client, bad)
        assert reply.status_code == bad.status
        assert reply.headers["content-type"] == "application/json"
        assert reply.json()["status"] == "error" and bad.detail in reply.json()["detail"]

        # The query is still open and the learner unchanged: the run goes on as if never sent.
        assert learner.post("/answer", _answer()).json() == {"status": "ok"}
        second = learner.post("/request", {"owner": 0}).json()
        assert second["ticket"] == 2
        assert second["theta"] == pytest.approx(_reference(1).query(0).tolist(), abs=1e-15)
        assert learner.post("/answer", _answer(ticket=2)).json() == {"status": "ok"}
        result = learner.result()
    assert result["iterations"] == 2 and result["owners"] == [0, 0]
    assert result["theta_learner"] == pytest.approx(_reference(2).theta_learner.tolist())
    assert np.abs(result["theta_learner"]).max() > 0
    # The audit lists what the learner received as JSON, rejected messages included, in order.
    paths = [m["path"] for m in learner.audit()]
    good = ["/register", "/request", "/answer", "/request", "/answer"]
    assert paths == ([*good[:2], bad.path, *good[2:]] if bad.audited else good)


def test_owner_over_budget_refuses_and_sends_no_gradient(tmp_path: Path) -> None:
    """The learner asks for more than T answers; the owner gives T, then refuses (Theorem 1)."""
    rng = np.random.default_rng(5)
    X = rng.uniform(-0.5, 0.5, (N_RECORDS, P))
    data_path = tmp_path / "owner0.npz"
    np.savez(data_path, X=X, y=np.clip(X @ [0.3, -0.2, 0.1], -1, 1))
    owner_horizon, epsilon = 3, 1.5
    with _serving(tmp_path, horizon=owner_horizon + 5, deadline_s=2.5) as learner:
        report = run_owner(
            {
                "owner": 0, "data_path": str(data_path), "epsilon": epsilon,
                "horizon": owner_horizon, "clip_norm": 2.0, "theta_max": 1.0, "seed": 7,
                "url": learner.url, "clock_unit_s": 0.005, "deadline_s": 20.0,
            }
        )  # fmt: skip
        result = learner.result()
    assert report == {"answers": owner_horizon, "spent_epsilon": pytest.approx(epsilon),
                      "status": "refused"}  # fmt: skip
    assert result["iterations"] == owner_horizon
    sent = [m["path"] for m in learner.audit() if m["path"] in ("/answer", "/refuse")]
    assert sent == ["/answer"] * owner_horizon + ["/refuse"]


def test_owner_talks_to_loopback_only() -> None:
    for url in ("http://10.0.0.1:8000", "https://127.0.0.1:8000", "http://localhost:8000",
                "http://127.0.0.1"):  # fmt: skip
        with pytest.raises(DataValidationError, match=r"http://127\.0\.0\.1:<port>"):
            learner_client(url)


@pytest.mark.parametrize(
    "argv", [["teacher", "--config", "{cfg}"], ["owner"], ["owner", "--cfg", "{cfg}"]]
)
def test_peer_command_line_rejects_bad_arguments(tmp_path: Path, argv: list[str]) -> None:
    cfg = tmp_path / "peer.json"
    cfg.write_text("{}")
    with pytest.raises(SystemExit) as stopped:
        main([arg.format(cfg=cfg) for arg in argv])
    assert stopped.value.code == 2


def test_learner_connections_send_without_nagle_delay() -> None:
    """Each accepted connection has TCP_NODELAY, else every small reply waits ~40 ms for an ACK."""

    async def accepted_nodelay() -> int:
        loop = asyncio.get_running_loop()
        transports: asyncio.Queue[asyncio.BaseTransport] = asyncio.Queue()

        class Grab(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                transports.put_nowait(transport)

        server = await loop.create_server(Grab, sock=_loopback_listener())
        async with server:
            port = server.sockets[0].getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            transport = await asyncio.wait_for(transports.get(), timeout=10)
            flag = int(transport.get_extra_info("socket").getsockopt(IPPROTO_TCP, TCP_NODELAY))
            transport.close()
            writer.close()
        return flag

    assert asyncio.run(accepted_nodelay()) == 1
