"""Tests of pubsubml.methods.async_dp.peers_server: the learner's state and its server."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pubsubml.errors import DataValidationError
from pubsubml.methods.async_dp.learner import AsyncDPLearner
from pubsubml.methods.async_dp.peers_server import LearnerState, serve_learner

P = 2
G = [0.5, -1.0]  # a well-formed noisy gradient


def _state(tmp_path: Path, **changes: Any) -> LearnerState:
    cfg = {"n_owners": 2, "n_features": P, "horizon": 3, "reg": 0.1, "theta_max": 1.0,
           "rho": 1.0, "style": "request", "clock_unit_s": 0.01, "broadcast_interval_s": 0.01,
           "lease_s": 30.0, "audit_path": str(tmp_path / "audit.jsonl")}  # fmt: skip
    return LearnerState(cfg | changes)


def _registered(tmp_path: Path, **changes: Any) -> LearnerState:
    state = _state(tmp_path, **changes)
    state.register(0, 10)
    state.register(1, 30)
    return state


def test_algorithm_1_starts_once_every_owner_registered(tmp_path: Path) -> None:
    state = _state(tmp_path)
    assert state.register(1, 30) == {"status": "ok"}
    assert state.request(1) == {"status": "wait"} and state.learner is None
    state.register(0, 10)  # registration order does not matter: n_i are kept by owner index
    assert state.learner is not None and state.learner.n_records.tolist() == [10, 30]
    assert state.request(1) == {"status": "query", "ticket": 1, "theta": [0.0, 0.0]}
    with pytest.raises(DataValidationError, match="unknown owner"):
        state.register(2, 5)
    with pytest.raises(DataValidationError, match="unknown owner"):
        state.request(-1)


def test_one_owner_is_served_at_a_time_and_only_its_ticket_closes_the_query(
    tmp_path: Path,
) -> None:
    state = _registered(tmp_path)
    first = state.request(0)
    assert first["ticket"] == 1 and state.request(1) == {"status": "wait"}
    for owner, ticket, gradient in ((1, 1, G), (0, 2, G), (0, 1, [0.5])):
        with pytest.raises(DataValidationError):
            state.answer(owner, ticket, gradient)
    assert state.learner is not None and state.learner.iteration == 0
    assert state.answer(0, 1, G) == {"status": "ok"}
    # The update is Eq. 5 and 7 at the query point that was sent.
    reference = AsyncDPLearner(n_records=[10, 30], n_features=P, horizon=3, reg=0.1,
                               theta_max=1.0, rho=1.0)  # fmt: skip
    reference.update(0, reference.query(0), np.array(G))
    np.testing.assert_array_equal(state.learner.theta_learner, reference.theta_learner)
    np.testing.assert_array_equal(state.learner.theta_owners, reference.theta_owners)
    assert state.request(1)["ticket"] == 2


def test_a_refusal_closes_the_query_without_an_update(tmp_path: Path) -> None:
    state = _registered(tmp_path)
    state.request(1)
    with pytest.raises(DataValidationError, match="no open query"):
        state.refuse(1, 2)
    assert state.refuse(1, 1) == {"status": "ok"}
    assert state.learner is not None and state.learner.iteration == 0
    assert not state.learner.theta_owners.any()
    with pytest.raises(DataValidationError, match="no open query"):
        state.refuse(1, 1)  # closed once only
    assert state.request(0)["ticket"] == 2


def test_an_expired_lease_frees_the_learner_for_another_owner(tmp_path: Path) -> None:
    state = _registered(tmp_path, lease_s=0.001)
    state.request(0)
    time.sleep(0.01)
    assert state.request(1)["ticket"] == 2  # owner 0 vanished mid-update
    with pytest.raises(DataValidationError, match="no open query"):
        state.answer(0, 1, G)
    assert state.answer(1, 2, G) == {"status": "ok"}


def test_after_t_updates_every_message_hears_done_and_the_result_lists_them(
    tmp_path: Path,
) -> None:
    state = _registered(tmp_path, horizon=2)
    for owner in (1, 0):
        ticket = state.request(owner)["ticket"]
        state.answer(owner, ticket, G)
    assert state.done.is_set()
    assert state.request(0) == state.answer(0, 3, G) == state.refuse(1, 3) == {"status": "done"}
    result = state.result()
    assert result["iterations"] == 2 and result["owners"] == [1, 0]
    assert len(result["times"]) == 2 and 0 <= result["times"][0] <= result["times"][1]
    assert state.learner is not None
    assert result["theta_learner"] == state.learner.theta_learner.tolist()
    json.dumps(result)  # JSON values only
    assert state.audit.closed


def test_result_without_every_owner_has_no_model(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.register(0, 10)
    assert state.result() == {"theta_learner": None, "iterations": 0, "owners": [], "times": []}


def test_audit_file_lists_what_was_recorded_in_order(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.record("/register", {"owner": 0, "n_records": 10})
    state.record("/answer", {"owner": 0, "ticket": 1, "gradient": G})
    state.result()
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"path": "/register", "body": {"owner": 0, "n_records": 10}},
        {"path": "/answer", "body": {"owner": 0, "ticket": 1, "gradient": G}},
    ]


def test_broadcast_style_serves_one_owner_per_open_round(tmp_path: Path) -> None:
    state = _registered(tmp_path, style="broadcast", broadcast_interval_s=0.005)

    async def rounds() -> list[dict[str, Any]]:
        replies = [state.request(0)]  # no round open yet
        opener = asyncio.create_task(state.open_rounds())
        await asyncio.sleep(0.05)
        replies += [state.request(1), state.request(0)]  # the first takes the round
        await asyncio.sleep(0.05)
        replies.append(state.request(0))  # the lease blocks new rounds
        state.answer(1, 1, G)
        await asyncio.sleep(0.05)
        replies.append(state.request(0))  # a new round opened once idle
        state.done.set()
        await asyncio.wait_for(opener, 1.0)  # stops once done
        return replies

    replies = asyncio.run(rounds())
    assert [r["status"] for r in replies] == ["wait", "query", "wait", "wait", "query"]
    assert replies[1]["ticket"] == 1 and replies[4]["ticket"] == 2


def test_serve_learner_listens_on_loopback_and_stops_at_its_deadline(tmp_path: Path) -> None:
    ports: list[int] = []
    cfg = {"n_owners": 1, "n_features": P, "horizon": 1, "reg": 0.1, "theta_max": 1.0,
           "rho": 1.0, "style": "broadcast", "clock_unit_s": 0.01, "broadcast_interval_s": 0.01,
           "lease_s": 1.0, "audit_path": str(tmp_path / "audit.jsonl"), "deadline_s": 0.2,
           "grace_s": 0.01}  # fmt: skip
    result = serve_learner(cfg, on_listening=ports.append)
    assert len(ports) == 1 and 0 < ports[0] < 65536
    assert result == {"theta_learner": None, "iterations": 0, "owners": [], "times": []}
    assert (tmp_path / "audit.jsonl").read_text() == ""
