"""Metrics of the reproduced experiments."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score, roc_auc_score

from pubsubml.experiments.metrics import score


def test_f1_minority_scores_the_least_frequent_class() -> None:
    y = np.array([1, 1, 1, 0, 0])
    pred = np.array([1, 0, 1, 0, 1])
    assert score("f1_minority", y, pred) == pytest.approx(f1_score(y, pred, pos_label=0))


def test_f1_minority_scores_a_declared_class_in_every_test_part() -> None:
    # a test part where the rare outcome happens to be the majority still scores that outcome
    y = np.array([1, 1, 1, 0, 0])
    pred = np.array([1, 0, 1, 0, 1])
    assert score("f1_minority", y, pred, minority=1) == pytest.approx(f1_score(y, pred))


def test_scenarios_declare_their_rare_outcome() -> None:
    from pubsubml.experiments.pubsub.tabular.scenarios import diamonds_sites, distributed_features

    assert distributed_features(seed=0, max_rows=300).minority == 1  # death
    assert diamonds_sites(0, max_rows=100).minority is None


def test_one_minus_mse_and_accuracy() -> None:
    assert score("one_minus_mse", [0.0, 1.0], [0.5, 1.0]) == pytest.approx(1 - 0.125)
    assert score("accuracy", [0, 1, 1], [0, 1, 0]) == pytest.approx(2 / 3)
    assert score("balanced_accuracy", [0, 1, 1], [0, 1, 0]) == pytest.approx(0.75)


def test_roc_auc_uses_probabilities_not_labels() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    p1 = np.clip(0.3 * y + rng.random(200) * 0.7, 0, 1)
    proba = np.column_stack([1 - p1, p1])
    auc = score("roc_auc", y, proba=proba, classes=[0, 1])
    assert auc == pytest.approx(roc_auc_score(y, p1))
    hard = roc_auc_score(y, (p1 > 0.5).astype(int))
    assert auc != pytest.approx(hard)
    multi = rng.dirichlet(np.ones(3), size=200)
    y3 = rng.integers(0, 3, 200)
    assert score("roc_auc", y3, proba=multi, classes=[0, 1, 2]) == pytest.approx(
        roc_auc_score(y3, multi, multi_class="ovr", average="macro")
    )


def test_bad_metric_inputs() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        score("auc", [0], [0])
    with pytest.raises(ValueError, match="probabilities"):
        score("roc_auc", [0, 1], [0, 1])
    with pytest.raises(ValueError, match="shape"):
        score("roc_auc", [0, 1], proba=np.ones((2, 3)), classes=[0, 1])
