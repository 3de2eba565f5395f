"""Hyperplane streams with dynamic DP ensembles (pubsub-ml.txt §6, §8.3.3, Fig. 6)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from pubsubml.experiments.pubsub.scale.streams import (
    STREAM_SIZES,
    OtherPublishers,
    StreamSizes,
    streams_run,
)
from pubsubml.hub import FeedItem, Hub

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = StreamSizes(n_sites=2, n_chunks=3, chunk_size=40, ensemble_sizes=(2,), hidden=(4,), epochs=1)


class RecordingHub:
    """A hub whose feed holds one item per publisher name; it records every call."""

    def __init__(self, publishers: Sequence[str]) -> None:
        self.items = [
            FeedItem(i + 1, f"m{i}", SimpleNamespace(publisher=p))  # type: ignore[arg-type]
            for i, p in enumerate(publishers)
        ]
        self.calls: list[tuple[Any, ...]] = []

    def publish(self, card: Any, weights: bytes) -> str:
        self.calls.append(("publish", card, weights))
        return "id"

    def subscribe(
        self, site: str, channel: Any, *, task: str, classes: Sequence[Any] | None = None
    ) -> str:
        self.calls.append(("subscribe", site, channel, task, classes))
        return "sub"

    def poll(self, subscription_id: str, *, after: int = 0, timeout: float = 0.0) -> list[FeedItem]:
        self.calls.append(("poll", subscription_id, after, timeout))
        return [it for it in self.items if it.cursor > after]

    def fetch(self, model_id: str) -> tuple[Any, bytes]:
        self.calls.append(("fetch", model_id))
        return SimpleNamespace(model_id=model_id), b"w"

    def report_contributions(self, subscriber: str, scores: Mapping[str, float]) -> None:
        self.calls.append(("report", subscriber, dict(scores)))


# ---- a hub without one publisher -------------------------------------------------------------
def test_other_publishers_leaves_out_one_publishers_models() -> None:
    hub = RecordingHub(["site0", "site1", "site0", "site2"])
    view = OtherPublishers(hub, "site0")
    assert isinstance(view, Hub)
    items = view.poll("sub", after=0, timeout=0.5)
    assert [it.model_id for it in items] == ["m1", "m3"]
    assert [it.card.publisher for it in items] == ["site1", "site2"]
    assert [it.model_id for it in view.poll("sub", after=2)] == ["m3"]  # the cursor still works
    assert hub.calls[0] == ("poll", "sub", 0, 0.5)


def test_other_publishers_passes_every_other_call_through() -> None:
    hub = RecordingHub([])
    view = OtherPublishers(hub, "site0")
    card = SimpleNamespace(publisher="site0")
    assert view.publish(card, b"x") == "id"  # type: ignore[arg-type]
    assert view.subscribe("site0", "x0", task="classification", classes=[0, 1]) == "sub"  # type: ignore[arg-type]
    fetched, weights = view.fetch("m7")
    assert fetched.model_id == "m7" and weights == b"w"
    view.report_contributions("site0", {"m1": 0.5})
    assert [c[0] for c in hub.calls] == ["publish", "subscribe", "fetch", "report"]
    assert hub.calls[1] == ("subscribe", "site0", "x0", "classification", [0, 1])
    assert hub.calls[3] == ("report", "site0", {"m1": 0.5})


# ---- a run -----------------------------------------------------------------------------------
@pytest.fixture
def tiny_size(monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of a run size of 2 sites × 3 chunks of 40 rows (one chunk with ``"tiny-1"``)."""
    monkeypatch.setitem(STREAM_SIZES, "tiny", TINY)
    monkeypatch.setitem(STREAM_SIZES, "tiny-1", replace(TINY, n_chunks=1))
    return "tiny"


def test_streams_run_scores_every_site_on_every_chunk(tiny_size: str) -> None:
    records = streams_run(0, 0, size=tiny_size, k=2)
    assert [(r["subscriber"], r["chunk"]) for r in records] == [
        (f"site{i}", t) for t in (1, 2, 3) for i in range(2)
    ]
    # nothing is published before k chunks (cold start); then the other site offers its k most
    # recent models: 2 at chunk 2, and still 2 at chunk 3 when its third model arrives
    assert [r["n_models"] for r in records] == [0, 0, 2, 2, 2, 2]
    # disjoint chunks compose in parallel: a site spends the ε of one model (Theorems 5–6)
    assert [r["epsilon"] for r in records[:2]] == [0.0, 0.0]
    assert all(0.9 * TINY.epsilon < r["epsilon"] <= TINY.epsilon + 1e-9 for r in records[2:])
    assert [r["prequential"] is None for r in records] == [True, True] + [False] * 4
    for r in records:
        assert 0.0 <= r["score"] <= 1.0
        assert r["prequential"] is None or 0.0 <= r["prequential"] <= 1.0


def test_streams_run_is_fixed_by_the_seed_and_ignores_the_fold(tiny_size: str) -> None:
    first = streams_run(1, 0, size=f"{tiny_size}-1", k=1)
    again = streams_run(1, 3, size=f"{tiny_size}-1", k=1)
    assert [r["n_models"] for r in first] == [1, 1]
    assert first == again
