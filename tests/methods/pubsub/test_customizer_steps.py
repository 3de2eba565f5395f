"""The steps of CUSTOMIZE (pubsub-ml.txt Algorithm 2): input checks, feature extension (§4 Step 3)
and the selection of ``Sel`` (Step 2), seen through :class:`~pubsubml.methods.Customizer`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from pubsubml.errors import DataValidationError, SchemaMismatchError
from pubsubml.methods import Customizer
from pubsubml.schema import FeatureSchema

pytestmark = pytest.mark.usefixtures("one_thread")


class Threshold:
    """A black box predicting 1 when ``x0 > t``, with fixed confidence."""

    input_features = ("x0",)
    classes = (0, 1)

    def __init__(self, t: float) -> None:
        self.t = t

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        p = np.where(X["x0"].to_numpy() > self.t, 0.8, 0.2)
        return np.column_stack([1 - p, p])


def _frame(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.random((n, 3)), columns=["x0", "x1", "x2"])
    return X, (X["x0"].to_numpy() > 0.5).astype(int)


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


def test_fit_top_ms_refuses_bad_configurations_before_fitting() -> None:
    X, y = _frame(100, 6)
    base = Customizer(models=[Threshold(0.5)], own_model=None, random_state=0)
    with pytest.raises(ValueError, match="top_ms is empty"):
        base.fit_top_ms(X, y, [])
    with pytest.raises(ValueError, match="top_m must be a positive integer"):
        base.fit_top_ms(X, y, [None, 0])


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


def test_feature_extension_uses_public_defaults() -> None:
    schema = FeatureSchema.numeric(["x0", "x1", "x2", "z"], default=0.25)
    seen: list[pd.DataFrame] = []

    class Spy(Threshold):
        input_features = ("z", "x0")

        def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
            seen.append(X)
            return super().predict_proba(X)

    X, y = _frame(100, 4)
    Customizer(models=[Spy(0.5)], own_model=None, schema=schema, random_state=0).fit(X, y)
    assert list(seen[0].columns) == ["z", "x0"]
    assert (seen[0]["z"] == 0.25).all()


def test_bad_input_raises_and_changes_nothing() -> None:
    X, y = _frame(100, 5)
    c = Customizer(models=[Threshold(0.5)], random_state=0)
    with pytest.raises(SchemaMismatchError):
        c.fit(X.to_numpy(), y)
    with pytest.raises(DataValidationError):
        c.fit(X, y[:-1])
    with pytest.raises(SchemaMismatchError, match="not in the public schema"):
        Customizer(schema=FeatureSchema.numeric(["x0"]), random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="top_m"):
        Customizer(top_m=0).fit(X, y)
    with pytest.raises(ValueError, match="nothing to customize"):
        Customizer(own_model=None).fit(X, y)
    assert not hasattr(c, "fusion_model_")
