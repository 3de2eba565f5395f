"""The §4 protocol of personalization by stacking: splits, leakage, metrics, contribution graph."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator
from sklearn.metrics import roc_auc_score

from pubsubml.experiments.stacking.client_models import (
    PUBLIC_KINDS,
    ClientData,
    train_public_models,
)
from pubsubml.experiments.stacking.protocol import (
    client_seed,
    evaluate_federation,
    normalized_graph,
    score_predictions,
    split_client,
)
from pubsubml.schema import FeatureSchema

COLUMNS = ["x0", "x1", "x2"]
SCALE = 1e6  # the recording private model outputs row / SCALE


def make_clients(n_clients: int = 3, n: int = 60, seed: int = 0) -> list[ClientData]:
    rng = np.random.default_rng(seed)
    schema = FeatureSchema.numeric(COLUMNS)
    clients = []
    for k in range(n_clients):
        X = rng.random((n, len(COLUMNS)))
        y = (X[:, 0] + 0.1 * k > 0.55).astype(np.int64)
        clients.append(ClientData(f"c{k}", pd.DataFrame(X, columns=COLUMNS), y, schema))
    return clients


class RecordingPrivate:
    """A private model that records the rows it is fitted on and outputs their row ids."""

    fits: ClassVar[list[np.ndarray]] = []

    def fit(self, X: pd.DataFrame, y: Any) -> RecordingPrivate:
        RecordingPrivate.fits.append(X.index.to_numpy().copy())
        self.classes_ = np.array([0, 1])
        return self

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        r = X.index.to_numpy(dtype=np.float64) / SCALE
        return np.column_stack([r, 1.0 - r])


class RecordingMeta(BaseEstimator):
    """A meta-model that recovers the row ids of its training rows from the private output."""

    fits: ClassVar[list[np.ndarray]] = []

    def fit(self, M: np.ndarray, y: Any) -> RecordingMeta:
        RecordingMeta.fits.append(np.rint(M[:, 0] * SCALE).astype(np.int64))
        self.classes_ = np.unique(y)
        self.feature_importances_ = np.full(M.shape[1], 1.0 / M.shape[1])
        return self

    def predict_proba(self, M: np.ndarray) -> np.ndarray:
        return np.full((len(M), len(self.classes_)), 1.0 / len(self.classes_))


def test_split_is_stratified_disjoint_and_covers_the_rows() -> None:
    y = np.array([0] * 70 + [1] * 30)
    s = split_client(y, seed=3)
    assert (len(s.train), len(s.meta), len(s.test)) == (60, 20, 20)
    everything = np.concatenate([s.train, s.meta, s.test])
    assert sorted(everything.tolist()) == list(range(100))
    for part in (s.train, s.meta, s.test):
        assert y[part].mean() == pytest.approx(0.3)
    assert np.array_equal(s.pooled, np.sort(np.concatenate([s.train, s.meta])))


def test_held_out_and_pooled_fit_exactly_the_stated_rows_and_never_test() -> None:
    clients = make_clients()
    RecordingPrivate.fits.clear()
    RecordingMeta.fits.clear()
    seed, repeat = 4, 1
    records = evaluate_federation(
        clients,
        [0, 1],
        seed=seed,
        repeat=repeat,
        private_model=lambda schema, classes, s: RecordingPrivate(),
        meta_model=lambda s: RecordingMeta(),
    )
    assert len(RecordingPrivate.fits) == len(RecordingMeta.fits) == 2 * len(clients)
    for i, client in enumerate(clients):
        split = split_client(client.y, client_seed(seed, repeat, i))
        private_ho, private_pool = RecordingPrivate.fits[2 * i : 2 * i + 2]
        meta_ho, meta_pool = RecordingMeta.fits[2 * i : 2 * i + 2]
        # held-out: private on Train, meta-model on Meta Train
        assert np.array_equal(np.sort(private_ho), split.train)
        assert np.array_equal(np.sort(meta_ho), split.meta)
        # pooled: both on Train ∪ Meta Train
        assert np.array_equal(np.sort(private_pool), split.pooled)
        assert np.array_equal(np.sort(meta_pool), split.pooled)
        for rows in (private_ho, private_pool, meta_ho, meta_pool):
            assert not set(rows.tolist()) & set(split.test.tolist())
    # the client's own public model (trained on its Test rows too) is never stacked
    edges = [r for r in records if r["record"] == "edge"]
    assert edges and all(r["client"] != r["publisher"] for r in edges)
    assert {r["publisher"] for r in edges if r["client"] == "c0"} == {"c1", "c2"}


def test_records_gain_against_the_pooled_private_baseline() -> None:
    records = evaluate_federation(make_clients(), [0, 1], seed=0, repeat=0, meta_trees=10)
    rows = [r for r in records if r["record"] == "client"]
    assert {(r["variant"], r["public"]) for r in rows} == {("held_out", "rf"), ("pooled", "rf")}
    for r in rows:
        assert r["gain"] == pytest.approx(r["bacc"] - r["private_bacc"])
        assert 0.0 <= r["self_importance"] <= 1.0
        assert r["epsilon"] == float("inf")  # the paper's non-private forests
    for variant in ("held_out", "pooled"):
        assert sum(r["importance"] for r in rows if r["variant"] == variant) == pytest.approx(1.0)


def test_roc_auc_comes_from_probabilities() -> None:
    y = np.array([0, 0, 0, 1, 1, 1])
    proba1 = np.array([0.1, 0.3, 0.6, 0.4, 0.7, 0.9])
    proba = np.column_stack([1 - proba1, proba1])
    bacc, auc = score_predictions(y, proba, [0, 1])
    hard = (proba1 > 0.5).astype(int)
    assert auc == pytest.approx(roc_auc_score(y, proba1))
    assert auc != pytest.approx(roc_auc_score(y, hard))
    assert bacc == pytest.approx(2 / 3)
    assert np.isnan(score_predictions(np.zeros(3, int), proba[:3], [0, 1])[1])


def test_contribution_graph_weights_per_subscriber_sum_to_one() -> None:
    records = evaluate_federation(make_clients(4), [0, 1], seed=1, repeat=0, meta_trees=10)
    reports: dict[str, dict[str, float]] = {}
    for r in records:
        if r["record"] == "edge" and r["variant"] == "held_out":
            reports.setdefault(r["client"], {})[r["publisher"]] = r["weight"]
    graph = normalized_graph(reports)
    for node in graph.nodes:
        out = sum(w for _, _, w in graph.out_edges(node, data="weight"))
        assert out == pytest.approx(1.0)


def test_subscriber_that_weighs_no_other_model_has_zero_out_weight() -> None:
    # A one-class Meta Train gives a meta-forest without splits: every score is 0.
    graph = normalized_graph({"a": {"b": 0.3, "c": 0.1}, "b": {"a": 0.0, "c": 0.0}})
    out = {n: sum(w for _, _, w in graph.out_edges(n, data="weight")) for n in graph.nodes}
    assert out["a"] == pytest.approx(1.0) and out["b"] == 0.0 and out["c"] == 0.0
    assert graph["a"]["b"]["weight"] == pytest.approx(0.75)


def test_dp_public_models_report_their_accounted_epsilon() -> None:
    clients = make_clients(2, n=80)
    for name, target in (("dp_lr_e1", 1.0), ("dp_rf_e4", 4.0)):
        models = train_public_models(clients, PUBLIC_KINDS[name], [0, 1], seed=0)
        assert [m.epsilon for m in models] == [target, target]
    mlp = train_public_models(clients, PUBLIC_KINDS["dp_mlp_e1"], [0, 1], seed=0)
    assert all(0.5 < m.epsilon <= 1.0 for m in mlp)
    assert all(m.predict_proba(c.X).shape == (80, 2) for m, c in zip(mlp, clients, strict=True))


def test_public_model_fills_missing_features_with_its_published_defaults() -> None:
    clients = make_clients(2)
    model = train_public_models(clients, PUBLIC_KINDS["rf"], [0, 1], seed=0)[0]
    partial = clients[1].X[["x1"]]
    full = clients[1].X.assign(x0=0.5, x2=0.5)  # FeatureSchema.numeric's default 0.5
    assert np.allclose(model.predict_proba(partial), model.predict_proba(full))
