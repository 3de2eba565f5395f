"""Stacking personalization (pfl-stacking.txt §3): held-out vs pooled, partitions, DP defaults."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pubsubml.errors import PrivacyBudgetExceededError
from pubsubml.hub import LocalHub
from pubsubml.learners import DPLogisticRegression
from pubsubml.methods import (
    ContributionReport,
    StackingPersonalizer,
    hybrid_partition,
    release_dp_defaults,
    vertical_partition,
)
from pubsubml.methods.stacking.personalizer import dp_median, dp_mode
from pubsubml.privacy import PrivacyLedger
from pubsubml.schema import Feature, FeatureSchema
from pubsubml.sites import Site

pytestmark = pytest.mark.usefixtures("one_thread")

logging.getLogger("absl").setLevel(logging.ERROR)


def test_held_out_and_pooled_stacking(hyperplane: dict[str, Any]) -> None:
    h = hyperplane
    Xs, ys = h["subscriber"]
    Xt, yt = h["test"]
    fitted = {
        mode: StackingPersonalizer(
            stacking=mode, models=h["good"], schema=h["schema"], random_state=0
        ).fit(Xs, ys)
        for mode in ("held_out", "pooled")
    }
    held, pooled = fitted["held_out"], fitted["pooled"]
    assert set(held.train_index_).isdisjoint(held.fusion_index_)
    assert len(pooled.train_index_) == len(pooled.fusion_index_) == len(Xs)
    for est in fitted.values():
        assert est.score(Xt, yt) > 0.6
    # §4.1 (f): stacking on the pooled set leans on the private model (in-sample predictions).
    self_importance = {
        m: ContributionReport.from_customizer(e, "s").self_importance for m, e in fitted.items()
    }
    assert self_importance["pooled"] > self_importance["held_out"]
    with pytest.raises(ValueError, match="stacking"):
        StackingPersonalizer(stacking="both").fit(Xs, ys)


def test_partitions() -> None:
    X = pd.DataFrame(np.arange(60.0).reshape(20, 3), columns=["a", "b", "c"])
    y = np.arange(20) % 2
    cols = vertical_partition(list(X.columns), 4, 0.67, random_state=0)
    assert len(cols) == 4 and all(1 <= len(c) <= 2 and set(c) <= set("abc") for c in cols)
    parts = hybrid_partition(X, y, 4, 0.67, random_state=0)
    rows = np.concatenate([p[0]["a"].to_numpy() if "a" in p[0] else [] for p in parts])
    assert len(set(rows.tolist())) == len(rows)  # disjoint rows
    assert sum(len(p[1]) for p in parts) == 20


def test_dp_median_and_mode() -> None:
    rng = np.random.default_rng(0)
    values = rng.random(2000)
    medians = [dp_median(values, 0.0, 1.0, 1.0, rng) for _ in range(20)]
    assert abs(np.median(medians) - np.median(values)) < 0.02
    assert dp_mode(["a"] * 500 + ["b"] * 100, ["a", "b", "c"], 1.0, rng) == "a"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda rng: dp_median(np.ones(5), 0.0, 1.0, 0.0, rng), "epsilon"),
        (lambda rng: dp_median(np.ones(5), 0.0, 1.0, float("nan"), rng), "epsilon"),
        (lambda rng: dp_median(np.ones(5), 1.0, 1.0, 1.0, rng), "lower < upper"),
        (lambda rng: dp_mode(["a"], [], 1.0, rng), "category"),
        (lambda rng: dp_mode(["a"], ["a"], -1.0, rng), "epsilon"),
    ],
)
def test_dp_median_and_mode_reject_bad_parameters(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(np.random.default_rng(0))


def test_dp_defaults_of_no_column_are_refused_before_the_ledger() -> None:
    from pubsubml.errors import DataValidationError
    from pubsubml.methods.stacking.personalizer import release_dp_defaults

    schema = FeatureSchema(features=(Feature(name="x", lower=0.0, upper=1.0, default=0.5),))
    ledger = PrivacyLedger(site="s", epsilon_budget=1.0, delta=1e-5)
    with pytest.raises(DataValidationError, match="no columns"):
        release_dp_defaults(
            pd.DataFrame(index=range(3)), schema, epsilon=1.0, ledger=ledger, release_id="d"
        )
    assert ledger.releases == []


def test_vertical_federation_with_dp_defaults() -> None:
    # Prepare: the publisher holds a, b; the subscriber holds a, c; b matters.
    rng = np.random.default_rng(1)
    schema = FeatureSchema(
        features=(
            Feature(name="a", lower=0, upper=10, default=5.0),
            Feature(name="b", lower=0, upper=10, default=5.0),
            Feature(name="c", lower=0, upper=10, default=5.0),
        )
    )

    def data(n: int) -> tuple[pd.DataFrame, np.ndarray]:
        X = pd.DataFrame(rng.uniform(0, 10, (n, 3)), columns=["a", "b", "c"])
        X["b"] = rng.uniform(6, 10, n)  # the publisher's b is far from the public default 5
        return X, ((X["a"] + X["b"] + X["c"]) > 15).to_numpy().astype(int)

    ledger = PrivacyLedger(site="pub", epsilon_budget=3.0, delta=1e-5, backend="rdp")
    pub = Site("pub", schema.subset(["a", "b"]), ledger)
    Xp, yp = data(2000)
    # Execute: release DP defaults (charged), then train and publish with them.
    dp_schema, release = release_dp_defaults(
        Xp[["a", "b"]], schema, epsilon=1.0, ledger=ledger, release_id="defaults", noise_seed=0
    )
    model = DPLogisticRegression(schema=dp_schema, classes=[0, 1], epsilon=1.0, random_state=0)
    hub = LocalHub()
    pub.publish(model.fit(Xp[["a", "b"]], yp), hub)
    # Assert: the defaults were charged first, and b's default is the DP median of b.
    assert ledger.releases[0].release_id == "defaults"
    assert release.events[0].epsilon == pytest.approx(0.5)
    assert 7.0 < float(dp_schema["b"].default) < 9.0
    with pytest.raises(PrivacyBudgetExceededError):
        release_dp_defaults(Xp[["a", "b"]], schema, epsilon=50.0, ledger=ledger, release_id="again")
    assert len(ledger.releases) == 2
    # The subscriber lacks b: the published model fills it with the publisher's DP default.
    sub = Site(
        "sub", schema.subset(["a", "c"]), PrivacyLedger(site="sub", epsilon_budget=1.0, delta=1e-5)
    )
    sub.trust(pub.public_key)
    sub.subscribe(hub, "a", task="classification", classes=[0, 1])
    models = sub.pull(hub)
    assert models[0].card.input_schema["b"].default == dp_schema["b"].default
    Xs, ys = data(300)
    Xt, yt = data(500)
    st = StackingPersonalizer(models=models, random_state=0).fit(Xs[["a", "c"]], ys)
    assert st.score(Xt[["a", "c"]], yt) > 0.6
