"""Many publishers, few subscribers: folds, publishing, model selection (pubsub-ml.txt §8.2.3, App. B)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.data import hyperplane_schema
from pubsubml.errors import PrivacyBudgetExceededError
from pubsubml.experiments.pubsub import compared
from pubsubml.experiments.pubsub.scale import many_publishers as selection
from pubsubml.experiments.pubsub.scale.hyperplane import HyperplaneSite, make_consortium
from pubsubml.experiments.pubsub.scale.many_publishers import (
    Fold,
    config_label,
    customize_options,
    customize_records,
    own_records,
    publish_models,
    publishers_fold,
    pull_models,
    selection_fold,
    split_sites,
    train_many_publishers,
)
from pubsubml.experiments.pubsub.scale.sizes import SIZES
from pubsubml.experiments.runner import kfold_indices
from pubsubml.learners.mlp import DPMLPClassifier
from pubsubml.methods.pubsub.customizer import Customizer
from pubsubml.methods.pubsub.outputs import published_runner

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = replace(
    SIZES["smoke"],
    n_publishers=3,
    n_subscribers=2,
    rows=50,
    hidden=(4,),
    epochs=1,
    top_ms=(None, 2),
    publisher_counts=(1, 3),
    fl_rounds=1,
    fl_fraction=1.0,
    fine_tune_epochs=1,
)


def _rows(frame: pd.DataFrame) -> list[tuple[float, ...]]:
    """Hyperplane rows as tuples: continuous features, so equal tuples are the same row."""
    return list(map(tuple, frame.to_numpy(dtype=float)))


@pytest.fixture
def tiny_size(monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of a run size of 3 publishers and 2 subscribers of 50 rows each."""
    monkeypatch.setitem(SIZES, "tiny", TINY)
    return "tiny"


@pytest.fixture(scope="module")
def sites() -> tuple[list[HyperplaneSite], list[HyperplaneSite]]:
    return make_consortium(3, 2, 50, seed=0)


@pytest.fixture(scope="module")
def fold(sites: tuple[list[HyperplaneSite], list[HyperplaneSite]]) -> Fold:
    pubs, subs = sites
    return split_sites(pubs, subs, folds=2, fold=0, seed=0)


# ---- folds -----------------------------------------------------------------------------------
def test_config_labels_are_fig4s() -> None:
    assert config_label(None) == "All" and config_label(10) == "Top-10"


def test_split_gives_publishers_their_training_part_and_subscribers_fit_and_test(
    sites: tuple[list[HyperplaneSite], list[HyperplaneSite]],
) -> None:
    pubs, subs = sites
    data = split_sites(pubs, subs, folds=5, fold=1, seed=0)
    assert data.names == ["p0", "p1", "p2"]
    assert [len(y) for _, y in data.publishers] == [40] * 3
    assert [len(y) for _, y in data.sub_fit] == [40, 40]
    assert [len(y) for _, y in data.sub_test] == [10, 10]
    train, _ = kfold_indices(pubs[2].data.y, 5, 1, 0)
    expected = pubs[2].data.X.iloc[train].reset_index(drop=True)
    pd.testing.assert_frame_equal(data.publishers[2][0], expected)
    for site, fit, test in zip(subs, data.sub_fit, data.sub_test, strict=True):
        label = dict(zip(_rows(site.data.X), site.data.y.tolist(), strict=True))
        assert not set(_rows(fit[0])) & set(_rows(test[0]))
        assert sorted(_rows(fit[0]) + _rows(test[0])) == sorted(label)
        for X, y in (fit, test):  # every row keeps its own label
            assert [label[r] for r in _rows(X)] == y.tolist()
    # over the five folds, each subscriber row is tested exactly once
    tested = [
        row
        for f in range(5)
        for row in _rows(split_sites(pubs, subs, folds=5, fold=f, seed=0).sub_test[0][0])
    ]
    assert sorted(tested) == sorted(_rows(subs[0].data.X))


