"""The tasks of the stacking experiments: partitions, public models, DP defaults and their ε."""

from __future__ import annotations

import numpy as np
import pytest

from pubsubml.experiments.stacking import experiments as stacking_experiments
from pubsubml.experiments.stacking.experiments import (
    label_task,
    load_binary,
    natural_task,
    quantity_task,
    vertical_task,
)
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent


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
