"""Noisy sites: publishers whose labels are pure noise, and the clean control (pubsub-ml.txt §8.2.5)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.data import hyperplane_schema
from pubsubml.experiments.pubsub.scale import noisy
from pubsubml.experiments.pubsub.scale.hyperplane import make_consortium
from pubsubml.experiments.pubsub.scale.noisy import (
    NOISY_METHODS,
    NOISY_SIZES,
    NoisySizes,
    noisy_fold,
)

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = NoisySizes(
    n_publishers=3,
    n_noisy=1,
    n_subscribers=2,
    rows=40,
    folds=2,
    hidden=(4,),
    epochs=1,
    fl_rounds=1,
)


@pytest.fixture
def tiny_size(monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of a run size of 3 publishers (1 noisy) and 2 subscribers of 40 rows."""
    monkeypatch.setitem(NOISY_SIZES, "tiny", TINY)
    return "tiny"


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace evaluate_fold by a stub that records its arguments and scores 0.5."""
    calls: list[dict[str, Any]] = []

    def evaluate(scenario: Any, **kw: Any) -> list[dict[str, Any]]:
        calls.append({"scenario": scenario, **kw})
        return [{"method": m, "score": 0.5} for m in kw["methods"]]

    monkeypatch.setattr(noisy, "evaluate_fold", evaluate)
    return calls


def test_full_size_is_the_papers() -> None:
    full = NOISY_SIZES["full"]
    assert (full.n_publishers, full.n_noisy, full.n_subscribers, full.rows) == (10, 5, 10, 500)
    assert full.folds == 5 and full.hidden == (100, 50) and full.epochs == full.fl_rounds == 30


@pytest.mark.parametrize("with_noise", [True, False])
def test_every_subscriber_takes_its_turn_against_the_same_publishers(
    monkeypatch: pytest.MonkeyPatch, tiny_size: str, with_noise: bool
) -> None:
    calls = _recording(monkeypatch)
    records = noisy_fold(4, 1, size=tiny_size, noisy=with_noise)
    n_noisy = 1 if with_noise else 0
    pubs, subs = make_consortium(3, 2, 40, seed=4, n_noisy=n_noisy)
    assert len(calls) == 2
    for call, sub in zip(calls, subs, strict=True):
        pd.testing.assert_frame_equal(call["scenario"].subscriber.X, sub.data.X)
    for call in calls:
        scenario = call["scenario"]
        assert [p.y.tolist() for p in scenario.publishers] == [p.data.y.tolist() for p in pubs]
        assert scenario.schema.names == hyperplane_schema().names
        assert scenario.classes == (0, 1) and scenario.metric == "accuracy"
        assert (call["seed"], call["fold"], call["folds"]) == (4, 1, TINY.folds)
        assert tuple(call["methods"]) == NOISY_METHODS
        # few sites: every FL client in every round (§7.3); (F) fine-tunes as long as it trains
        config = call["config"]
        assert config.fl_client_fraction == 1.0 and config.fl_rounds == TINY.fl_rounds
        assert config.hidden_layer_sizes == TINY.hidden
        assert config.epochs == config.fine_tune_epochs == TINY.epochs
    assert len(records) == 2 * len(NOISY_METHODS)
    assert {(r["subscriber"], r["n_noisy"]) for r in records} == {("s0", n_noisy), ("s1", n_noisy)}


def test_the_noisy_publishers_labels_are_noise_and_the_control_has_none(
    monkeypatch: pytest.MonkeyPatch, tiny_size: str
) -> None:
    calls = _recording(monkeypatch)
    noisy_fold(0, 0, size=tiny_size, noisy=True)
    noisy_fold(0, 0, size=tiny_size, noisy=False)
    with_noise, control = calls[0]["scenario"], calls[2]["scenario"]
    for a, b in zip(with_noise.publishers[:2], control.publishers[:2], strict=True):
        pd.testing.assert_frame_equal(a.X, b.X)  # the good publishers are the same
        np.testing.assert_array_equal(a.y, b.y)
    # the last publisher has the same rows; only its labels are redrawn as noise
    pd.testing.assert_frame_equal(with_noise.publishers[2].X, control.publishers[2].X)
    assert not np.array_equal(with_noise.publishers[2].y, control.publishers[2].y)


def test_a_tiny_run_scores_every_method_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(NOISY_SIZES, "one-subscriber", replace(TINY, n_subscribers=1))
    records = noisy_fold(0, 0, size="one-subscriber")
    assert [r["method"] for r in records] == list(NOISY_METHODS)
    assert all(r["subscriber"] == "s0" and r["n_noisy"] == 1 for r in records)
    assert all(0.0 <= r["score"] <= 1.0 for r in records)
    private = [r for r in records if r["method"] != "Own"]
    assert all(0.0 < r["epsilon"] <= 1.0 for r in private)
    assert next(r for r in records if r["method"] == "Own")["epsilon"] == np.inf
