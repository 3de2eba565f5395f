"""Stacking experiments: vertical feature proportions, public defaults, smoke runs of the CLI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from pubsubml.cli.stacking import BENCHMARKS, register
from pubsubml.experiments.stacking import experiments as stacking_experiments
from pubsubml.experiments.stacking.experiments import (
    label_task,
    load_binary,
    natural_task,
    quantity_task,
    vertical_task,
)
from pubsubml.experiments.stacking.models import client_features, noisy_defaults
from pubsubml.privacy.accountant import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import Feature, FeatureSchema


@pytest.mark.parametrize("p", [0.25, 0.5, 0.75, 1.0])
def test_vertical_clients_hold_the_requested_proportion_of_predictors(p: float) -> None:
    columns = [f"f{i}" for i in range(12)]
    sets = client_features(columns, 10, p, seed=0)
    measured = [len(set(s)) / len(columns) for s in sets]
    assert measured == [round(p * 12) / 12] * 10
    assert all(set(s) <= set(columns) and len(set(s)) == len(s) for s in sets)
    if p < 1:
        assert len({tuple(s) for s in sets}) > 1  # drawn at random per client


def test_noisy_defaults_are_mode_and_median_plus_scaled_noise() -> None:
    schema = FeatureSchema(
        features=(
            Feature(name="x", lower=-100.0, upper=100.0, default=0.0),
            Feature(name="c", kind="categorical", categories=("a", "b"), default="a"),
        )
    )
    X = pd.DataFrame({"x": [1.0, 2.0, 3.0, 10.0], "c": ["b", "b", "a", "b"]})
    exact = noisy_defaults(X, schema, 0.0, np.random.default_rng(0))
    assert exact.defaults == {"x": 2.5, "c": "b"}
    draws = [
        noisy_defaults(X, schema, 2.0, np.random.default_rng(s))["x"].default for s in range(400)
    ]
    assert np.std(draws) == pytest.approx(2.0 * np.std(X.x, ddof=1), rel=0.15)


def test_dp_defaults_are_charged_to_each_clients_ledger() -> None:
    records = vertical_task(
        0,
        0,
        p=0.5,
        noise=0.0,
        defaults="dp",
        models="rf",
        dataset="hi",
        max_rows=200,
        trees=5,
        n_clients=3,
    )
    assert all(r["defaults_epsilon"] == pytest.approx(1.0, abs=1e-3) for r in records)
    edges = [r for r in records if r["record"] == "edge"]
    assert all(0.0 <= r["jaccard"] <= 1.0 for r in edges)


def test_dp_defaults_and_dp_public_model_compose_on_the_clients_ledger() -> None:
    kw = {"p": 0.5, "noise": 0.0, "dataset": "hi", "max_rows": 200, "trees": 5, "n_clients": 3}
    records = vertical_task(0, 0, defaults="dp", models="dp", dp_kinds="dp_lr_e1+dp_mlp_e1", **kw)
    clients = [r for r in records if r["record"] == "client"]
    by_kind = {r["public"]: r["total_epsilon"] for r in clients if r["variant"] == "held_out"}
    assert by_kind["rf"] == np.inf  # a non-DP public model makes the publication non-DP
    # pure ε = 1 defaults (add/remove) and a pure ε = 1 diffprivlib logistic regression
    # (replace-one): ε = 2 · 1 + 1 = 3 for replace-one neighbours, at any δ
    assert by_kind["dp_lr_e1"] == pytest.approx(3.0, abs=1e-3)
    # the DP MLP's events and the defaults' d pure events, composed by the accountant
    (public,) = stacking_experiments._PUBLIC_CACHE.values()
    mlp = public["dp_mlp_e1"][0].estimator
    d = round(0.5 * len(load_binary("hi", 200, 0).schema.names))  # the client's predictors
    defaults = [DPEvent(mechanism="approx_dp", epsilon=1.0 / d, delta=0.0)] * d
    expected = compute_epsilon([*defaults, *mlp.privacy_events_], 1e-5)
    first = next(r for r in clients if r["public"] == "dp_mlp_e1" and r["client"] == "c0")
    assert first["total_epsilon"] == pytest.approx(expected, rel=1e-6)
    noisy = vertical_task(0, 0, defaults="noisy", models="rf", **kw)
    assert all(r["total_epsilon"] == np.inf for r in noisy if r["record"] == "client")


@pytest.mark.parametrize("rows", ["all", "disjoint"])
def test_a_records_epsilon_composes_every_client_that_holds_it(rows: str) -> None:
    # 3 clients, each ε = 1 DP defaults (d pure add/remove events) + an ε = 1 DP logistic
    # regression (replace-one): ε = 2 · 1 + 1 = 3 per client for replace-one neighbours.  With the
    # paper's vertical partition every client holds every row: a record is in all 3 publications,
    # composed by the accountant (at δ = 1e-5 below the pure sum 9); with disjoint rows in one.
    kw = {"p": 0.5, "noise": 0.0, "dataset": "hi", "max_rows": 200, "trees": 5, "n_clients": 3}
    records = vertical_task(0, 0, defaults="dp", models="dp", dp_kinds="dp_lr_e1", rows=rows, **kw)
    lr = [r for r in records if r["record"] == "client" and r["public"] == "dp_lr_e1"]
    assert all(r["total_epsilon"] == pytest.approx(3.0, abs=1e-3) for r in lr)
    d = round(0.5 * len(load_binary("hi", 200, 0).schema.names))
    one = [DPEvent(mechanism="approx_dp", epsilon=1.0 / d, delta=0.0)] * d
    one += [DPEvent(mechanism="approx_dp", epsilon=1.0, delta=0.0, neighbouring="replace_one")]
    expected = compute_epsilon(one * 3, 1e-5) if rows == "all" else 3.0
    assert rows == "disjoint" or 3.0 < expected <= 9.0
    assert all(r["record_epsilon"] == pytest.approx(expected, rel=1e-3) for r in lr)


def test_dp_public_models_are_charged_before_they_are_published() -> None:
    stacking_experiments._PUBLIC_CACHE.clear()
    kw = {"dataset": "hi", "max_rows": 300, "trees": 5, "n_clients": 3, "min_size": 20}
    quantity_task(0, 0, a=0.5, models="dp", dp_kinds="dp_lr_e1+dp_mlp_e4", **kw)
    (public,) = stacking_experiments._PUBLIC_CACHE.values()
    assert all(m.ledger is None and m.total_epsilon == np.inf for m in public["rf"])
    for kind, target in (("dp_lr_e1", 1.0), ("dp_mlp_e4", 4.0)):
        for m in public[kind]:
            assert m.ledger is not None and m.ledger.site == m.model_id
            assert [r.release_id for r in m.ledger.releases] == [f"public-{kind}"]
            assert m.ledger.epsilon_budget == target
            assert m.total_epsilon == pytest.approx(m.epsilon, abs=1e-3)  # ε at the ledger δ
            assert m.total_epsilon <= target + 1e-9


def test_a_ledger_that_cannot_pay_refuses_the_model() -> None:
    from pubsubml.errors import PrivacyBudgetExceededError
    from pubsubml.experiments.stacking.models import PUBLIC_KINDS, ClientData, train_public_models
    from pubsubml.privacy.ledger import PrivacyLedger, Release

    ds = load_binary("hi", 200, 0)
    assert ds.classes is not None
    client = ClientData("c0", ds.X, ds.y, ds.schema)
    # A history of ε = 2 against a planned 0.5: the copy's budget 0.5 + 1 cannot pay 2 + 1.
    pure = DPEvent(mechanism="approx_dp", epsilon=2.0, delta=0.0)
    before = Release(release_id="before", events=(pure,))
    base = PrivacyLedger(site="c0", epsilon_budget=0.5, delta=1e-5, releases=[before])
    with pytest.raises(PrivacyBudgetExceededError):
        train_public_models([client], PUBLIC_KINDS["dp_lr_e1"], ds.classes, 0, {"c0": base})
    assert [r.release_id for r in base.releases] == ["before"]


def test_vertical_disjoint_rows_give_each_client_its_own_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, set[int]] = {}
    real = stacking_experiments.train_public_models

    def recording(clients, kind, classes, seed, ledgers=None):  # type: ignore[no-untyped-def]
        ds = load_binary("hi", 200 * 3, 0)
        for c in clients:  # rows located by their full feature vectors in the sample
            key = ds.X.astype(str).agg("|".join, axis=1)
            mine = c.X.astype(str).agg("|".join, axis=1)
            seen[c.name] = set(np.flatnonzero(key.isin(set(mine))).tolist())
        return real(clients, kind, classes, seed, ledgers)

    monkeypatch.setattr(stacking_experiments, "train_public_models", recording)
    stacking_experiments._PUBLIC_CACHE.clear()
    vertical_task(
        0,
        0,
        p=1.0,
        noise=0.0,
        defaults="noisy",
        models="rf",
        dataset="hi",
        max_rows=200,
        trees=5,
        n_clients=3,
        rows="disjoint",
    )
    names = sorted(seen)
    assert len(names) == 3 and all(seen[n] for n in names)
    assert sum(len(seen[n]) for n in names) <= 600
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not seen[a] & seen[b]


def test_client_data_and_noisy_defaults_reject_bad_input() -> None:
    from pubsubml.experiments.stacking.models import ClientData

    ds = load_binary("hi", 50, 0)
    with pytest.raises(ValueError, match="labels"):
        ClientData("c", ds.X, ds.y[:-1], ds.schema)
    with pytest.raises(ValueError, match="row position"):
        ClientData("c", ds.X.iloc[::-1], ds.y[::-1], ds.schema)
    with pytest.raises(ValueError, match="not in X"):
        ClientData("c", ds.X.drop(columns=ds.schema.names[0]), ds.y, ds.schema)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="noise"):
        noisy_defaults(ds.X, ds.schema, float("nan"), rng)
    with pytest.raises(ValueError, match="2 rows"):
        noisy_defaults(ds.X.iloc[:1], ds.schema, 1.0, rng)


def test_natural_partition_makes_one_client_per_value_without_the_column() -> None:
    records = natural_task(0, 0, models="rf", dataset="hi", max_rows=600, trees=5, min_size=50)
    clients = {r["client"] for r in records if r["record"] == "client"}
    ds = load_binary("hi", 600, 0)
    sizes = ds.X["region"].value_counts()
    assert clients == {f"region={v}" for v, n in sizes.items() if n >= 50}
    shares = {r["client"]: r["share"] for r in records if r["record"] == "client"}
    for v, n in sizes.items():
        if n >= 50:
            assert shares[f"region={v}"] == pytest.approx(n / sizes[sizes >= 50].sum())
    public = next(iter(stacking_experiments._PUBLIC_CACHE.values()))["rf"]
    assert all("region" not in m.input_features for m in public)
    with pytest.raises(ValueError, match="no natural partition"):
        natural_task(0, 0, models="rf", dataset="shuttle", max_rows=600, trees=5)


@pytest.mark.parametrize("task", ["quantity", "label"])
def test_horizontal_public_models_never_saw_another_clients_rows(
    task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, set[tuple[str, ...]]] = {}
    real = stacking_experiments.train_public_models

    def recording(clients, kind, classes, seed, ledgers=None):  # type: ignore[no-untyped-def]
        for c in clients:
            seen[c.name] = {tuple(map(str, row)) for row in c.X.to_numpy()}
        return real(clients, kind, classes, seed, ledgers)

    monkeypatch.setattr(stacking_experiments, "train_public_models", recording)
    stacking_experiments._PUBLIC_CACHE.clear()
    kw = {"models": "rf", "dataset": "hi", "max_rows": 400, "trees": 5, "n_clients": 4}
    if task == "quantity":
        quantity_task(1, 0, a=0.5, min_size=20, **kw)
    else:
        label_task(1, 0, alpha=1.0, **kw)
    names = sorted(seen)
    assert len(names) == 4
    for i, a in enumerate(names):  # each public model trained on its own client's rows only
        for b in names[i + 1 :]:
            assert not seen[a] & seen[b]


@pytest.mark.slow
def test_smoke_benchmarks_write_their_outputs(tmp_path: Path) -> None:
    group = typer.Typer()
    register(group)
    assert {c.name for c in group.registered_commands} == set(BENCHMARKS)
    runner = CliRunner()
    for name in BENCHMARKS:
        args = [name, "--smoke", "--out-dir", str(tmp_path)]
        if name != "stacking-quantity":
            args.append("--no-dp")  # the DP public models are exercised once
        result = runner.invoke(group, args)
        assert result.exit_code == 0, result.output
        for stem in (name, f"{name}-graph"):
            for ext in ("csv", "md", "png"):
                assert (tmp_path / f"{stem}.{ext}").exists(), f"{stem}.{ext}"
    table = pd.read_csv(tmp_path / "stacking-quantity.csv")
    assert set(table.variant) == {"held_out", "pooled"}
    dp = table[table.public != "rf"]
    assert set(dp.public) == {"dp_rf_e1", "dp_lr_e1", "dp_mlp_e1"}
    assert (dp.epsilon <= 1.0 + 1e-9).all() and (
        table[table.public == "rf"].epsilon == np.inf
    ).all()
    assert (tmp_path / "stacking-label-matrix.csv").exists()
    jaccard = pd.read_csv(tmp_path / "stacking-vertical-jaccard.csv")
    assert set(jaccard.columns) == {"rows", "p", "jaccard", "importance", "pairs", "seeds"}
    assert jaccard.jaccard.between(0, 1).all() and (jaccard.pairs > 0).all()
    assert "Realized positive-label share" in (tmp_path / "stacking-label.md").read_text()
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (
        ["stacking-natural", "--dataset", "shuttle"],
        ["stacking-quantity", "--dataset", "iris"],
        ["stacking-label", "--trees", "0"],
        ["stacking-vertical", "--max-rows", "0"],
    ):
        bad = runner.invoke(group, [*args, "--smoke", "--out-dir", str(tmp_path)])
        assert bad.exit_code == 2 and "error:" in bad.output, args
    assert sorted(p.name for p in tmp_path.iterdir()) == before
