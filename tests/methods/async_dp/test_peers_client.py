"""Tests of pubsubml.methods.async_dp.peers_client: a data owner as a client of the learner.

The learner is played by a scripted ``httpx.MockTransport`` (no socket), except in the test of a
learner that is gone, which connects to a closed port of 127.0.0.1.
"""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from pubsubml.methods.async_dp import peers_client
from pubsubml.methods.async_dp.learner import DataOwner
from pubsubml.methods.async_dp.peers_client import learner_client, post, run_owner
from pubsubml.methods.async_dp.peers_protocol import (
    AnswerMessage,
    RegisterMessage,
    RequestMessage,
)

URL = "http://127.0.0.1:8123"
P, N, EPS, HORIZON, SEED = 3, 40, 1.5, 4, 11


Handler = Callable[[httpx.Request], httpx.Response]


def _client(handler: Handler) -> httpx.Client:
    return httpx.Client(base_url=URL, transport=httpx.MockTransport(handler))


@pytest.fixture
def data_path(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (N, P))
    path = tmp_path / "owner.npz"
    np.savez(path, X=X, y=np.clip(X @ [0.3, -0.2, 0.1], -1, 1))
    return path


def _cfg(data_path: Path, **changes: Any) -> dict[str, Any]:
    cfg = {"owner": 1, "data_path": str(data_path), "epsilon": EPS, "horizon": HORIZON,
           "clip_norm": 2.0, "theta_max": 1.0, "seed": SEED, "url": URL, "clock_unit_s": 1e-4,
           "deadline_s": 10.0}  # fmt: skip
    return cfg | changes


class _ScriptedLearner:
    """Replies to /request from a script; records every message as (path, body)."""

    def __init__(self, replies: Iterable[httpx.Response]) -> None:
        self.replies: Iterator[httpx.Response] = iter(replies)
        self.received: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.received.append((request.url.path, json.loads(request.content)))
        if request.url.path == "/request":
            return next(self.replies)
        return httpx.Response(200, json={"status": "ok"})


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Callable[[Iterable[httpx.Response]], Any]:
    """Route the owner's client to a scripted learner."""

    def install(replies: Iterable[httpx.Response]) -> _ScriptedLearner:
        learner = _ScriptedLearner(replies)

        def client(url: str, timeout_s: float = 5.0) -> httpx.Client:
            assert url == URL
            return _client(learner)

        monkeypatch.setattr(peers_client, "learner_client", client)
        return learner

    return install


def _query(ticket: int, theta: list[float]) -> httpx.Response:
    return httpx.Response(200, json={"status": "query", "ticket": ticket, "theta": theta})


def test_post_sends_the_message_to_its_path_and_returns_the_reply() -> None:
    seen: list[tuple[str, str, dict[str, Any]]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, json.loads(request.content)))
        return httpx.Response(200, json={"status": "query", "ticket": 3, "theta": [0.0]})

    with _client(handler) as client:
        reply = post(client, RegisterMessage(owner=2, n_records=9))
    assert seen == [("POST", "/register", {"owner": 2, "n_records": 9})]
    assert reply == {"status": "query", "ticket": 3, "theta": [0.0]}


def test_post_marks_refused_messages_as_errors() -> None:
    replies = iter([
        httpx.Response(400, json={"status": "x", "detail": "no open query"}),
        httpx.Response(503, text="upstream gone"),
        httpx.Response(200, text="not json"),
    ])  # fmt: skip
    with _client(lambda request: next(replies)) as client:
        message = AnswerMessage(owner=0, ticket=1, gradient=[0.1])
        assert post(client, message) == {"status": "error", "detail": "no open query"}
        assert post(client, message) == {"status": "error", "detail": "upstream gone"}
        assert post(client, message) == {"detail": "not json"}  # not an error, not a query


def test_post_raises_when_the_learner_cannot_be_reached() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with _client(handler) as client, pytest.raises(httpx.TransportError):
        post(client, RequestMessage(owner=0))


