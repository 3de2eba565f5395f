"""The small-subscriber family: sizes, disjoint sites, an external test set, reporting, smoke run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pubsubml.data import hyperplane
from pubsubml.experiments.pubsub import models as pubsub_models
from pubsubml.experiments.pubsub.compared import (
    MethodConfig,
    Scenario,
    SimSite,
    _fold_rows,
    evaluate_fold,
    publisher_learner,
)
from pubsubml.experiments.pubsub.small import (
    FULL_SIZES,
    SMALL_DATASETS,
    SMOKE_SIZES,
    SmallSizes,
    publisher_sizes,
    small_scenario,
    small_split,
    stratified_order,
)
from pubsubml.experiments.pubsub.small_experiment import (
    SHARED,
    paired_differences,
    summarize_small,
)

HI_PUBLISHER_ROWS = 22_272 - 2_000 - 2_000  # HI's rows less the subscriber pool and the test set


def _rows(frame: pd.DataFrame) -> set[tuple[float, ...]]:
    """Hyperplane rows as tuples: continuous features, so equal tuples are the same row."""
    return set(map(tuple, frame.to_numpy(dtype=float)))


# ---- sizes and splits ------------------------------------------------------------------------
def test_publisher_sizes_are_drawn_in_range_and_fixed_by_the_seed() -> None:
    counts = set()
    for seed in range(30):
        drawn = publisher_sizes(seed)
        counts.add(len(drawn))
        assert 5 <= len(drawn) <= 10
        assert ((drawn >= 1000) & (drawn <= 3000)).all()
        np.testing.assert_array_equal(drawn, publisher_sizes(seed))
    assert len(counts) > 1  # the number of publishers varies with the seed
    assert not np.array_equal(publisher_sizes(0), publisher_sizes(1))


def test_split_is_disjoint_sized_nested_and_stratified() -> None:
    y = np.repeat(np.arange(4), [400, 300, 200, 100])  # 1,000 rows, shares .4 .3 .2 .1
    sizes = np.array([150, 250])
    splits = {
        n: small_split(
            y, n_sub=n, pub_sizes=sizes, test_rows=300, pool_rows=200, seed=3, stratify=True
        )
        for n in (20, 50, 200)
    }
    for n, split in splits.items():
        parts = [*split.publishers, split.subscriber, split.test]
        assert [len(p) for p in parts] == [150, 250, n, 300]
        together = np.concatenate(parts)
        assert len(np.unique(together)) == len(together)  # pairwise disjoint
        # the subscriber has the class shares of the rows outside the test set, to within one
        rest = np.setdiff1d(np.arange(len(y)), split.test)
        shares = np.bincount(y[rest], minlength=4) / len(rest)
        counts = np.bincount(y[split.subscriber], minlength=4)
        assert np.all(np.abs(counts - n * shares) < 1.0)
    # only the subscriber depends on n_sub, and its rows are nested
    for split in (splits[50], splits[200]):
        np.testing.assert_array_equal(split.test, splits[20].test)
        for a, b in zip(split.publishers, splits[20].publishers, strict=True):
            np.testing.assert_array_equal(a, b)
    assert set(splits[20].subscriber) <= set(splits[50].subscriber) <= set(splits[200].subscriber)


def test_split_refuses_impossible_sizes() -> None:
    y = np.zeros(100)
    with pytest.raises(ValueError, match="n_sub"):
        small_split(y, n_sub=30, pub_sizes=np.array([10]), test_rows=10, pool_rows=20, seed=0,
                    stratify=False)  # fmt: skip
    with pytest.raises(ValueError, match="population has 100"):
        small_split(y, n_sub=5, pub_sizes=np.array([80]), test_rows=20, pool_rows=10, seed=0,
                    stratify=False)  # fmt: skip


def test_stratified_order_keeps_every_prefix_stratified() -> None:
    labels = np.random.default_rng(0).integers(0, 3, 500)
    order = stratified_order(labels, seed=1)
    assert sorted(order.tolist()) == list(range(500))
    shares = np.bincount(labels) / len(labels)
    for k in (10, 37, 100, 250):
        assert np.all(np.abs(np.bincount(labels[order[:k]], minlength=3) - k * shares) < 1.0)


# ---- scenarios -------------------------------------------------------------------------------
@pytest.mark.parametrize("dataset", ["hyperplane", "hi", "diamonds"])
def test_full_scenario_sizes_and_external_test(dataset: str) -> None:
    for seed in range(3):
        sc = small_scenario(dataset, 100, seed=seed)
        assert sc.test is not None
        sizes = [len(p.y) for p in sc.publishers]
        drawn = publisher_sizes(seed)
        assert len(sizes) == len(drawn) and 5 <= len(sizes) <= 10
        assert len(sc.subscriber.y) == 100
        if dataset == "hi":  # short: a 2,000-row test set, publishers scaled down if needed
            assert len(sc.test.y) == 2000
            assert sum(sizes) <= HI_PUBLISHER_ROWS
            if drawn.sum() <= HI_PUBLISHER_ROWS:
                assert sizes == drawn.tolist()
        else:
            assert len(sc.test.y) == 5000
            assert sizes == drawn.tolist()
        assert list(sc.test.X.columns) == list(sc.subscriber.X.columns) == sc.schema.names
    assert sc.task == ("regression" if dataset == "diamonds" else "classification")


def test_hi_scales_publishers_down_when_a_seed_draws_too_many_rows() -> None:
    seed = next(s for s in range(100) if publisher_sizes(s).sum() > HI_PUBLISHER_ROWS)
    drawn = publisher_sizes(seed)
    sizes = np.array([len(p.y) for p in small_scenario("hi", 100, seed=seed).publishers])
    assert HI_PUBLISHER_ROWS - len(drawn) <= sizes.sum() <= HI_PUBLISHER_ROWS
    np.testing.assert_allclose(sizes / sizes.sum(), drawn / drawn.sum(), atol=1e-3)


def test_sites_and_test_rows_are_disjoint_and_deterministic() -> None:
    small, large = (small_scenario("hyperplane", n, seed=4) for n in (200, 2000))
    parts = [*(p.X for p in large.publishers), large.subscriber.X]
    assert large.test is not None and small.test is not None
    seen = _rows(large.test.X)
    assert len(seen) == len(large.test.y)
    for frame in parts:  # no row is in two sites, none in the test set
        rows = _rows(frame)
        assert len(rows) == len(frame) and not rows & seen
        seen |= rows
    # the same seed gives the same sites; a larger subscriber keeps the smaller one's rows
    again = small_scenario("hyperplane", 200, seed=4)
    pd.testing.assert_frame_equal(again.subscriber.X, small.subscriber.X)
    assert again.test is not None
    pd.testing.assert_frame_equal(again.test.X, small.test.X)
    pd.testing.assert_frame_equal(small.test.X, large.test.X)
    for a, b in zip(small.publishers, large.publishers, strict=True):
        pd.testing.assert_frame_equal(a.X, b.X)
    assert _rows(small.subscriber.X) <= _rows(large.subscriber.X)
    other = small_scenario("hyperplane", 200, seed=5)
    assert not _rows(other.subscriber.X) & _rows(small.subscriber.X)


@pytest.mark.parametrize("dataset", SMALL_DATASETS)
def test_smoke_scenarios_give_every_class_rows_for_five_folds(dataset: str) -> None:
    sc = small_scenario(dataset, 60, seed=0, sizes=SMOKE_SIZES)
    assert sc.test is not None and len(sc.test.y) in (SMOKE_SIZES.test_rows, 200)
    if sc.task == "classification":
        assert sc.classes is not None
        assert np.bincount(sc.subscriber.y, minlength=len(sc.classes)).min() >= 5


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown data set"):
        small_scenario("nela", 100, seed=0)
    with pytest.raises(ValueError, match="n_sub"):
        small_scenario("hyperplane", 2001, seed=0)
    with pytest.raises(ValueError, match="bad ranges"):
        publisher_sizes(0, SmallSizes(publishers=(3, 2)))
    assert FULL_SIZES.pool_rows == 2000


# ---- the external test set in evaluate_fold --------------------------------------------------
def _external(n_sub: int = 80, n_test: int = 400) -> Scenario:
    data = hyperplane(2 * 150 + n_sub + n_test, seed=9)
    cut = np.cumsum([150, 150, n_sub])

    def site(a: int, b: int) -> SimSite:
        return SimSite(data.X.iloc[a:b].reset_index(drop=True), data.y[a:b])

    return Scenario(
        publishers=[site(0, cut[0]), site(cut[0], cut[1])],
        subscriber=site(cut[1], cut[2]),
        schema=data.schema,
        task="classification",
        classes=(0, 1),
        metric="accuracy",
        test=site(cut[2], len(data)),
    )


def test_external_test_trains_every_site_on_all_its_rows() -> None:
    sc = _external()
    trains, tr, te = _fold_rows(sc, seed=0, fold=3, folds=5)
    assert [len(t) for t in trains] == [150, 150] and len(tr) == 80 and len(te) == 0
    shared = Scenario(
        publishers=[SimSite(p.X, p.y, ids=np.arange(len(p.y))) for p in sc.publishers],
        subscriber=SimSite(sc.subscriber.X, sc.subscriber.y, ids=np.arange(80)),
        schema=sc.schema,
        task="classification",
        classes=(0, 1),
        metric="accuracy",
        test=sc.test,
    )
    with pytest.raises(ValueError, match="row ids"):
        _fold_rows(shared, seed=0, fold=0, folds=5)


def test_evaluate_fold_scores_on_the_external_test_set(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Majority:  # stands in for OwnLearner: records what it is fitted and scored on
        def __init__(self, **params: Any) -> None:
            seen["params"] = params

        def fit(self, X: pd.DataFrame, y: np.ndarray) -> Majority:
            seen["fit_rows"] = len(X)
            self.label_ = int(np.bincount(y).argmax())
            self.choice_ = "majority"
            return self

        def predict(self, X: pd.DataFrame) -> np.ndarray:
            seen["scored_rows"] = len(X)
            return np.full(len(X), self.label_)

        def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
            proba = np.zeros((len(X), 2))
            proba[:, self.label_] = 1.0
            return proba

    monkeypatch.setattr(pubsub_models, "OwnLearner", Majority)
    sc = _external()
    assert sc.test is not None
    (record,) = evaluate_fold(sc, seed=1, fold=0, methods=["Own"], config=MethodConfig())
    assert seen["fit_rows"] == 80 and seen["scored_rows"] == 400
    assert seen["params"]["kind"] == "auto"
    label = int(np.bincount(sc.subscriber.y).argmax())
    assert record["score"] == pytest.approx(float(np.mean(sc.test.y == label)))
    assert record["own_choice"] == "majority" and record["epsilon"] == np.inf


def test_publisher_learner_types() -> None:
    assert publisher_learner("classification", "mlp", dp=True) is None
    assert publisher_learner("classification", "sgd_linear", dp=True) == "dp_sgd_logistic"
    assert publisher_learner("regression", "sgd_linear", dp=True) == "dp_sgd_linear"
    assert publisher_learner("classification", "sgd_linear", dp=False) == "logistic_regression"
    assert publisher_learner("regression", "sgd_linear", dp=False) == "linear_regression"
    assert publisher_learner("classification", "forest", dp=False) is None  # the paper's network
    with pytest.raises(ValueError, match="unknown publisher learner"):
        publisher_learner("regression", "forest", dp=True)


# ---- reporting -------------------------------------------------------------------------------
def _fake_table() -> pd.DataFrame:
    rows = []
    own = [0.70, 0.60, 0.80]
    fl = [0.65, 0.55, 0.85]
    ours = {"mlp": [0.75, 0.62, 0.86], "sgd_linear": [0.70, 0.60, 0.80]}
    for seed in range(3):
        for repeat in range(2):  # repeats are averaged before the SE over seeds
            jitter = 0.01 * (repeat - 0.5)
            common = {"dataset": "hi", "n_sub": 100, "seed": seed, "fold": repeat, "auc": 0.8}
            for method, value in (("Own", own), ("FedAvg(F)", fl)):
                rows.append(
                    common | {"publisher": SHARED, "method": method, "score": value[seed] + jitter}
                )
            for kind, value in ours.items():
                rows.append(
                    common
                    | {"publisher": kind, "method": "PubSub-ML", "score": value[seed] + jitter}
                    | {"fallback": kind == "sgd_linear" or seed == 0}
                )
    return pd.DataFrame(rows)


def test_paired_differences_are_per_seed() -> None:
    diffs = paired_differences(_fake_table(), "Own")
    mlp = diffs[diffs["publisher"] == "mlp"].sort_values("seed")
    np.testing.assert_allclose(mlp["diff"], [0.05, 0.02, 0.06])


def test_summary_shows_differences_with_se_over_seeds_and_fallbacks() -> None:
    summary = summarize_small(_fake_table())
    assert summary[["publisher", "method"]].values.tolist() == [
        [SHARED, "Own"],
        [SHARED, "FedAvg(F)"],
        ["mlp", "PubSub-ML"],
        ["sgd_linear", "PubSub-ML"],
    ]
    assert (summary["n"] == 3).all()  # seeds, not seeds × repeats
    mlp = summary[summary["publisher"] == "mlp"].iloc[0]
    d = np.array([0.05, 0.02, 0.06])
    assert mlp["row − Own"] == f"{d.mean():.4f} ± {d.std(ddof=1) / np.sqrt(3):.4f}"
    d = np.array([0.10, 0.07, 0.01])
    assert mlp["row − FedAvg(F)"] == f"{d.mean():.4f} ± {d.std(ddof=1) / np.sqrt(3):.4f}"
    assert mlp["fallback"] == "33%"
    sgd = summary[summary["publisher"] == "sgd_linear"].iloc[0]
    assert sgd["row − Own"] == "0.0000 ± 0.0000" and sgd["fallback"] == "100%"
    own = summary[summary["method"] == "Own"].iloc[0]
    assert own["row − Own"] == "" and own["fallback"] == ""
    assert own["ROC AUC"].startswith("0.800")


# ---- the command -----------------------------------------------------------------------------
def test_bad_options_exit_with_a_clear_error(tmp_path: Path) -> None:
    from pubsubml.cli import app

    for args, option in (
        (["--seeds", "0"], "--seeds"),
        (["--repeats", "0"], "--repeats"),
        (["--fl-dp", "server"], "--fl-dp"),
    ):
        result = CliRunner().invoke(
            app, ["bench", "pubsub-small", "--smoke", *args, "--out-dir", str(tmp_path)]
        )
        assert result.exit_code == 2 and option in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_smoke_run_writes_the_table(tmp_path: Path) -> None:
    from pubsubml.cli import app

    result = CliRunner().invoke(
        app, ["bench", "pubsub-small", "--smoke", "--seeds", "1", "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    for ext in ("csv", "md", "png"):
        assert (tmp_path / f"pubsub-small.{ext}").stat().st_size > 0
    table = pd.read_csv(tmp_path / "pubsub-small.csv")
    assert set(table["dataset"]) == set(SMALL_DATASETS)
    assert set(table["publisher"]) == {SHARED, "mlp", "sgd_linear"}
    assert set(table["method"]) == {"Own", "PubSub-ML", "PubSub-ML*", "FedAvg(V)", "FedAvg(F)",
                                    "Joint"}  # fmt: skip
    ours = table[table["method"] == "PubSub-ML"]
    assert ours["fallback"].notna().all() and (ours["epsilon"] <= 1.0).all()
    assert (table["test_rows"] >= 200).all() and set(table["n_sub"]) == {60}
    text = (tmp_path / "pubsub-small.md").read_text()
    assert "row − Own" in text and "row − FedAvg(F)" in text and "±" in text
