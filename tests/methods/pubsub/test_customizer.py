"""Customizer (CUSTOMIZE, pubsub-ml.txt Algorithm 2) on data where the answer is known."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import cross_val_score

from methods.pubsub.conftest import Threshold, _frame
from pubsubml.errors import LabelError, SchemaMismatchError
from pubsubml.learners import DPLogisticRegression
from pubsubml.methods import Customizer, contribution_scores
from pubsubml.schema import FeatureSchema

pytestmark = pytest.mark.usefixtures("one_thread")


class BlackBox:
    """A fitted scikit-learn model seen only through its outputs, as a published model is."""

    def __init__(self, estimator: Any, features: list[str], model_id: str | None = None) -> None:
        self.estimator = estimator
        self.input_features = list(features)
        self.classes = getattr(estimator, "classes_", None)
        if model_id is not None:
            self.model_id = model_id

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.estimator.predict_proba(X[self.input_features].to_numpy()))

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.estimator.predict(X[self.input_features].to_numpy()))


def test_pure_noise_publishers_are_ignored(hyperplane: dict[str, Any]) -> None:
    # Prepare: 5 DP publishers of the concept, 5 trained on pure label noise (§8.2.5).
    h = hyperplane
    Xs, ys = h["subscriber"]
    Xt, yt = h["test"]
    models = h["good"] + h["noise"]
    ids = [f"good{i}" for i in range(5)] + [f"noise{i}" for i in range(5)]
    # Execute
    c = Customizer(models=models, model_ids=ids, schema=h["schema"], random_state=0).fit(Xs, ys)
    scores = contribution_scores(c)
    own_acc = accuracy_score(yt, c.own_model_.predict(Xt))
    # Assert
    assert max(scores[f"noise{i}"] for i in range(5)) < 0.05
    assert sum(scores[f"noise{i}"] for i in range(5)) < scores["own"]
    assert c.score(Xt, yt) >= own_acc - 0.01


def test_complementary_features_never_lose_and_beat_the_paper_protocol(
    split_features: dict[str, Any],
) -> None:
    # Prepare: subscriber holds A and C with few rows; publishers hold A, B and B, C (§8.1.3).
    sf = split_features
    A, C, schema, data = sf["A"], sf["C"], sf["schema"], sf["data"]
    publishers = []
    for cols in ([*A, "b"], ["b", *C]):
        X, y = data(3000)
        publishers.append(
            DPLogisticRegression(
                schema=schema.subset(cols), classes=[0, 1], epsilon=1.0, random_state=1
            ).fit(X[cols], y)
        )
    Xs, ys = data(150)
    Xt, yt = data(4000)
    sub = [*A, *C]
    paper = dict(cv="holdout", own_model="mlp", fusion_model="linear", selection_metric="accuracy")
    # Execute: five seeds of the subscriber's folds, the default and the paper's protocol.
    scores = np.array(
        [
            [
                Customizer(models=ms, schema=schema, random_state=rep, **kw)
                .fit(Xs[sub], ys)
                .score(Xt[sub], yt)
                for ms, kw in ((publishers, {}), ([], {}), (publishers, paper))
            ]
            for rep in range(5)
        ]
    ).mean(axis=0)
    both, own, both_paper = scores
    # Assert: the subscriber never loses by subscribing, and the cross-fitted, stacked default
    # does better than the paper's Tra/Cus split with a fully connected fusion.
    assert both >= own - 0.005
    assert both > both_paper


def test_deterministic_under_random_state() -> None:
    X, y = _frame(300, 2)
    models = [Threshold(0.4), Threshold(0.6)]
    a = Customizer(models=models, random_state=7).fit(X, y)
    b = Customizer(models=models, random_state=7).fit(X, y)
    c = Customizer(models=models, own_model="logistic", random_state=8).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.folds_ is not None and b.folds_ is not None and c.folds_ is not None
    for (_, held_a), (_, held_b) in zip(a.folds_, b.folds_, strict=True):
        np.testing.assert_array_equal(held_a, held_b)
    assert not np.array_equal(a.folds_[0][1], c.folds_[0][1])
    h = Customizer(models=models, own_model="forest", cv="holdout", random_state=7).fit(X, y)
    h8 = Customizer(models=models, own_model="forest", cv="holdout", random_state=8).fit(X, y)
    assert set(h.train_index_).isdisjoint(h.fusion_index_)
    assert not np.array_equal(h.fusion_index_, h8.fusion_index_)


def test_clone_shares_models_and_cross_val_score_runs() -> None:
    X, y = _frame(240, 3)
    models = [Threshold(0.5), Threshold(0.8)]
    c = Customizer(models=models, own_model="forest", random_state=0)
    twin = clone(c)
    assert twin.models is models and not hasattr(twin, "fusion_model_")
    scores = cross_val_score(c, X, y, cv=3)
    assert scores.shape == (3,) and scores.min() > 0.8


def test_multiclass_label_alignment_and_rejection() -> None:
    Xa, y = make_classification(
        n_samples=600, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=0
    )
    X = pd.DataFrame(Xa, columns=list("abcd"))
    full = LogisticRegression().fit(Xa, y)
    # Publisher knowing only classes {2, 0}, in that order.
    mask = y != 1
    partial = LogisticRegression().fit(Xa[mask], np.where(y[mask] == 2, 0, 1))
    partial.classes_ = np.array([2, 0])
    models = [BlackBox(full, list("abcd")), BlackBox(partial, list("abcd"))]
    c = Customizer(models=models, own_model="logistic", fusion_model="linear", random_state=0)
    m = c.fit(X, y).meta_features(X.iloc[:50])
    assert m.shape == (50, 3 * 3)
    np.testing.assert_allclose(m[:, 6:9][:, 1], 0.0)  # class 1 column inserted as zeros
    np.testing.assert_allclose(m[:, 6], partial.predict_proba(Xa[:50])[:, 1])
    assert c.predict_proba(X).shape == (600, 3) and c.score(X, y) > 0.6
    alien = LogisticRegression().fit(Xa, y + 5)
    with pytest.raises(LabelError, match="outside"):
        Customizer(models=[BlackBox(alien, list("abcd"))], random_state=0).fit(X, y)

    class Bare:
        input_features = ("a",)

        def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
            return np.full((len(X), 3), 1 / 3)

    with pytest.raises(LabelError, match="declares no classes"):
        Customizer(models=[Bare()], random_state=0).fit(X, y)


def test_regression() -> None:
    Xa, y = make_regression(n_samples=400, n_features=4, noise=5.0, random_state=0)
    X = pd.DataFrame(Xa, columns=list("abcd"))
    pub = BlackBox(LinearRegression().fit(Xa[:, :2], y), ["a", "b"])
    pub2 = BlackBox(LinearRegression().fit(Xa[:, 2:], y), ["c", "d"])
    c = Customizer(models=[pub, pub2], task="regression", own_model="forest", random_state=0)
    c.fit(X, y)
    assert c.selection_metric_ == "mse" and c.predict(X).shape == (400,)
    assert c.score(X, y) > 0.9
    assert cross_val_score(c, X, y, cv=2).shape == (2,)


# ---- the stacked fusion ----------------------------------------------------------------------
def test_pure_noise_publishers_leave_own(hyperplane: dict[str, Any]) -> None:
    h = hyperplane
    Xs, ys = h["subscriber"]
    Xt, yt = h["test"]
    c = Customizer(models=h["noise"], schema=h["schema"], random_state=0).fit(Xs, ys)
    own_acc = accuracy_score(yt, c.own_model_.predict(Xt))
    assert abs(c.score(Xt, yt) - own_acc) <= 0.005
    assert c.fusion_weights_["own"] > 0
    assert all(abs(w) < 0.1 for k, w in c.fusion_weights_.items() if k != "own")
    # The one-standard-error rule, passed as a StackedFusion: its shape comes from the data.
    from pubsubml.methods import StackedFusion

    cons = Customizer(
        models=h["noise"],
        schema=h["schema"],
        fusion_model=StackedFusion(rule="1se"),
        random_state=0,
    ).fit(Xs, ys)
    assert cons.stacked_ and cons.fusion_model_.rule == "1se"
    assert cons.fusion_model_.penalty_ >= c.fusion_model_.penalty_
    assert abs(cons.score(Xt, yt) - own_acc) <= 0.005


def test_publisher_with_a_feature_the_subscriber_lacks_lifts_above_own() -> None:
    # The label depends on ten features the subscriber holds and on "z", which only the
    # publisher holds (the subscriber's rows get its public default, pubsub-ml.txt §4 Step 3).
    # The publisher learned the concept from 3,000 rows; the subscriber has 80.
    rng = np.random.default_rng(1)
    w = rng.normal(size=10)
    cols = [f"x{i}" for i in range(10)]

    def data(n: int) -> tuple[pd.DataFrame, np.ndarray]:
        X = pd.DataFrame(rng.random((n, 11)) - 0.5, columns=[*cols, "z"])
        y = (X[cols].to_numpy() @ w + 2.0 * X["z"] > 0).astype(int)
        return X, y

    Xp, yp = data(3000)
    pub = BlackBox(LogisticRegression().fit(Xp.to_numpy(), yp), [*cols, "z"])
    schema = FeatureSchema.numeric([*cols, "z"], lower=-0.5, upper=0.5, default=0.0)
    Xs, ys = data(80)
    Xt, yt = data(4000)
    c = Customizer(models=[pub], schema=schema, random_state=0).fit(Xs[cols], ys)
    own_acc = accuracy_score(yt, c.own_model_.predict(Xt[cols]))
    assert not c.fallback_ and c.fusion_weights_["m0"] > 0.1
    assert c.score(Xt[cols], yt) > own_acc + 0.03


def test_stacked_fusion_infinite_penalty_is_the_own_model() -> None:
    from pubsubml.methods import StackedFusion
    from pubsubml.methods.pubsub.fusion import centred_log_odds

    rng = np.random.default_rng(4)
    p_own = rng.uniform(0.05, 0.95, 300)
    y = (rng.random(300) < p_own).astype(int)
    own = centred_log_odds(np.column_stack([1 - p_own, p_own]))
    noise = centred_log_odds(rng.dirichlet([1, 1], 300))
    f = StackedFusion(block_width=2, penalties=[np.inf], random_state=0)
    f.fit(np.hstack([own, noise]), y)
    assert f.fallback_ and f.weights_.tolist() == [1.0, 0.0]
    np.testing.assert_allclose(f.predict_proba(np.hstack([own, noise]))[:, 1], p_own)
    g = StackedFusion(block_width=2, random_state=0).fit(np.hstack([own, noise]), y)
    assert g.weights_[0] > 0.5 and abs(g.weights_[1]) < 0.2 and np.isinf(g.penalty_) == g.fallback_


def test_penalty_rules_one_standard_error_keeps_the_simpler_model() -> None:
    from pubsubml.methods.pubsub.fusion import choose_penalty

    rng = np.random.default_rng(6)
    base = rng.exponential(0.6, 400)
    # λ = 0.01 gains 0.01 nats on average, far less than the per-row noise of the difference.
    small_gain = {0.01: base - 0.01 + rng.normal(0, 0.3, 400), 1.0: base, np.inf: base + 0.001}
    assert choose_penalty(small_gain, "min") == 0.01
    assert np.isinf(choose_penalty(small_gain, "1se"))
    # A gain of 0.2 nats on every row is far beyond one SE: both rules take it.
    large_gain = {0.01: base - 0.2 + rng.normal(0, 0.01, 400), np.inf: base}
    assert choose_penalty(large_gain, "min") == choose_penalty(large_gain, "1se") == 0.01
    with pytest.raises(ValueError, match="unknown rule"):
        choose_penalty(large_gain, "max")


def test_stacked_fusion_rule_is_validated_and_recorded() -> None:
    from pubsubml.methods import StackedFusion
    from pubsubml.methods.pubsub.fusion import centred_log_odds

    rng = np.random.default_rng(7)
    p = rng.uniform(0.05, 0.95, 200)
    y = (rng.random(200) < p).astype(int)
    M = np.hstack([centred_log_odds(np.column_stack([1 - p, p])), rng.normal(size=(200, 2))])
    with pytest.raises(ValueError, match="unknown rule"):
        StackedFusion(block_width=2, rule="best").fit(M, y)
    f = StackedFusion(block_width=2, rule="1se", random_state=0).fit(M, y)
    g = StackedFusion(block_width=2, rule="min", random_state=0).fit(M, y)
    assert f.cv_losses_ == g.cv_losses_  # the same folds and fits; only the choice differs
    assert f.penalty_ >= g.penalty_


def test_regression_stacked_on_public_target_bounds() -> None:
    # A publisher fitted on 3,000 rows; the subscriber has 40 noisy ones.
    rng = np.random.default_rng(5)
    w = rng.normal(size=6)

    def data(n: int) -> tuple[pd.DataFrame, np.ndarray]:
        X = pd.DataFrame(rng.random((n, 6)), columns=list("abcdef"))
        return X, X.to_numpy() @ w * 10 + rng.normal(scale=3.0, size=n)

    Xp, yp = data(3000)
    pub = BlackBox(LinearRegression().fit(Xp.to_numpy(), yp), list("abcdef"))
    Xs, ys = data(40)
    Xt, yt = data(2000)
    lo, hi = -60.0, 60.0  # public bounds of the target
    c = Customizer(models=[pub], task="regression", target_bounds=(lo, hi), random_state=0)
    c.fit(Xs, ys)
    assert c.target_scale_ == (lo, hi - lo)
    assert c.fusion_weights_["m0"] > 0.3
    assert c.score(Xt, yt) >= c.own_model_.score(Xt, yt)
    with pytest.raises(ValueError, match="target_bounds"):
        Customizer(task="regression", target_bounds=(1, 0)).fit(Xs, ys)


# ---- what a subscribed model needs (docs/customization.md) -------------------------------------
def test_a_model_needs_only_named_inputs_outputs_and_labels() -> None:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.random((200, 3)), columns=["a", "b", "c"])
    y = (X.a + X.b > 1).astype(int).to_numpy()
    plain = LogisticRegression().fit(X[["b", "a"]], y)

    class Spy:
        """``feature_names_in_``, ``classes_`` and ``predict_proba``, recording its inputs."""

        def __init__(self) -> None:
            self.feature_names_in_, self.classes_ = plain.feature_names_in_, plain.classes_
            self.seen: list[pd.DataFrame] = []

        def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
            self.seen.append(frame)
            return np.asarray(plain.predict_proba(frame))

    spy = Spy()
    schema = FeatureSchema.numeric(["a", "b", "c"])

    c = Customizer(models=[spy], schema=schema, own_model="logistic", random_state=0)
    c.fit(X[["a", "c"]], y)  # the subscriber lacks b: the model gets b's public default

    assert c.candidate_ids_ == ["own", "m0"]
    assert all(list(frame.columns) == ["b", "a"] for frame in spy.seen)
    assert all(frame["b"].eq(0.5).all() for frame in spy.seen)
    assert Customizer(models=[plain], own_model="logistic").fit(X, y).candidate_ids_[1] == "m0"

    class Nameless:
        classes = (0, 1)

        def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
            return np.full((len(X), 2), 0.5)

    with pytest.raises(SchemaMismatchError, match="declares no input_features"):
        Customizer(models=[Nameless()], own_model="logistic").fit(X, y)


def _doc_block(heading: str) -> str:
    """The first Python block under ``heading`` in docs/customization.md."""
    text = (Path(__file__).parents[3] / "docs" / "customization.md").read_text(encoding="utf-8")
    assert heading in text, f"docs/customization.md has no section {heading!r}"
    section = text.split(heading, 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_documented_pubsub_star_example_runs() -> None:
    namespace: dict[str, Any] = {}

    exec(compile(_doc_block("### PubSub-ML* outside the harness"), "doc", "exec"), namespace)

    star, artifact = namespace["star"], namespace["artifact"]
    assert star.candidate_ids_ == ["own", "m0", "m1"] and not star.fallback_
    assert artifact.card.privacy.epsilon == np.inf == namespace["received"].epsilon


@pytest.mark.parametrize("own", ["logistic", None])
def test_fit_top_ms_equals_one_fit_per_top_m(own: str | None) -> None:
    X, y = _frame(300, 3)
    models = [Threshold(t) for t in (0.9, 0.5, 0.7, 0.55, 0.1, 0.3)]
    base = Customizer(models=models, own_model=own, random_state=4)
    top_ms = (None, 4, 2)
    shared = base.fit_top_ms(X, y, top_ms)
    assert not hasattr(base, "fusion_model_")  # self is left unchanged
    X_new, _ = _frame(50, 5)
    for top_m, c in zip(top_ms, shared, strict=True):
        alone = Customizer(models=models, own_model=own, top_m=top_m, random_state=4).fit(X, y)
        assert c.top_m == top_m
        assert c.selected_ids_ == alone.selected_ids_
        np.testing.assert_allclose(c.selection_scores_, alone.selection_scores_)
        np.testing.assert_allclose(c.predict_proba(X_new), alone.predict_proba(X_new))
        assert c.fusion_weights_ == pytest.approx(alone.fusion_weights_)
        assert set(c.fit_timings_) == {"own", "outputs", "select", "fuse"}
    assert len(shared[2].selected_) == 2  # M^s, when there is one, counts among the top m
