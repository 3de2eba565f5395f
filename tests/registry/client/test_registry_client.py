"""Tests of pubsubml.registry.client: the RegistryClient against the registry app over HTTP."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.signing import key_id, public_key_from_base64, public_key_to_bytes
from pubsubml.artifacts.validation import validate_untrusted
from pubsubml.errors import (
    AuthenticationError,
    ChannelSyntaxError,
    NotFoundError,
    RegistryUnreachableError,
)
from pubsubml.registry.app import create_app
from pubsubml.registry.client import RegistryClient
from pubsubml.schema import Feature

BASE = "http://testserver"
# TestClient warns when given a per-request timeout; RegistryClient always sends one.
pytestmark = pytest.mark.filterwarnings("ignore:You should not use the 'timeout' argument")


class LocalValidator:
    """Runs the validation workers' checks in this process (no worker processes to start)."""

    def start(self) -> None:
        pass

    def validate(
        self, card: ModelCard, weights: bytes, *, site_delta: float, max_weights_bytes: int
    ) -> float:
        return validate_untrusted(
            card, weights, site_delta=site_delta, max_weights_bytes=max_weights_bytes
        )


@dataclass
class Server:
    """The shared registry app, and three sites of one test: ``a``, ``b`` and ``c``."""

    http: TestClient
    tokens: dict[str, str]
    names: dict[str, str]

    def client(self, who: str, **kwargs: Any) -> RegistryClient:
        return RegistryClient(BASE, self.tokens[who], http_client=self.http, **kwargs)


@pytest.fixture(scope="module")
def app_http(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory, support: Any
) -> Iterator[TestClient]:
    """One registry app (SQLite) with the test dictionary for this module's tests."""
    root = tmp_path_factory.mktemp("client")
    path = Path(shutil.copy(sqlite_template, root / "registry.db"))
    app = create_app(support.make_settings(f"sqlite:///{path}", root / "store"))
    app.state.registry.validator = LocalValidator()
    with TestClient(app) as http:
        RegistryClient(BASE, support.ADMIN_TOKEN, http_client=http).add_features(
            support.DICTIONARY.features
        )
        yield http


_TESTS = itertools.count()


@pytest.fixture
def env(app_http: TestClient, support: Any, artifacts: Any) -> Server:
    """Fresh sites for each test, so the tests sharing the app do not see each other's."""
    admin = RegistryClient(BASE, support.ADMIN_TOKEN, http_client=app_http)
    number = next(_TESTS)
    tokens, names = {"admin": support.ADMIN_TOKEN}, {}
    for role in ("a", "b", "c"):
        names[role] = f"client{number}{role}"
        tokens[role] = admin.add_site(
            names[role],
            public_key=artifacts.public_key(names[role]),
            epsilon_budget=50,
            delta_budget=1e-5,
        )["token"]
    return Server(app_http, tokens, names)


class LosingTransport(httpx.BaseTransport):
    """Hands requests to the app, but loses the answer to the first one that matches."""

    def __init__(self, app: TestClient, method: str, suffix: str) -> None:
        self.app, self.method, self.suffix = app, method, suffix
        self.calls = 0
        self.lost = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        answer = self.app.send(request)  # the registry receives and handles it
        if (
            not self.lost
            and request.method == self.method
            and request.url.path.endswith(self.suffix)
        ):
            self.lost = True
            raise httpx.ReadError("connection reset while reading the answer", request=request)
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)


def test_admin_and_site_views(env: Server, artifacts: Any) -> None:
    admin, a = env.client("admin"), env.client("a")
    names = env.names
    assert admin.health()["status"] == "ok"
    assert admin.whoami()["kind"] == "admin"
    assert a.whoami() == {"kind": "site", "name": names["a"], "roles": "both"}
    listed = [s["name"] for s in a.list_sites()]
    assert [n for n in listed if n in names.values()] == [names["a"], names["b"], names["c"]]
    assert admin.add_features([Feature(name="age", lower=0, upper=100, default=50)]) == []
    new = Feature(name="crp", lower=0, upper=300, default=5)
    assert admin.add_features([new]) == [new]
    assert new in a.list_features()
    reader = names["a"] + "reader"
    created = admin.add_site(reader, roles="subscriber", epsilon_budget=1, delta_budget=1e-5)
    assert created["token"].startswith("psm_") and created["key_id"] is None
    keys = a.trusted_keys()
    for name in names.values():
        public = public_key_from_base64(artifacts.public_key(name))
        assert public_key_to_bytes(keys[key_id(public)]) == public_key_to_bytes(public)


