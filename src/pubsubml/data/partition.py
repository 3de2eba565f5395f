"""Partitioners that turn one data set into the sites of a simulated consortium.

Every function is deterministic given its ``seed`` and returns row *positions* as sorted int64
arrays.  Row partitions are disjoint and cover the rows they split.  Bad arguments (``n_sites < 1``,
too few rows, parameters out of range) raise :class:`~pubsubml.errors.DataValidationError` (a
``ValueError``), unknown columns :class:`~pubsubml.errors.SchemaMismatchError`, before anything is
computed.

The scenarios come from pubsub-ml.txt §8.1 (IID sites, donor subscriber of §8.1.2, distributed
features of §8.1.3, the age split of §8.1.4, noisy sites of §8.2.5) and pfl-stacking.txt §4
(power-law quantity skew of §4.1, Dirichlet label skew of §4.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pubsubml.errors import DataValidationError, LabelError, SchemaMismatchError

__all__ = [
    "dirichlet_label_skew",
    "donor_split",
    "feature_split",
    "iid",
    "label_share",
    "noisy_labels",
    "population_split",
    "power_law_shares",
    "quantity_skew",
]

_SINKHORN_ITERATIONS = 500


def _check_sites(n: int, n_sites: int, min_size: int = 1) -> None:
    if isinstance(n_sites, bool) or not isinstance(n_sites, int | np.integer) or n_sites < 1:
        raise DataValidationError(f"n_sites must be a positive integer, got {n_sites!r}")
    if isinstance(min_size, bool) or not isinstance(min_size, int | np.integer) or min_size < 0:
        raise DataValidationError(f"min_size must be a non-negative integer, got {min_size!r}")
    if n < n_sites * max(min_size, 1):
        raise DataValidationError(
            f"cannot give {n_sites} sites at least {max(min_size, 1)} rows each from {n} rows"
        )


def _as_labels(y: Any) -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise DataValidationError(f"labels must be 1-D, got shape {arr.shape}")
    if arr.size and pd.isna(arr).any():
        raise DataValidationError("labels contain missing values")
    return arr


def iid(n: int, n_sites: int, seed: int) -> list[np.ndarray]:
    """Split ``n`` rows uniformly at random into ``n_sites`` near-equal parts (pubsub-ml.txt §8.1.1).

    Part sizes differ by at most one row; the parts cover ``range(n)``.

    Examples
    --------
    >>> [len(p) for p in iid(10, 3, seed=0)]
    [4, 3, 3]
    """
    _check_sites(n, n_sites)
    order = np.random.default_rng(seed).permutation(n).astype(np.int64)
    return [np.sort(part) for part in np.array_split(order, n_sites)]


def power_law_shares(n_sites: int, a: float) -> np.ndarray:
    """Expected data shares of the power-law quantity skew (pfl-stacking.txt §4.1).

    The reference implementation draws from NumPy's power distribution (density ``a·x^(a-1)`` on
    [0, 1]) and histograms the draws into ``n_sites`` equal bins; the share of site ``k`` is thus
    ``(k/K)^a - ((k-1)/K)^a`` (K = ``n_sites``, k = 1…K), which is used here exactly instead of a
    Monte Carlo histogram.  ``a = 1`` gives equal shares; as ``a → 0`` the first site holds almost
    everything.  ``a`` outside (0, 1] raises :class:`DataValidationError`.

    Examples
    --------
    >>> power_law_shares(2, 1.0).tolist(), power_law_shares(2, 0.5).round(3).tolist()
    ([0.5, 0.5], [0.707, 0.293])
    """
    _check_sites(n_sites, n_sites, 0)
    if not (isinstance(a, int | float | np.floating) and 0.0 < float(a) <= 1.0):
        raise DataValidationError(
            f"power-law parameter a must be in (0, 1] (1 = equal shares), got {a!r}"
        )
    edges = (np.arange(n_sites + 1, dtype=np.float64) / n_sites) ** float(a)
    return np.diff(edges)


def quantity_skew(
    n: int, n_sites: int, a: float, seed: int, *, min_size: int = 1
) -> list[np.ndarray]:
    """Split ``n`` rows so that site sizes follow a power law (pfl-stacking.txt §4.1).

    Every site first gets ``min_size`` rows; the remaining rows are shared in proportion to
    :func:`power_law_shares` (largest remainder rounding, so all ``n`` rows are used).  Site 0 is
    the largest; which rows go to which site is random (``seed``).  ``a`` in (0, 1]: 1 gives equal
    sizes, smaller values more skew.

    Examples
    --------
    >>> [len(p) for p in quantity_skew(100, 4, a=0.5, seed=0)]
    [49, 21, 16, 14]
    """
    _check_sites(n, n_sites, min_size)
    shares = power_law_shares(n_sites, a)
    sizes = np.full(n_sites, min_size, dtype=np.int64) + _round_to_total(
        shares * (n - n_sites * min_size), n - n_sites * min_size
    )
    order = np.random.default_rng(seed).permutation(n).astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [np.sort(order[bounds[k] : bounds[k + 1]]) for k in range(n_sites)]


def _round_to_total(values: np.ndarray, total: int) -> np.ndarray:
    """Largest-remainder rounding of non-negative ``values`` to integers summing to ``total``."""
    floor = np.floor(values).astype(np.int64)
    rest = int(total - floor.sum())
    if rest > 0:
        order = np.argsort(-(values - floor), kind="stable")
        floor[order[:rest]] += 1
    return floor


def dirichlet_label_skew(
    y: np.ndarray,
    n_sites: int,
    alpha: float,
    seed: int,
    *,
    prior: np.ndarray | None = None,
    min_size: int = 1,
) -> list[np.ndarray]:
    """Label-skewed sites: site label proportions ``q ~ Dirichlet(alpha · p)`` (pfl-stacking.txt §4.2).

    As in the paper (after Hsu et al.), every site gets the same number of rows (±1) and its own
    class proportions ``q_k`` drawn from ``Dirichlet(alpha · p)``; small ``alpha`` gives sites with
    few, dominant classes, large ``alpha`` gives proportions close to ``p``.  To use every row exactly
    once, the demand matrix ``size_k · q_k`` is rescaled (Sinkhorn iterations) to the class counts
    of ``y`` and rounded; the rescaling keeps the pattern of which classes each site lacks, but the
    realised proportions differ from the drawn ``q_k`` where the classes' supply runs short.  Measure
    them with :func:`label_share`.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Labels (any hashable values).
    n_sites : int
    alpha : float > 0
        Concentration.
    seed : int
    prior : ndarray of shape (n_classes,), optional
        Class distribution ``p`` over the sorted unique labels of ``y``; default: their frequencies.
    min_size : int, default=1
        Minimum number of rows per site.

    Examples
    --------
    >>> y = np.array([0] * 50 + [1] * 50)
    >>> parts = dirichlet_label_skew(y, 4, alpha=0.1, seed=0)
    >>> sorted(np.concatenate(parts).tolist()) == list(range(100))
    True
    """
    labels = _as_labels(y)
    n = len(labels)
    _check_sites(n, n_sites, min_size)
    if not (isinstance(alpha, int | float | np.floating) and np.isfinite(alpha) and alpha > 0):
        raise DataValidationError(f"alpha must be a finite number > 0, got {alpha!r}")
    classes, codes, counts = np.unique(labels, return_inverse=True, return_counts=True)
    n_classes = len(classes)
    if prior is None:
        p = counts / n
    else:
        p = np.asarray(prior, dtype=np.float64)
        if p.shape != (n_classes,) or not np.all(np.isfinite(p)) or (p < 0).any() or p.sum() <= 0:
            raise DataValidationError(
                f"prior must be {n_classes} non-negative finite weights (one per class of y, "
                f"sorted: {classes.tolist()}), got {prior!r}"
            )
        p = p / p.sum()
    rng = np.random.default_rng(seed)
    sizes = np.full(n_sites, n // n_sites, dtype=np.int64)
    sizes[: n % n_sites] += 1
    if n_classes == 1:
        q = np.ones((n_sites, 1))
    else:
        q = rng.dirichlet(np.maximum(alpha * p, 1e-12), size=n_sites)
    demand = _sinkhorn(sizes[:, None] * np.maximum(q, 1e-12), sizes, counts)
    table = _round_matrix(demand, sizes, counts)
    pools = [rng.permutation(np.flatnonzero(codes == j)).astype(np.int64) for j in range(n_classes)]
    starts = np.zeros(n_classes, dtype=np.int64)
    parts: list[np.ndarray] = []
    for k in range(n_sites):
        rows = []
        for j in range(n_classes):
            rows.append(pools[j][starts[j] : starts[j] + table[k, j]])
            starts[j] += table[k, j]
        parts.append(np.sort(np.concatenate(rows)))
    return parts


def _sinkhorn(matrix: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Scale a positive matrix to the given row and column sums (iterative proportional fitting)."""
    m = matrix.astype(np.float64)
    for _ in range(_SINKHORN_ITERATIONS):
        m *= (cols / m.sum(axis=0))[None, :]
        m *= (rows / m.sum(axis=1))[:, None]
        if np.allclose(m.sum(axis=0), cols, rtol=0, atol=1e-6):
            break
    return m


