"""Streams (pubsub-ml.txt §6): constant ε over unlimited updates, cold start, re-customization."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from pubsubml.hub import LocalHub
from pubsubml.learners.mlp import DPMLPClassifier
from pubsubml.methods import (
    Customizer,
    StreamPublisher,
    StreamSubscriber,
    hyperplane_chunks,
    hyperplane_schema,
    published_runner,
)
from pubsubml.privacy import PrivacyLedger
from pubsubml.schema import Channel
from pubsubml.sites import Site

pytestmark = pytest.mark.usefixtures("one_thread")

logging.getLogger("absl").setLevel(logging.ERROR)
SCHEMA = hyperplane_schema(4)


def _dp_mlp(seed: int = 0) -> DPMLPClassifier:
    return DPMLPClassifier(
        schema=SCHEMA,
        classes=[0, 1],
        hidden_layer_sizes=(8,),
        epochs=2,
        batch_size=20,
        learning_rate=0.05,
        noise_multiplier=1.0,
        accountant="rdp",
        random_state=seed,
    )


def _site(name: str) -> Site:
    return Site(
        name, SCHEMA, PrivacyLedger(site=name, epsilon_budget=100.0, delta=1e-5, backend="rdp")
    )


def test_hyperplane_chunks_drift_and_public_schema() -> None:
    chunks = list(hyperplane_chunks(3, 200, seed=1, n_features=4, mag_change=0.01))
    assert [len(X) for X, _ in chunks] == [200, 200, 200]
    X, y = chunks[0]
    assert list(X.columns) == SCHEMA.names and set(np.unique(y)) <= {0, 1}
    assert ((X >= 0) & (X <= 1)).all().all()
    SCHEMA.validate_frame(X, out_of_bounds="error")
    same = next(hyperplane_chunks(1, 200, seed=1, n_features=4, mag_change=0.01))
    np.testing.assert_array_equal(same[1], y)


def test_stream_publisher_epsilon_is_constant_over_100_updates() -> None:
    # Prepare
    site, hub, k = _site("p"), LocalHub(), 3
    pub = StreamPublisher(site, _dp_mlp(), hub, k=k)
    chunks = hyperplane_chunks(100 + k - 1, 40, seed=0, n_features=4, mag_change=0.001)
    # Execute
    published = [pub.learn_chunk(X, y) for X, y in chunks]
    # Assert: cold start, then the whole ensemble, then one model per chunk.
    assert [len(p) for p in published[: k + 1]] == [0] * (k - 1) + [k, 1]
    assert pub.epsilon_history_[: k - 1] == [0.0] * (k - 1)
    first_full = pub.epsilon_history_[k - 1]
    assert first_full > 0
    assert pub.epsilon_history_[-1] == pytest.approx(first_full, rel=1e-12)
    assert len(pub.epsilon_history_) - (k - 1) == 100  # 100 ensemble updates
    assert list(pub.ensemble_) == [p[0] for p in published[-k:]]
    assert len(hub) == 100 + k - 1 and len(site.ledger.releases) == 100 + k - 1
    assert all(len(r.scope or ()) == 1 for r in site.ledger.releases)


def test_stream_subscriber_recustomizes_and_evaluates() -> None:
    hub = LocalHub()
    pubs = [StreamPublisher(_site(f"p{i}"), _dp_mlp(i), hub, k=2) for i in range(2)]
    sub_site = _site("s")
    sub_site.trust(*(p.site.public_key for p in pubs))
    template = Customizer(schema=SCHEMA, runner=published_runner, own_model="forest")
    sub = StreamSubscriber(sub_site, hub, template, channel=Channel.parse("x0"), k=2)
    streams = [hyperplane_chunks(4, 150, seed=0, n_features=4) for _ in range(3)]
    for t in range(4):
        for p, s in zip(pubs, streams, strict=False):
            p.learn_chunk(*next(s))
        record = sub.learn_chunk(*next(streams[2]))
        assert record["chunk"] == t + 1 and 0.0 <= record["test"] <= 1.0
    history = sub.history_
    assert history[0]["prequential"] is None
    assert all(isinstance(h["prequential"], float) for h in history[1:])
    assert [h["n_models"] for h in history] == [0, 4, 4, 4]  # k=2 per publisher after cold start
    assert [h["new_models"] for h in history] == [0, 4, 2, 2]
    assert sub.model_ is not None and len(sub.model_.candidate_ids_) == 5
    assert sub.refresh() is False