def test_publish_model_reports_creation_and_visibility(env: Server, artifacts: Any) -> None:
    a, b, c = env.client("a"), env.client("b"), env.client("c")
    names = env.names
    art = artifacts(names["a"], seed=900)
    first = a.publish_model(art.card, art.weights, visible_to=[names["b"]])
    assert first["created"] is True and first["visible_to"] == [names["b"]]
    again = a.publish_model(art.card, art.weights, visible_to=[names["b"]])
    assert again["created"] is False and again["model_id"] == first["model_id"]
    model_id = first["model_id"]
    assert b.get_model(model_id)["card"] == json.loads(art.card.to_json())
    with pytest.raises(NotFoundError):
        c.get_model(model_id)
    assert c.list_models(publisher=names["a"]) == []
    found = b.list_models(publisher=names["a"], task=None, features=["age", "sex"], max_delta=None)
    assert [m["model_id"] for m in found] == [model_id]
    assert b.list_models(publisher=names["a"], task="regression") == []


def test_progress_callbacks_count_the_weights(env: Server, artifacts: Any) -> None:
    a, b = env.client("a"), env.client("b")
    art = artifacts(env.names["a"], seed=901, hidden=64)
    sent: list[int] = []
    model_id = a.publish(art.card, art.weights, progress=sent.append)
    received: list[int] = []
    assert b.download_weights(model_id, progress=received.append) == art.weights
    assert sum(sent) == sum(received) == len(art.weights) > 0


def test_subscriptions_through_the_client(env: Server, artifacts: Any) -> None:
    a, b, c = env.client("a"), env.client("b"), env.client("c")
    names = env.names
    arts = [artifacts(names["a"], seed=902 + i, features=("age", "sex", "bmi")) for i in range(2)]
    for art in arts:
        a.publish(art.card, art.weights)
    labels = [np.int64(0), np.int64(1)]
    sub = b.subscribe(names["b"], "bmi & sex & age", task="classification", classes=labels)
    (listed,) = b.list_subscriptions()
    assert (listed["id"], listed["channel"], listed["classes"]) == (sub, "age & bmi & sex", [0, 1])
    (first,) = b.poll(sub, limit=1)
    (second,) = b.poll(sub, after=first.cursor)
    assert [first.card, second.card] == [art.card for art in arts]
    assert b.poll(sub, after=second.cursor) == []
    for_c = env.client("admin").subscribe(names["c"], "wbc", task="regression")
    assert [s["id"] for s in c.list_subscriptions()] == [for_c]
    with pytest.raises(NotFoundError):
        next(c.stream_models(sub))  # another site's feed: an error, not a reconnection loop


def test_a_bad_channel_is_refused_before_any_request(env: Server) -> None:
    b = env.client("b")
    sent: list[httpx.Request] = []
    env.http.event_hooks["request"].append(sent.append)
    try:
        for channel in ("age &", "", "age; DROP TABLE x"):
            with pytest.raises(ChannelSyntaxError):
                b.subscribe(env.names["b"], channel, task="classification")
    finally:
        env.http.event_hooks["request"].remove(sent.append)
    assert sent == []


def test_tokens_are_rotated_and_revoked(env: Server) -> None:
    a, names = env.client("a"), env.names
    new = a.rotate_token(names["a"], expires_in_days=3)
    with pytest.raises(AuthenticationError, match="invalid token"):
        a.whoami()
    assert RegistryClient(BASE, new, http_client=env.http).whoami()["name"] == names["a"]
    revoked = env.client("admin").revoke_token(names["b"])
    assert revoked["name"] == names["b"] and revoked["token_revoked_at"] is not None
    with pytest.raises(AuthenticationError, match="revoked"):
        env.client("b").whoami()