def _round_matrix(m: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Round ``m`` row by row to integers with exact row sums ``rows`` and column sums ``cols``."""
    left = cols.astype(np.int64).copy()
    out = np.zeros(m.shape, dtype=np.int64)
    for k in range(m.shape[0] - 1):
        want = np.minimum(np.floor(m[k]).astype(np.int64), left)
        rest = int(rows[k] - want.sum())
        frac = np.where(left > want, m[k] - np.floor(m[k]), -np.inf)
        for j in np.argsort(-frac, kind="stable"):
            if rest == 0:
                break
            take = min(rest, int(left[j] - want[j]))
            want[j] += take
            rest -= take
        out[k] = want
        left -= want
    out[-1] = left
    return out


def feature_split(columns: Sequence[str], groups: Sequence[Sequence[str]]) -> list[list[str]]:
    """Validate feature groups held by different sites (pubsub-ml.txt §8.1.3, Table 2).

    Groups may overlap (sites 1 and 2 of §8.1.3 share table B) but must each be non-empty, without
    repeated names, and use only names in ``columns``.

    Returns the groups as lists, in the order given.

    Examples
    --------
    >>> feature_split(["a", "b", "c"], [["a", "b"], ["b", "c"]])
    [['a', 'b'], ['b', 'c']]
    """
    known = set(columns)
    if isinstance(groups, str) or not groups:
        raise DataValidationError("feature_split needs at least one group of column names")
    out: list[list[str]] = []
    for i, group in enumerate(groups):
        if isinstance(group, str):
            raise DataValidationError(
                f"group {i} must be a sequence of names, got the string {group!r}"
            )
        names = list(group)
        if not names:
            raise DataValidationError(f"group {i} is empty")
        if len(set(names)) != len(names):
            raise DataValidationError(f"group {i} repeats a column: {names}")
        unknown = [c for c in names if c not in known]
        if unknown:
            raise SchemaMismatchError(f"group {i} names unknown columns {unknown}")
        out.append(names)
    return out


def population_split(
    X: pd.DataFrame, column: str, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """Split rows by a numeric column: ``(X[column] <= threshold, X[column] > threshold)``.

    pubsub-ml.txt §8.1.4 gives patients aged <= 40 to the subscriber and the others to publishers.

    Returns the positions at or below, and above, the threshold.  A column that is not numeric or
    has missing values raises :class:`DataValidationError`.

    Examples
    --------
    >>> population_split(pd.DataFrame({"age": [30, 50, 40]}), "age", 40)
    (array([0, 2]), array([1]))
    """
    if column not in X.columns:
        raise SchemaMismatchError(f"column {column!r} is not in the data ({list(X.columns)})")
    try:
        values = pd.to_numeric(X[column], errors="raise").to_numpy(dtype=np.float64)
    except (ValueError, TypeError) as exc:
        raise DataValidationError(f"column {column!r} is not numeric: {exc}") from exc
    if np.isnan(values).any():
        raise DataValidationError(f"column {column!r} has missing values")
    if not np.isfinite(threshold):
        raise DataValidationError(f"threshold must be finite, got {threshold!r}")
    low = values <= threshold
    return np.flatnonzero(low).astype(np.int64), np.flatnonzero(~low).astype(np.int64)


def donor_split(
    parts: list[np.ndarray], fraction: float, seed: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """Every part donates ``fraction`` of its rows to a new subscriber (pubsub-ml.txt §8.1.2).

    Each part gives ``round(fraction · len(part))`` rows chosen at random and keeps the rest.

    Returns ``(kept, subscriber)``: the parts without their donations, in the order given, and all
    donated positions.  Parts must be non-empty and disjoint; ``fraction`` in (0, 1).

    Examples
    --------
    >>> kept, sub = donor_split([np.arange(10), np.arange(10, 20)], 0.1, seed=0)
    >>> [len(k) for k in kept], len(sub)
    ([9, 9], 2)
    """
    if not (isinstance(fraction, int | float | np.floating) and 0.0 < fraction < 1.0):
        raise DataValidationError(f"fraction must be in (0, 1), got {fraction!r}")
    if not parts:
        raise DataValidationError("donor_split needs at least one part")
    arrays = [np.asarray(p, dtype=np.int64).ravel() for p in parts]
    if any(len(a) == 0 for a in arrays):
        raise DataValidationError("every part must have at least one row")
    joined = np.concatenate(arrays)
    if len(np.unique(joined)) != len(joined):
        raise DataValidationError("parts overlap: a row belongs to more than one part")
    rng = np.random.default_rng(seed)
    kept: list[np.ndarray] = []
    given: list[np.ndarray] = []
    for a in arrays:
        n_give = round(fraction * len(a))
        shuffled = rng.permutation(a)
        given.append(shuffled[:n_give])
        kept.append(np.sort(shuffled[n_give:]))
    return kept, np.sort(np.concatenate(given))


def noisy_labels(y: np.ndarray, classes: Sequence[Any], seed: int) -> np.ndarray:
    """Labels replaced by uniform draws from ``classes``, independent of the data (pubsub-ml.txt §8.2.5).

    A noisy site (noise percentage p3 = 1 in Table 3) holds labels that carry no information about
    its features; the true labels are used for their count only.

    ``classes`` must be non-empty without repeats.

    Examples
    --------
    >>> noisy_labels(np.zeros(5, dtype=int), [0, 1], seed=0).shape
    (5,)
    """
    labels = _as_labels(y)
    values = np.asarray(list(classes))
    if values.ndim != 1 or len(values) == 0 or len(np.unique(values)) != len(values):
        raise DataValidationError(f"classes must be a non-empty set of labels, got {classes!r}")
    return values[np.random.default_rng(seed).integers(len(values), size=len(labels))]


def label_share(y: np.ndarray, parts: Sequence[np.ndarray], classes: Sequence[Any]) -> np.ndarray:
    """Measured class proportions of every part.

    Returns
    -------
    ndarray of shape (n_parts, n_classes)
        Row ``k`` holds the share of each class of ``classes`` among the rows of part ``k``
        (NaN for an empty part).

    A label outside ``classes`` raises :class:`~pubsubml.errors.LabelError`.

    Examples
    --------
    >>> label_share(np.array([0, 1, 1, 1]), [np.array([0, 1]), np.array([2, 3])], [0, 1]).tolist()
    [[0.5, 0.5], [0.0, 1.0]]
    """
    labels = _as_labels(y)
    index = {c: i for i, c in enumerate(classes)}
    out = np.full((len(parts), len(index)), np.nan)
    for k, part in enumerate(parts):
        sub = labels[np.asarray(part, dtype=np.int64)]
        if len(sub) == 0:
            continue
        counts = np.zeros(len(index))
        for value, count in zip(*np.unique(sub, return_counts=True), strict=True):
            if value not in index:
                raise LabelError(f"part {k} holds label {value!r} outside classes {list(classes)}")
            counts[index[value]] = count
        out[k] = counts / len(sub)
    return out
