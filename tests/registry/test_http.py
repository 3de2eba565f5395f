"""Real HTTP on 127.0.0.1 (uvicorn in a thread; every backend): the ``RegistryClient`` Hub,
long polls woken by a publish, Server-Sent Events with resume, client retries (the commands over
HTTP are in tests/cli/registry)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from pubsubml.artifacts.published import PublishedModel
from pubsubml.errors import (
    DigestMismatchError,
    NotFoundError,
    PermissionDeniedError,
    PrivacyBudgetExceededError,
    RegistryUnreachableError,
)
from pubsubml.hub import Hub
from pubsubml.registry.client import RegistryClient
from pubsubml.schema import Channel


def test_registry_client_is_a_hub(server: dict[str, Any], artifacts: Any) -> None:
    a = RegistryClient(server["url"], server["tokens"]["a"])
    b = RegistryClient(server["url"], server["tokens"]["b"])
    assert isinstance(a, Hub)
    art = artifacts("a", seed=70)
    model_id = a.publish(art.card, art.weights)
    assert a.publish(art.card, art.weights) == model_id  # idempotent
    sub = b.subscribe("b", Channel.parse("age | wbc"), task="classification", classes=[0, 1])
    items = b.poll(sub)
    assert [i.model_id for i in items] == [model_id] and items[0].card == art.card
    card, weights = b.fetch(model_id)
    assert card == art.card and weights == art.weights
    model = PublishedModel.load(card, weights, b.trusted_keys())
    assert model.model_id == model_id
    b.report_contributions("b", {model_id: 0.7})
    assert b.contributions(model_id=model_id)[0]["score"] == 0.7
    assert len(a.ledger("a")["releases"]) == 1
    assert a.register_scopes("a", ["2024-01", "2024-02"]) == ["2024-01", "2024-02"]
    assert a.register_scopes("a", ["2024-01"]) == [] and a.scopes("a") == ["2024-01", "2024-02"]
    with pytest.raises(PermissionDeniedError):
        b.register_scopes("a", ["2024-03"])
    with pytest.raises(NotFoundError):
        b.fetch("0" * 32)
    with pytest.raises(PermissionDeniedError):
        b.ledger("a")
    poor = artifacts("poor", seed=71)
    with pytest.raises(PrivacyBudgetExceededError):
        RegistryClient(server["url"], server["tokens"]["poor"]).publish(poor.card, poor.weights)
    a.close()
    b.close()


def test_long_poll_wakes_on_publish(server: dict[str, Any], artifacts: Any) -> None:
    a = RegistryClient(server["url"], server["tokens"]["a"])
    b = RegistryClient(server["url"], server["tokens"]["b"])
    sub = b.subscribe("b", "age", task="classification")
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.extend(b.poll(sub, timeout=30)))
    waiter.start()
    time.sleep(0.3)
    art = artifacts("a", seed=72)
    a.publish(art.card, art.weights)
    waiter.join(30)
    assert not waiter.is_alive() and [i.model_id for i in got] == [art.card.model_id]
    iterated = list(b.iter_models(sub, wait=0.2, idle_stop=0.3))
    assert [i.model_id for i in iterated] == [art.card.model_id]


def test_server_sent_events_resume_without_loss(server: dict[str, Any], artifacts: Any) -> None:
    a = RegistryClient(server["url"], server["tokens"]["a"])
    b = RegistryClient(server["url"], server["tokens"]["b"])
    sub = b.subscribe("b", "age", task="classification")
    first, second = artifacts("a", seed=73), artifacts("a", seed=74)
    a.publish(first.card, first.weights)
    headers = {"Authorization": f"Bearer {server['tokens']['b']}"}
    url = f"{server['url']}/v1/subscriptions/{sub}/stream"

    def read_events(n: int, **kwargs: Any) -> list[tuple[int, dict[str, Any]]]:
        out: list[tuple[int, dict[str, Any]]] = []
        with httpx.stream("GET", url, timeout=10, **kwargs) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            ident = None
            for line in r.iter_lines():
                if line.startswith("id: "):
                    ident = int(line[4:])
                elif line.startswith("data: "):
                    out.append((ident or 0, json.loads(line[6:])))
                    if len(out) == n:
                        return out
        return out

    ((cursor, item),) = read_events(1, headers=headers)
    assert item["model_id"] == first.card.model_id and item["cursor"] == cursor
    a.publish(second.card, second.weights)
    resumed = read_events(1, headers={**headers, "Last-Event-ID": str(cursor)})
    assert [i["model_id"] for _, i in resumed] == [second.card.model_id]
    streamed = b.stream_models(sub)
    assert [next(streamed).model_id, next(streamed).model_id] == [
        first.card.model_id,
        second.card.model_id,
    ]
    streamed.close()
    r = httpx.get(url, headers={"Authorization": f"Bearer {server['tokens']['a']}"}, timeout=5)
    assert r.status_code == 404


class FlakyTransport(httpx.HTTPTransport):
    """Fails the first ``n`` requests with a connection error, then behaves."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n
        self.calls = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            raise httpx.ConnectError("connection refused", request=request)
        return super().handle_request(request)


def test_client_retries_connection_errors(server: dict[str, Any], artifacts: Any) -> None:
    transport = FlakyTransport(2)
    http = httpx.Client(transport=transport, timeout=10)
    client = RegistryClient(server["url"], server["tokens"]["a"], http_client=http)
    art = artifacts("a", seed=75)
    assert client.publish(art.card, art.weights) == art.card.model_id
    assert transport.calls == 3
    transport.left = 10
    with pytest.raises(RegistryUnreachableError, match="connection refused") as info:
        client.health()
    assert isinstance(info.value.__cause__, httpx.ConnectError) and not info.value.sent
    http.close()


def test_fetch_checks_the_digest(server: dict[str, Any], artifacts: Any) -> None:
    art = artifacts("a", seed=76)
    RegistryClient(server["url"], server["tokens"]["a"]).publish(art.card, art.weights)

    class Corrupting(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = super().handle_request(request)
            if request.url.path.endswith("/weights"):
                response.read()
                return httpx.Response(200, content=response.content + b"!", request=request)
            return response

    client = RegistryClient(
        server["url"], server["tokens"]["b"], http_client=httpx.Client(transport=Corrupting())
    )
    with pytest.raises(DigestMismatchError):
        client.fetch(art.card.model_id)