def test_learner_client_on_loopback_keeps_its_base_url_and_timeout() -> None:
    with learner_client(URL, timeout_s=2.5) as client:
        assert client.build_request("POST", "/answer").url == httpx.URL(URL + "/answer")
        assert client.timeout.read == 2.5 and client.timeout.connect == 2.5


def test_owner_answers_with_its_noisy_gradient_refuses_outside_theta_and_stops_when_done(
    data_path: Path, scripted: Callable[[Iterable[httpx.Response]], _ScriptedLearner]
) -> None:
    # Prepare: the learner says wait, errs once, asks outside Θ, asks twice in Θ, then is done.
    inside = [[0.1, -0.2, 0.3], [0.0, 0.5, -0.5]]
    learner = scripted([
        httpx.Response(200, json={"status": "wait"}),
        httpx.Response(400, json={"status": "error", "detail": "busy"}),
        _query(1, [2.0, 0.0, 0.0]),
        _query(2, inside[0]),
        _query(3, inside[1]),
        httpx.Response(200, json={"status": "done"}),
    ])  # fmt: skip
    # Execute
    report = run_owner(_cfg(data_path))
    # Assert: two answers charged (k·ε/T), the query outside Θ refused and not charged.
    assert report == {"answers": 2, "spent_epsilon": pytest.approx(2 * EPS / HORIZON),
                      "status": "done"}  # fmt: skip
    paths = [path for path, _ in learner.received]
    assert paths == ["/register", "/request", "/request", "/request", "/refuse",
                     "/request", "/answer", "/request", "/answer", "/request"]  # fmt: skip
    assert learner.received[0][1] == {"owner": 1, "n_records": N}
    assert learner.received[4][1] == {"owner": 1, "ticket": 1}
    # The answers are the owner's Laplace-noised gradients: the same owner, seeded alike,
    # gives the same numbers in the same order.
    with np.load(data_path) as data:
        twin = DataOwner(
            site="twin",
            X=data["X"],
            y=data["y"],
            epsilon=EPS,
            horizon=HORIZON,
            clip_norm=2.0,
            theta_max=1.0,
            rng=np.random.default_rng(SEED),
        )
    answers = [body for path, body in learner.received if path == "/answer"]
    assert [a["ticket"] for a in answers] == [2, 3]
    for body, theta in zip(answers, inside, strict=True):
        assert body["owner"] == 1
        np.testing.assert_array_equal(body["gradient"], twin.answer(theta))


def test_owner_refuses_for_good_once_its_answers_are_spent(
    data_path: Path, scripted: Callable[[Iterable[httpx.Response]], _ScriptedLearner]
) -> None:
    learner = scripted([_query(t, [0.0, 0.0, 0.0]) for t in range(1, 4)])
    report = run_owner(_cfg(data_path, horizon=2))
    assert report == {"answers": 2, "spent_epsilon": pytest.approx(EPS), "status": "refused"}
    sent = [(path, body.get("ticket")) for path, body in learner.received if path != "/request"]
    assert sent == [("/register", None), ("/answer", 1), ("/answer", 2), ("/refuse", 3)]


def test_owner_gives_up_at_its_deadline(
    data_path: Path, scripted: Callable[[Iterable[httpx.Response]], _ScriptedLearner]
) -> None:
    scripted(httpx.Response(200, json={"status": "wait"}) for _ in itertools.count())
    report = run_owner(_cfg(data_path, deadline_s=0.05))
    assert report == {"answers": 0, "spent_epsilon": 0.0, "status": "refused"}


def test_owner_reports_a_learner_that_is_gone(data_path: Path) -> None:
    with socket.socket() as probe:  # a port of 127.0.0.1 that nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    report = run_owner(_cfg(data_path, url=f"http://127.0.0.1:{port}"))
    assert report == {"answers": 0, "spent_epsilon": 0.0, "status": "learner gone"}


def test_owner_never_unpickles_its_data_file(tmp_path: Path) -> None:
    path = tmp_path / "objects.npz"
    np.savez(path, X=np.array([{"a": 1}], dtype=object), y=np.zeros(1))
    with pytest.raises(ValueError, match="allow_pickle"):
        run_owner(_cfg(path))
