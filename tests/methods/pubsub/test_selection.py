"""Tests of pubsubml.methods.pubsub.selection: ``Sel``, the best candidates of M^s ∪ Λ_s
(pubsub-ml.txt Algorithm 2, Step 2), alone and through :class:`~pubsubml.methods.Customizer`."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score, r2_score

from methods.pubsub.conftest import Threshold, _frame
from pubsubml.methods import Customizer
from pubsubml.methods.pubsub.selection import SELECTION_METRICS, select_top, selection_metric

pytestmark = pytest.mark.usefixtures("one_thread")


def test_top_m_selects_the_best_by_metric() -> None:
    X, y = _frame(400, 0)
    models = [Threshold(t) for t in (0.9, 0.5, 0.7, 0.55, 0.1, 0.3)]
    c = Customizer(
        models=models, own_model=None, top_m=3, selection_metric="accuracy", random_state=0
    )
    c.fit(X, y)
    Xc, yc = X.iloc[c.fusion_index_], y[c.fusion_index_]
    expected = [accuracy_score(yc, m.predict_proba(Xc).argmax(1)) for m in models]
    np.testing.assert_allclose(c.selection_scores_, expected)
    assert set(c.selected_) == set(np.argsort(expected, kind="stable")[::-1][:3])
    assert c.selected_ids_ == [f"m{i}" for i in sorted(c.selected_)]
    assert len(c.meta_feature_names_) == 3 * 2


def test_selection_metrics_and_all_kept_by_default() -> None:
    X, y = _frame(300, 1)
    y = np.where(X["x1"].to_numpy() > 0.8, 1, 0)  # imbalanced
    models = [Threshold(t) for t in (0.2, 0.5, 0.8)]
    c = Customizer(
        models=models, own_model="forest", selection_metric="balanced_accuracy", random_state=0
    ).fit(X, y)
    assert c.selected_.tolist() == [0, 1, 2, 3]  # own + 3, top_m=None keeps all
    Xc, yc = X.iloc[c.fusion_index_], y[c.fusion_index_]
    assert c.selection_scores_[2] == pytest.approx(
        balanced_accuracy_score(yc, models[1].predict_proba(Xc).argmax(1))
    )
    f1 = Customizer(
        models=models, own_model="forest", selection_metric="f1_minority", top_m=1, random_state=0
    )
    assert f1.fit(X, y).selection_metric_ == "f1_minority"
    with pytest.raises(ValueError, match="does not apply"):
        Customizer(models=models, selection_metric="mse").fit(X, y)


def test_r2_selection_on_a_constant_target_matches_scikit_learn() -> None:
    t = np.full(5, 2.0)
    outs = np.stack([np.full((5, 1), 2.0), np.full((5, 1), 3.0)])
    expected = [r2_score(t, o[:, 0]) for o in outs]
    np.testing.assert_allclose(SELECTION_METRICS["r2"].score(t, outs), expected)
    assert expected == [1.0, 0.0]


def test_f1_minority_is_zero_when_the_minority_is_never_predicted() -> None:
    y = np.array([0, 0, 0, 1])
    never = np.tile([[0.9, 0.1]], (4, 1))[None]
    always = np.tile([[0.1, 0.9]], (4, 1))[None]
    scores = SELECTION_METRICS["f1_minority"].score(y, np.concatenate([never, always]))
    np.testing.assert_allclose(scores, [0.0, 2 * 1 / (4 + 1)])
    assert {name for name, m in SELECTION_METRICS.items() if "regression" in m.tasks} == {
        "mse",
        "r2",
    }


def test_select_top_keeps_the_first_candidate_when_asked_and_ranks_nan_last() -> None:
    metric = SELECTION_METRICS["log_loss"]
    scores = np.array([0.9, 0.2, np.nan, 0.5])
    assert select_top(scores, metric, 2, keep_first=False).tolist() == [1, 3]
    assert select_top(scores, metric, 2, keep_first=True).tolist() == [0, 1]
    assert select_top(scores, metric, None, keep_first=False).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="does not apply"):
        selection_metric("r2", "classification")
    assert selection_metric(None, "regression")[0] == "mse"


def test_vectorized_selection_metrics_match_scikit_learn() -> None:
    from sklearn.metrics import f1_score, log_loss, mean_squared_error

    rng = np.random.default_rng(0)
    y = rng.choice(3, size=60, p=[0.6, 0.3, 0.1])
    out = rng.random((4, 60, 3))
    pred = out.argmax(axis=2)
    expected = {
        "accuracy": [accuracy_score(y, p) for p in pred],
        "balanced_accuracy": [balanced_accuracy_score(y, p) for p in pred],
        "f1_minority": [f1_score(y, p, labels=[2], average="macro") for p in pred],
    }
    for name, ref in expected.items():
        np.testing.assert_allclose(SELECTION_METRICS[name].score(y, out), ref)
    proba = (0.05 + out) / (0.05 + out).sum(axis=2, keepdims=True)  # no probability under 1e-3
    np.testing.assert_allclose(
        SELECTION_METRICS["log_loss"].score(y, proba),
        [log_loss(y, p, labels=[0, 1, 2]) for p in proba],
    )
    t = rng.normal(size=60)
    reg = rng.normal(size=(4, 60, 1))
    np.testing.assert_allclose(
        SELECTION_METRICS["mse"].score(t, reg), [mean_squared_error(t, r[:, 0]) for r in reg]
    )
    np.testing.assert_allclose(
        SELECTION_METRICS["r2"].score(t, reg), [r2_score(t, r[:, 0]) for r in reg]
    )