# ---- publishers ------------------------------------------------------------------------------
def test_publishers_are_trained_to_the_budget_and_fixed_by_the_seed(fold: Fold) -> None:
    models, seconds = train_many_publishers(fold.publishers, TINY, seed=0)
    again, _ = train_many_publishers(fold.publishers, TINY, seed=0)
    assert len(models) == 3 and seconds >= 0.0
    assert all(0.9 * TINY.epsilon < m.epsilon_ <= TINY.epsilon for m in models)
    X = fold.sub_test[0][0]
    for a, b in zip(models, again, strict=True):
        np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_published_models_reach_a_subscriber_unchanged(fold: Fold) -> None:
    models, _ = train_many_publishers(fold.publishers, TINY, seed=0)
    hub, keys, seconds = publish_models(models, fold.names, TINY)
    assert len(keys) == 3 and seconds >= 0.0
    received, _ = pull_models(hub, keys, "s0")
    assert [m.publisher for m in received] == fold.names
    X = fold.sub_test[0][0]
    for sent, got in zip(models, received, strict=True):
        assert got.epsilon <= TINY.epsilon
        np.testing.assert_allclose(got.predict_proba(X), sent.predict_proba(X), atol=1e-5)


def test_a_model_over_the_sites_budget_is_not_published(fold: Fold) -> None:
    models, _ = train_many_publishers(fold.publishers, TINY, seed=0)  # ε = 1 each
    with pytest.raises(PrivacyBudgetExceededError):
        publish_models(models, fold.names, replace(TINY, epsilon=0.5))


# ---- subscribers -----------------------------------------------------------------------------
def test_customize_records_one_row_per_configuration(fold: Fold) -> None:
    models, _ = train_many_publishers(fold.publishers, TINY, seed=0)
    hub, keys, _ = publish_models(models, fold.names, TINY)
    received, _ = pull_models(hub, keys, "s0")
    records = customize_records(received, fold.sub_fit[0], fold.sub_test[0], (None, 2), seed=0)
    assert [r["method"] for r in records] == ["All", "Top-2", "Own (M^s)"]
    # M^s is a candidate too (§4 Step 2: select from M^s ∪ Λ_s): All fuses 3 + 1 models
    assert [r["n_models"] for r in records] == [4, 2, 1]
    assert all(0.0 <= r["score"] <= 1.0 for r in records)
    assert records[0]["select_s"] == 0.0 and records[1]["select_s"] > 0.0  # All selects nothing
    assert all(r["fuse_s"] > 0.0 for r in records[:2])
    without = customize_records(
        received, fold.sub_fit[0], fold.sub_test[0], (1,), seed=0, own=False
    )
    assert [(r["method"], r["n_models"]) for r in without] == [("Top-1", 1)]


def test_paper_protocol_is_the_papers_customize() -> None:
    assert customize_options("default", TINY, seed=0) == {}
    paper = customize_options("paper", TINY, seed=4)
    own = paper.pop("own_model")
    assert paper == {
        "cv": "holdout",
        "fusion_model": "linear",
        "train_split": 0.75,
        "fusion_split": 0.25,
        "selection_metric": "accuracy",
    }
    # M^s is Table 4's network as the publishers train it, without DP
    assert isinstance(own, DPMLPClassifier) and own.dp is False
    assert own.hidden_layer_sizes == TINY.hidden and own.epochs == TINY.epochs
    assert own.random_state == 4
    with pytest.raises(ValueError, match="unknown CUSTOMIZE protocol 'fast'"):
        customize_options("fast", TINY, seed=0)


def test_paper_protocol_runs_the_subscribed_models_on_cus_and_test_rows_only(
    fold: Fold, monkeypatch: pytest.MonkeyPatch
) -> None:
    models, _ = train_many_publishers(fold.publishers, TINY, seed=0)
    hub, keys, _ = publish_models(models, fold.names, TINY)
    received, _ = pull_models(hub, keys, "s0")
    (X_fit, y_fit), test = fold.sub_fit[0], fold.sub_test[0]
    seen: list[tuple[int, int]] = []

    def counting(models: Any, frame: pd.DataFrame, method: str) -> Any:
        seen.append((len(models), len(frame)))
        return published_runner(models, frame, method)

    monkeypatch.setattr(selection, "published_runner", counting)
    default = customize_records(received, (X_fit, y_fit), test, (None,), seed=0)
    assert seen[0] == (3, len(X_fit))  # cross-fitting: every fit row goes through the models
    seen.clear()
    paper = customize_records(
        received, (X_fit, y_fit), test, (None,), seed=0, protocol="paper", sizes=TINY
    )
    # the 3 subscribed models on Cus (25 % of the fit rows), then on the scored rows
    assert [call for call in seen if call[0]] == [(3, round(0.25 * len(X_fit))), (3, len(test[0]))]
    assert [r["method"] for r in paper] == [r["method"] for r in default] == ["All", "Own (M^s)"]

    # the same customized model as the Customizer given the paper's options by hand
    by_hand = Customizer(
        models=received,
        schema=hyperplane_schema(),
        runner=published_runner,
        random_state=0,
        **customize_options("paper", TINY, seed=0),
    ).fit(X_fit, y_fit)
    assert paper[0]["score"] == by_hand.score(*test)
    assert paper[0]["n_models"] == len(by_hand.selected_ids_) == len(received) + 1


