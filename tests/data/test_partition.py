"""Partitioners: disjoint covers, determinism, validated arguments and *measured* skew."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from pubsubml.data.partition import (
    dirichlet_label_skew,
    donor_split,
    feature_split,
    iid,
    label_share,
    noisy_labels,
    population_split,
    power_law_shares,
    quantity_skew,
)
from pubsubml.errors import DataValidationError, LabelError, SchemaMismatchError

PRIOR = np.array([0.6, 0.3, 0.1])


@pytest.fixture(scope="module")
def labels() -> np.ndarray:
    return np.random.default_rng(0).choice(3, size=6000, p=PRIOR)


def _assert_partition(parts: Sequence[np.ndarray], n: int) -> None:
    assert all(p.dtype == np.int64 for p in parts)
    joined = np.concatenate(parts)
    assert len(joined) == n
    assert np.array_equal(np.sort(joined), np.arange(n))


def _mean_tv(shares: np.ndarray, p: np.ndarray) -> float:
    return float(0.5 * np.abs(shares - p).sum(axis=1).mean())


# ---- iid ------------------------------------------------------------------------------------
def test_iid_covers_rows_with_near_equal_sizes() -> None:
    parts = iid(1003, 10, seed=3)

    _assert_partition(parts, 1003)
    assert {len(p) for p in parts} == {100, 101}


def test_iid_is_deterministic_given_seed() -> None:
    a, b, c = iid(500, 4, seed=1), iid(500, 4, seed=1), iid(500, 4, seed=2)

    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_iid_label_proportions_are_close_to_global(labels: np.ndarray) -> None:
    parts = iid(len(labels), 5, seed=0)

    shares = label_share(labels, parts, [0, 1, 2])

    global_share = np.bincount(labels) / len(labels)
    # Sites of 1200 rows: standard error of a share is at most 0.015; allow 3 SE.
    assert np.abs(shares - global_share).max() < 0.045
    assert _mean_tv(shares, global_share) < 0.03


@pytest.mark.parametrize(("n", "n_sites"), [(10, 0), (10, -1), (3, 4), (10, 2.5), (10, True)])
def test_iid_rejects_bad_sites(n: int, n_sites: int) -> None:
    with pytest.raises(DataValidationError, match=r"n_sites|rows"):
        iid(n, n_sites, seed=0)


# ---- quantity skew --------------------------------------------------------------------------
@pytest.mark.parametrize("a", [0.1, 0.3, 0.6, 1.0])
def test_quantity_skew_shares_follow_the_power_law(a: float) -> None:
    n, n_sites = 20_000, 10

    parts = quantity_skew(n, n_sites, a, seed=0)

    _assert_partition(parts, n)
    measured = np.array([len(p) for p in parts]) / n
    expected = np.array([(k / n_sites) ** a - ((k - 1) / n_sites) ** a for k in range(1, 11)])
    # The guaranteed row per site (min_size=1) and rounding move a site by at most n_sites + 1 rows.
    assert np.abs(measured - expected).max() <= (n_sites + 1) / n


def test_power_law_shares_match_the_histogram_of_power_draws() -> None:
    # Reference: the paper's code histograms NumPy power(a) draws into n_sites equal bins.
    a, n_sites = 0.4, 8
    draws = np.random.default_rng(0).power(a, size=400_000)
    counts, _ = np.histogram(draws, np.linspace(0, 1, n_sites + 1))

    reference = counts / counts.sum()

    assert np.abs(power_law_shares(n_sites, a) - reference).max() < 0.005


def test_quantity_skew_grows_as_a_decreases() -> None:
    largest = [
        max(len(p) for p in quantity_skew(5000, 10, a, seed=1)) / 5000 for a in (1, 0.5, 0.2, 0.05)
    ]

    assert largest[0] == pytest.approx(0.1)
    assert largest == sorted(largest)
    assert largest[-1] > 0.85


def test_quantity_skew_respects_min_size() -> None:
    parts = quantity_skew(1000, 10, 0.05, seed=0, min_size=30)

    assert min(len(p) for p in parts) >= 30
    _assert_partition(parts, 1000)


@pytest.mark.parametrize("a", [0.25, 0.5, 1.0])
def test_quantity_skew_with_min_size_shares_the_rest_by_the_power_law(a: float) -> None:
    # The stacking experiments' setting: 2,000 rows, 10 clients of at least 50 rows.
    parts = quantity_skew(2000, 10, a, seed=3, min_size=50)

    _assert_partition(parts, 2000)
    rest = np.array([len(p) for p in parts]) - 50
    assert rest.sum() == 1500
    assert np.abs(rest / 1500 - power_law_shares(10, a)).max() <= 1 / 1500


@pytest.mark.parametrize("a", [0.0, -0.5, 1.5, float("nan")])
def test_quantity_skew_rejects_a_outside_unit_interval(a: float) -> None:
    with pytest.raises(DataValidationError, match=r"\(0, 1\]"):
        quantity_skew(100, 4, a, seed=0)


def test_quantity_skew_rejects_too_large_min_size() -> None:
    with pytest.raises(DataValidationError, match="at least 30 rows"):
        quantity_skew(100, 4, 0.5, seed=0, min_size=30)


# ---- Dirichlet label skew -------------------------------------------------------------------
def test_dirichlet_covers_rows_with_equal_sizes(labels: np.ndarray) -> None:
    parts = dirichlet_label_skew(labels, 7, alpha=0.3, seed=5)

    _assert_partition(parts, len(labels))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_dirichlet_is_deterministic_given_seed(labels: np.ndarray) -> None:
    a = dirichlet_label_skew(labels, 5, alpha=0.5, seed=11)
    b = dirichlet_label_skew(labels, 5, alpha=0.5, seed=11)

    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_dirichlet_skew_decreases_with_alpha(labels: np.ndarray) -> None:
    p = np.bincount(labels) / len(labels)
    alphas = [0.05, 0.5, 5.0, 50.0, 1000.0]

    tv = [
        np.mean(
            [
                _mean_tv(label_share(labels, dirichlet_label_skew(labels, 10, al, s), [0, 1, 2]), p)
                for s in range(5)
            ]
        )
        for al in alphas
    ]

    assert all(x > y for x, y in itertools.pairwise(tv))
    assert tv[0] > 0.4  # nearly single-class sites
    assert tv[-1] < 0.03  # proportions converge to the prior


@pytest.mark.parametrize("alpha", [0.1, 1.0, 10.0])
def test_dirichlet_skew_matches_raw_dirichlet_draws(labels: np.ndarray, alpha: float) -> None:
    # Reference: mean TV of q ~ Dirichlet(alpha * p) itself, before fitting q to the class counts.
    p = np.bincount(labels) / len(labels)
    q = np.random.default_rng(123).dirichlet(alpha * p, size=20_000)
    reference = _mean_tv(q, p)

    measured = np.mean(
        [
            _mean_tv(label_share(labels, dirichlet_label_skew(labels, 10, alpha, s), [0, 1, 2]), p)
            for s in range(10)
        ]
    )

    assert measured == pytest.approx(reference, abs=0.05)


@pytest.mark.parametrize("alpha", [0.5, 1.0, 10.0, 100.0])
def test_binary_imbalanced_dirichlet_skew_matches_raw_draws(alpha: float) -> None:
    # The stacking label-skew runs: two classes, 30 % positives, 10 equal clients.  The spread of
    # the clients' positive share matches that of q ~ Dirichlet(α·p) (quartiles within 0.06).
    y = np.random.default_rng(1).choice(2, size=4000, p=[0.7, 0.3])
    p = np.bincount(y) / len(y)
    raw = np.random.default_rng(7).dirichlet(alpha * p, size=20_000)[:, 1]
    shares = np.concatenate(
        [label_share(y, dirichlet_label_skew(y, 10, alpha, s), [0, 1])[:, 1] for s in range(30)]
    )
    for quantile in (0.25, 0.5, 0.75):
        assert np.quantile(shares, quantile) == pytest.approx(
            np.quantile(raw, quantile), abs=0.06
        ), quantile
    assert shares.mean() == pytest.approx(p[1], abs=0.01)  # every row used once


def test_dirichlet_uses_the_given_prior() -> None:
    y = np.repeat([0, 1], 3000)  # global 50/50

    parts = dirichlet_label_skew(y, 6, alpha=1e4, seed=0, prior=np.array([0.5, 0.5]))

    assert np.abs(label_share(y, parts, [0, 1]) - 0.5).max() < 0.02


def test_dirichlet_handles_string_labels() -> None:
    y = np.array(["a", "b", "c"] * 100)

    parts = dirichlet_label_skew(y, 3, alpha=1.0, seed=0)

    _assert_partition(parts, 300)


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("inf"), float("nan")])
def test_dirichlet_rejects_bad_alpha(labels: np.ndarray, alpha: float) -> None:
    with pytest.raises(DataValidationError, match="alpha"):
        dirichlet_label_skew(labels, 4, alpha, seed=0)


@pytest.mark.parametrize("prior", [np.array([1.0, 0.0]), np.array([1.0, -1.0, 1.0]), np.zeros(3)])
def test_dirichlet_rejects_bad_prior(labels: np.ndarray, prior: np.ndarray) -> None:
    with pytest.raises(DataValidationError, match="prior"):
        dirichlet_label_skew(labels, 4, 1.0, seed=0, prior=prior)


def test_dirichlet_rejects_missing_labels() -> None:
    with pytest.raises(DataValidationError, match="missing"):
        dirichlet_label_skew(np.array([0.0, np.nan, 1.0, 1.0]), 2, 1.0, seed=0)


# ---- feature and population splits ----------------------------------------------------------
def test_feature_split_returns_overlapping_groups() -> None:
    groups = feature_split(["a", "b", "c", "d"], [("a", "b"), ("b", "c", "d")])

    assert groups == [["a", "b"], ["b", "c", "d"]]


@pytest.mark.parametrize(
    ("groups", "error", "match"),
    [
        ([["a", "zz"]], SchemaMismatchError, "zz"),
        ([["a"], []], DataValidationError, "empty"),
        ([["a", "a"]], DataValidationError, "repeats"),
        ([], DataValidationError, "at least one"),
        (["ab"], DataValidationError, "string"),
    ],
)
def test_feature_split_rejects_bad_groups(
    groups: list[list[str]], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        feature_split(["a", "b"], groups)


def test_population_split_is_exact() -> None:
    ages = np.random.default_rng(0).integers(18, 95, size=500)
    X = pd.DataFrame({"age": ages, "other": 1.0})

    low, high = population_split(X, "age", 40)

    assert np.array_equal(low, np.flatnonzero(ages <= 40))
    assert np.array_equal(high, np.flatnonzero(ages > 40))
    _assert_partition([low, high], 500)


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (pd.DataFrame({"other": [1.0]}), SchemaMismatchError),
        (pd.DataFrame({"age": ["x", "y"]}), DataValidationError),
        (pd.DataFrame({"age": [1.0, np.nan]}), DataValidationError),
    ],
)
def test_population_split_rejects_bad_column(frame: pd.DataFrame, error: type[Exception]) -> None:
    with pytest.raises(error, match="age"):
        population_split(frame, "age", 40)


# ---- donor split ----------------------------------------------------------------------------
def test_donor_split_every_part_gives_the_fraction() -> None:
    parts = quantity_skew(3000, 4, 0.5, seed=0)

    kept, subscriber = donor_split(parts, 0.1, seed=1)

    for part, rest in zip(parts, kept, strict=True):
        given = np.setdiff1d(part, rest)
        assert np.isin(rest, part).all()
        assert abs(len(given) / len(part) - 0.1) <= 0.5 / len(part)
        assert np.isin(given, subscriber).all()
    _assert_partition([*kept, subscriber], 3000)


def test_donor_split_is_deterministic_given_seed() -> None:
    parts = iid(200, 3, seed=0)

    assert np.array_equal(donor_split(parts, 0.2, seed=4)[1], donor_split(parts, 0.2, seed=4)[1])


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_donor_split_rejects_fraction_outside_open_interval(fraction: float) -> None:
    with pytest.raises(DataValidationError, match=r"\(0, 1\)"):
        donor_split(iid(20, 2, seed=0), fraction, seed=0)


def test_donor_split_rejects_overlapping_parts() -> None:
    with pytest.raises(DataValidationError, match="overlap"):
        donor_split([np.arange(5), np.arange(4, 9)], 0.2, seed=0)


# ---- noisy labels ---------------------------------------------------------------------------
def test_noisy_labels_are_independent_of_features_and_truth() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 2))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0).astype(int) * 2  # 4 classes decided by X

    noisy = noisy_labels(y, [0, 1, 2, 3], seed=1)

    # Accuracy of the true label: 1/k with SE sqrt(p(1-p)/n) ~ 0.003.
    assert np.mean(noisy == y) == pytest.approx(0.25, abs=0.012)
    assert np.abs(np.bincount(noisy, minlength=4) / len(y) - 0.25).max() < 0.012
    # Feature means do not depend on the noisy class (SE of each mean ~ 0.014).
    means = np.array([X[noisy == c].mean(axis=0) for c in range(4)])
    assert np.abs(means - X.mean(axis=0)).max() < 0.05


def test_noisy_labels_take_values_from_classes() -> None:
    noisy = noisy_labels(np.array(["a"] * 50), ["a", "b"], seed=0)

    assert set(noisy.tolist()) == {"a", "b"}


@pytest.mark.parametrize("classes", [[], [1, 1]])
def test_noisy_labels_rejects_bad_classes(classes: list[int]) -> None:
    with pytest.raises(DataValidationError, match="classes"):
        noisy_labels(np.zeros(3), classes, seed=0)


# ---- label share ----------------------------------------------------------------------------
def test_label_share_rows_sum_to_one_and_flag_unknown_labels(labels: np.ndarray) -> None:
    shares = label_share(labels, iid(len(labels), 3, seed=0), [0, 1, 2])

    assert np.allclose(shares.sum(axis=1), 1.0)
    with pytest.raises(LabelError, match="outside"):
        label_share(labels, [np.arange(10)], [5])
