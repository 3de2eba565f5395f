"""Contribution scores, reports through the hub, the contribution graph (pfl-stacking.txt §3)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.neighbors import KNeighborsClassifier

from pubsubml.errors import PrivacyError
from pubsubml.hub import LocalHub
from pubsubml.learners.mlp import DPMLPClassifier
from pubsubml.methods import (
    ContributionReport,
    Customizer,
    StackingPersonalizer,
    contribution_graph,
    contribution_scores,
    rank_publishers,
)
from pubsubml.privacy import PrivacyLedger
from pubsubml.sites import Site

pytestmark = pytest.mark.usefixtures("one_thread")


def test_scores_are_normalized_and_unselected_get_zero(hyperplane: dict[str, Any]) -> None:
    h = hyperplane
    Xs, ys = h["subscriber"]
    c = Customizer(models=h["good"], schema=h["schema"], top_m=3, random_state=0).fit(Xs, ys)
    scores = contribution_scores(c)
    assert list(scores) == c.candidate_ids_
    assert sum(scores.values()) == pytest.approx(1.0)
    assert all(scores[k] == 0.0 for k in c.candidate_ids_ if k not in c.selected_ids_)


def test_impurity_and_permutation_methods(hyperplane: dict[str, Any]) -> None:
    h = hyperplane
    Xs, ys = h["subscriber"]
    Xt, yt = h["test"]
    models = h["good"] + h["noise"]
    forest = StackingPersonalizer(models=models, schema=h["schema"], random_state=0).fit(Xs, ys)
    mdi = contribution_scores(forest)  # auto: mean decrease in impurity
    assert sum(mdi.values()) == pytest.approx(1.0)
    knn = Customizer(
        models=models, schema=h["schema"], fusion_model=KNeighborsClassifier(15), random_state=0
    ).fit(Xs, ys)
    with pytest.raises(ValueError, match="need data"):
        contribution_scores(knn)
    with pytest.raises(ValueError, match="coef_"):
        contribution_scores(forest, method="coefficients")
    perm = contribution_scores(knn, X=Xt[:500], y=yt[:500], n_repeats=2)
    assert sum(perm.values()) == pytest.approx(1.0)
    noise_ids = [f"m{i}" for i in range(5, 10)]
    assert sum(perm[k] for k in noise_ids) < perm["own"]


def test_graph_ranks_the_publisher_others_rely_on() -> None:
    reports = {
        "s1": {"a1": 0.5, "b1": 0.1},
        "s2": {"a1": 0.3, "a2": 0.3, "b1": 0.05, "s1m": 0.1},
        "s1m-owner": {},
    }
    owner = {"a1": "a", "a2": "a", "b1": "b", "s1m": "s1"}
    g = contribution_graph(reports, owner)
    assert g["s2"]["a"]["weight"] == pytest.approx(0.6)
    ranking = rank_publishers(g)
    assert [p for p, _ in ranking] == ["a", "b", "s1"]
    assert sum(v for _, v in ranking) == pytest.approx(1.0)
    assert next(p for p, _ in rank_publishers(g, centrality="pagerank")) == "a"
    with pytest.raises(ValueError, match="centrality"):
        rank_publishers(g, centrality="nope")
    self_loop = contribution_graph({"a": {"a1": 0.9}}, owner)
    assert self_loop.number_of_edges() == 0


def test_reports_travel_through_the_hub() -> None:
    # Prepare: three publishers on one hub; two subscribers customize and report.
    rng = np.random.default_rng(0)
    names = ["x0", "x1"]

    def data(n: int) -> tuple[pd.DataFrame, np.ndarray]:
        X = pd.DataFrame(rng.random((n, 2)), columns=names)
        return X, (X["x0"] > X["x1"]).to_numpy().astype(int)

    from pubsubml.methods import hyperplane_schema

    schema = hyperplane_schema(2)
    schema = schema.subset(schema.names)  # x0, x1
    hub = LocalHub()
    sites = {
        n: Site(n, schema, PrivacyLedger(site=n, epsilon_budget=50, delta=1e-5, backend="rdp"))
        for n in ("p1", "p2", "p3", "s1", "s2")
    }
    for i, n in enumerate(("p1", "p2", "p3")):
        X, y = data(300)
        est = DPMLPClassifier(
            schema=schema,
            classes=[0, 1],
            hidden_layer_sizes=(8,),
            epochs=3,
            batch_size=50,
            learning_rate=0.05,
            noise_multiplier=1.0,
            accountant="rdp",
            random_state=i,
        ).fit(X, y)
        sites[n].publish(est, hub)
    for n in ("s1", "s2"):
        sub = sites[n]
        sub.trust(*(sites[p].public_key for p in ("p1", "p2", "p3")))
        sub.subscribe(hub, "x0", task="classification", classes=[0, 1])
        X, y = data(200)
        c = Customizer(models=sub.pull(hub), schema=schema, random_state=0).fit(X, y)
        report = ContributionReport.from_customizer(c, n)
        assert report.self_importance + sum(report.published.values()) == pytest.approx(1.0)
        # Not DP: reporting is refused without the subscriber's explicit consent.
        with pytest.raises(PrivacyError, match="disclose=True"):
            report.report(hub)
        assert n not in hub.contributions()
        report.report(hub, disclose=True)
    # Execute
    stored = hub.contributions()
    graph = contribution_graph(stored, hub.publisher_of)
    # Assert
    assert set(stored) == {"s1", "s2"} and "own" not in stored["s1"]
    assert {p for p, _ in rank_publishers(graph)} <= {"p1", "p2", "p3"}
    assert set(graph.successors("s1")) <= {"p1", "p2", "p3"}