def test_own_records_score_each_subscriber_alone(
    monkeypatch: pytest.MonkeyPatch, sites: tuple[list[HyperplaneSite], list[HyperplaneSite]]
) -> None:
    calls: list[dict[str, Any]] = []
    scores = iter([0.25, 0.75])

    def evaluate(scenario: compared.Scenario, **kw: Any) -> list[dict[str, Any]]:
        calls.append({"scenario": scenario, **kw})
        return [{"method": "Own", "score": next(scores), "epsilon": np.inf, "seconds": 0.1}]

    monkeypatch.setattr(compared, "evaluate_fold", evaluate)
    _, subs = sites
    records = own_records(subs, TINY, seed=3, fold=1)
    assert records == [
        {"subscriber": "s0", "method": "Own", "score": 0.25},
        {"subscriber": "s1", "method": "Own", "score": 0.75},
    ]
    for call, sub in zip(calls, subs, strict=True):
        assert list(call["scenario"].publishers) == []  # no subscribed models
        assert call["scenario"].subscriber.X is sub.data.X
        assert (call["seed"], call["fold"], call["folds"]) == (3, 1, TINY.folds)
        assert tuple(call["methods"]) == ("Own",)
        assert call["config"].hidden_layer_sizes == TINY.hidden
        assert call["config"].own_model == "auto"
    calls.clear()
    scores = iter([0.5])
    own_records(subs[:1], TINY, seed=3, fold=1, own_model="paper")
    assert calls[0]["config"].own_model == "paper"  # Table 4's network without DP (§7.3)


# ---- one fold --------------------------------------------------------------------------------
def test_selection_fold_records_every_configuration_and_its_timings(tiny_size: str) -> None:
    records = selection_fold(0, 0, size=tiny_size)
    head, rest = records[0], records[1:]
    assert head["method"] == "publishers" and head["n_models"] == 3 and head["train_s"] >= 0.0
    fused = [r for r in rest if r["method"] in ("All", "Top-2")]
    assert [(r["subscriber"], r["method"]) for r in fused] == [
        ("s0", "All"),
        ("s0", "Top-2"),
        ("s1", "All"),
        ("s1", "Top-2"),
    ]
    for r in fused:
        assert r["total_s"] == pytest.approx(r["load_s"] + r["select_s"] + r["fuse_s"])
    methods = {r["method"] for r in rest}
    fl = {f"{m}({v})" for m in ("FedAvg", "FedProx", "FedAdam") for v in "VF"}
    assert methods == {"All", "Top-2", "Own (M^s)", "Own"} | fl
    assert all(0.0 <= r["score"] <= 1.0 for r in rest)
    assert all(r["epsilon"] <= TINY.epsilon for r in rest if r["method"] in fl)


def test_publishers_fold_nests_the_publishers(tiny_size: str) -> None:
    records = publishers_fold(0, 0, size=tiny_size)
    fused = [r for r in records if r["method"] == "PubSub-ML"]
    # n publishers serve min(n, 2) subscribers; each fuses its own model and the n publishers'
    assert [(r["n_publishers"], r["subscriber"], r["n_models"]) for r in fused] == [
        (1, "s0", 2),
        (3, "s0", 4),
        (3, "s1", 4),
    ]
    own = [
        (r["n_publishers"], r["subscriber"], r["method"]) for r in records if "Own" in r["method"]
    ]
    assert sorted(own) == [
        (3, "s0", "Own"),
        (3, "s0", "Own (M^s)"),
        (3, "s1", "Own"),
        (3, "s1", "Own (M^s)"),
    ]


def test_publishers_fold_with_the_papers_customize(tiny_size: str) -> None:
    records = publishers_fold(0, 0, size=tiny_size, customizer="paper")
    fused = [r for r in records if r["method"] == "PubSub-ML"]
    assert [(r["n_publishers"], r["subscriber"], r["n_models"]) for r in fused] == [
        (1, "s0", 2),
        (3, "s0", 4),
        (3, "s1", 4),
    ]
    assert all(0.0 <= r["score"] <= 1.0 for r in records)
    with pytest.raises(ValueError, match="unknown CUSTOMIZE protocol"):
        publishers_fold(0, 0, size=tiny_size, customizer="fast")
