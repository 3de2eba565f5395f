"""20 concurrent publishers and 20 subscribers over real HTTP against a uvicorn server (every
backend): each published model reaches every matching subscription exactly once, in cursor order,
including subscriptions created while publishing is under way."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pubsubml.registry.client import RegistryClient
from pubsubml.schema import Channel

N_PUBLISHERS = 20
N_SUBSCRIBERS = 20
PER_PUBLISHER = 3
FEATURE_SETS = [("age", "sex"), ("wbc",), ("age", "bmi"), ("icu_los", "wbc"), ("sex",)]
CHANNELS = ["age", "wbc", "age & sex", "bmi | wbc", "icu_los | sex"]


def _expected(channel: str, classes: list[int] | None, cards: list[Any]) -> set[str]:
    ch = Channel.parse(channel)
    return {
        c.model_id
        for c in cards
        if ch.matches(c.input_features)
        and (classes is None or set(c.classes or ()) <= set(classes))
    }


def test_concurrent_publishers_and_subscribers(
    backend: Any, tmp_path: Path, support: Any, artifacts: Any
) -> None:
    settings = support.make_settings(backend.url, tmp_path / "store")
    with support.thread_server(settings) as url:
        admin = RegistryClient(url, support.ADMIN_TOKEN)
        admin.add_features(support.DICTIONARY.features)
        publishers = [f"p{i:02d}" for i in range(N_PUBLISHERS)]
        subscribers = [f"s{i:02d}" for i in range(N_SUBSCRIBERS)]
        tokens = {}
        for name in publishers:
            tokens[name] = admin.add_site(
                name,
                roles="publisher",
                public_key=artifacts.public_key(name),
                epsilon_budget=50,
                delta_budget=1e-5,
            )["token"]
        for name in subscribers:
            tokens[name] = admin.add_site(
                name, roles="subscriber", epsilon_budget=1, delta_budget=1e-5
            )["token"]
        plans = {
            p: [
                artifacts(
                    p,
                    seed=1000 + 10 * i + k,
                    features=FEATURE_SETS[(i + k) % len(FEATURE_SETS)],
                    classes=(0, 1) if (i + k) % 4 else (0, 1, 2),
                )
                for k in range(PER_PUBLISHER)
            ]
            for i, p in enumerate(publishers)
        }
        cards = [a.card for arts in plans.values() for a in arts]
        specs = {
            s: (CHANNELS[i % len(CHANNELS)], None if i % 3 == 0 else [0, 1])
            for i, s in enumerate(subscribers)
        }
        errors: list[BaseException] = []
        received: dict[str, list[tuple[int, str]]] = {}
        start = threading.Barrier(N_PUBLISHERS + N_SUBSCRIBERS)

        def publish(site: str) -> None:
            try:
                with RegistryClient(url, tokens[site], timeout=60) as client:
                    start.wait()
                    for art in plans[site]:
                        client.publish(art.card, art.weights)
                    client.publish(plans[site][0].card, plans[site][0].weights)  # idempotent repeat
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def subscribe(site: str, index: int) -> None:
            try:
                channel, classes = specs[site]
                want = _expected(channel, classes, cards)
                with RegistryClient(url, tokens[site], timeout=60) as client:
                    start.wait()
                    if index % 2:
                        time.sleep(0.05 * index)  # half subscribe while publishing is under way
                    sub = client.subscribe(site, channel, task="classification", classes=classes)
                    got: list[tuple[int, str]] = []
                    after, deadline = 0, time.monotonic() + 90
                    while {m for _, m in got} != want and time.monotonic() < deadline:
                        items = client.poll(sub, after=after, timeout=2.0)
                        got.extend((i.cursor, i.model_id) for i in items)
                        after = got[-1][0] if got else after
                    got.extend(
                        (i.cursor, i.model_id) for i in client.poll(sub, after=after, timeout=0.3)
                    )
                    received[site] = got
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=publish, args=(p,)) for p in publishers]
        threads += [
            threading.Thread(target=subscribe, args=(s, i)) for i, s in enumerate(subscribers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        assert not errors, errors[:3]
        assert len(admin.list_models(limit=1000)) == N_PUBLISHERS * PER_PUBLISHER
        for site, got in received.items():
            channel, classes = specs[site]
            ids = [m for _, m in got]
            cursors = [c for c, _ in got]
            assert len(ids) == len(set(ids)), f"{site} got a model twice"
            assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors)
            assert set(ids) == _expected(channel, classes, cards), site
        assert len(received) == N_SUBSCRIBERS
        for p in publishers[:3]:
            assert len(admin.ledger(p)["releases"]) == PER_PUBLISHER
        admin.close()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback only: make sure no proxy setting reroutes the test's requests."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