def test_events_and_contribution_filters(env: Server, artifacts: Any) -> None:
    a, b, c = env.client("a"), env.client("b"), env.client("c")
    names = env.names
    start = b.events()["next_cursor"]
    art = artifacts(names["a"], seed=904)
    model_id = a.publish(art.card, art.weights)
    page = b.events(after=start)
    assert [(e["kind"], e["model_id"], e["site"]) for e in page["events"]] == [
        ("model.published", model_id, names["a"])
    ]
    assert b.events(after=page["next_cursor"]) == {"events": [], "next_cursor": page["next_cursor"]}
    b.report_contributions(names["b"], {model_id: 0.25})
    c.report_contributions(names["c"], {model_id: 0.5})
    mine = a.contributions(model_id=model_id)
    assert [(x["subscriber"], x["score"]) for x in mine] == [(names["c"], 0.5), (names["b"], 0.25)]
    only_b = a.contributions(model_id=model_id, subscriber=names["b"])
    assert [x["score"] for x in only_b] == [0.25]
    assert a.contributions(model_id="f" * 32) == []


def _losing(env: Server, who: str, method: str, suffix: str, **kwargs: Any) -> Any:
    transport = LosingTransport(env.http, method, suffix)
    http = httpx.Client(transport=transport)
    return transport, RegistryClient(BASE, env.tokens[who], http_client=http, **kwargs)


def test_a_subscription_whose_answer_was_lost_is_not_sent_twice(env: Server) -> None:
    transport, b = _losing(env, "b", "POST", "/v1/subscriptions")
    with pytest.raises(RegistryUnreachableError, match="POST request may have") as info:
        b.subscribe(env.names["b"], "age", task="classification")
    assert isinstance(info.value.__cause__, httpx.ReadError) and info.value.sent
    assert transport.calls == 1
    assert len(env.client("b").list_subscriptions()) == 1  # created once, by that request


def test_a_publish_whose_answer_was_lost_is_retried_safely(env: Server, artifacts: Any) -> None:
    transport, a = _losing(env, "a", "POST", "/v1/models")
    art = artifacts(env.names["a"], seed=905)
    result = a.publish_model(art.card, art.weights)
    assert transport.calls == 2 and result["created"] is False  # the first attempt published it
    listed = a.list_models(publisher=env.names["a"])
    assert [m["model_id"] for m in listed] == [art.card.model_id]
    assert len(a.ledger(env.names["a"])["releases"]) == 1


def test_downloads_are_retried_and_retries_can_be_turned_off(env: Server, artifacts: Any) -> None:
    art = artifacts(env.names["a"], seed=906)
    model_id = env.client("a").publish(art.card, art.weights)
    transport = LosingTransport(env.http, "GET", "/weights")
    http = httpx.Client(transport=transport)
    b = RegistryClient(BASE, env.tokens["b"], http_client=http)
    assert b.download_weights(model_id) == art.weights
    assert transport.calls == 2
    transport.lost = False
    once = RegistryClient(BASE, env.tokens["b"], http_client=http, retries=0)
    with pytest.raises(RegistryUnreachableError) as info:
        once.download_weights(model_id)
    assert isinstance(info.value.__cause__, httpx.ReadError)
    assert transport.calls == 3


def test_closing_leaves_a_borrowed_connection_pool_open(env: Server) -> None:
    borrowed = RegistryClient(BASE + "/", env.tokens["a"], http_client=env.http)
    assert borrowed.base_url == BASE
    with borrowed:
        pass
    assert borrowed.whoami()["name"] == env.names["a"]  # the shared pool still works
    owned = RegistryClient("http://127.0.0.1:9/", "psm_x", retries=0)
    with owned:
        pass
    with pytest.raises(RuntimeError, match="closed"):
        owned.health()
