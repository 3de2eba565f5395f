"""Hyperplane sites of the PubSub-ML scale experiments (pubsub-ml.txt Table 3)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from river.datasets import synth
from sklearn.linear_model import LogisticRegression

from pubsubml.experiments.pubsub.scale.hyperplane import (
    TABLE3,
    SiteParams,
    concept_weights,
    draw_site_params,
    hyperplane_stream,
    make_consortium,
)


def _concept_labels(X: pd.DataFrame, weights: np.ndarray) -> np.ndarray:
    """River's noiseless rule 1[w·x ≥ Σw / 2] for fixed weights."""
    return (X.to_numpy() @ weights >= weights.sum() * 0.5).astype(np.int64)


# ---- Table 3 ------------------------------------------------------------------------------
def test_site_parameters_follow_table3() -> None:
    params = draw_site_params(4000, seed=0)
    p3 = np.array([p.noise_percentage for p in params])
    p4 = np.array([p.mag_change for p in params])
    half_normal_mean = math.sqrt(2 / math.pi)  # E|N(0, s²)| = s·√(2/π)
    se3 = TABLE3["p3_scale"] * math.sqrt(1 - 2 / math.pi) / math.sqrt(len(p3))
    assert abs(p3.mean() - TABLE3["p3_scale"] * half_normal_mean) < 4 * se3
    assert abs(p4.mean() - TABLE3["p4_scale"] * half_normal_mean) < 4 * se3 / 10
    assert p3.min() >= 0 and p4.min() >= 0 and p3.max() <= 1 and p4.max() <= 1
    assert len(set(p3.tolist())) == len(p3)  # drawn per site
    assert {(p.n_features, p.n_drift_features, p.sigma) for p in params} == {
        (TABLE3["p1"], TABLE3["p2"], TABLE3["p5"])
    }


def test_stream_reproduces_river_exactly() -> None:
    params = SiteParams(noise_percentage=0.07, mag_change=0.003)
    X, y = next(hyperplane_stream(1, 200, params, seed=5))
    river = list(
        itertools.islice(
            synth.Hyperplane(seed=5, mag_change=0.003, noise_percentage=0.07, sigma=0.1), 200
        )
    )
    assert np.array_equal(X.to_numpy(), [[x[i] for i in range(10)] for x, _ in river])
    assert np.array_equal(y, [label for _, label in river])


def test_measured_label_noise_is_p3() -> None:
    weights = concept_weights(3)
    X, y = next(hyperplane_stream(1, 6000, SiteParams(0.2, 0.0), seed=11, weights=weights))
    flipped = np.mean(y != _concept_labels(X, weights))
    assert abs(flipped - 0.19) < 0.02  # river flips when 0.01 + u <= p3
    assert X.to_numpy().min() >= 0.0 and X.to_numpy().max() <= 1.0
    assert list(X.columns) == [f"x{i}" for i in range(10)]


def test_sites_share_the_concept_but_not_the_rows() -> None:
    weights = concept_weights(0)
    a = next(hyperplane_stream(1, 300, SiteParams(0.0, 0.0), seed=1, weights=weights))
    b = next(hyperplane_stream(1, 300, SiteParams(0.0, 0.0), seed=2, weights=weights))
    assert not np.allclose(a[0].to_numpy(), b[0].to_numpy())
    for X, y in (a, b):
        assert np.array_equal(y, _concept_labels(X, weights))


def test_drift_moves_the_concept() -> None:
    weights = concept_weights(0)
    chunks = list(hyperplane_stream(10, 500, SiteParams(0.0, 0.05), seed=4, weights=weights))
    first = np.mean(chunks[0][1] == _concept_labels(chunks[0][0], weights))
    last = np.mean(chunks[-1][1] == _concept_labels(chunks[-1][0], weights))
    assert first > last


def test_consortium_roles() -> None:
    pubs, subs = make_consortium(6, 8, 50, seed=1, n_noisy=2)
    assert [p.params.pure_noise for p in pubs] == [False] * 4 + [True] * 2
    assert all(s.params.noise_percentage == 0.0 and not s.params.pure_noise for s in subs)
    # subscriber j takes the p4 of good publisher j (cycling)
    assert [s.params.mag_change for s in subs] == [pubs[j % 4].params.mag_change for j in range(8)]
    assert len({p.name for p in pubs + subs}) == 14
    with pytest.raises(ValueError):
        make_consortium(3, 1, 10, seed=0, n_noisy=3)


def test_noisy_sites_are_noise() -> None:
    pubs, subs = make_consortium(2, 1, 3000, seed=0, n_noisy=1)
    good, noisy = pubs
    X_test, y_test = subs[0].data.X, subs[0].data.y
    on_noise = LogisticRegression().fit(noisy.data.X, noisy.data.y).score(X_test, y_test)
    on_good = LogisticRegression().fit(good.data.X, good.data.y).score(X_test, y_test)
    assert abs(on_noise - 0.5) < 0.1
    assert on_good > 0.8
    weights = concept_weights(0)
    assert abs(np.mean(noisy.data.y == _concept_labels(noisy.data.X, weights)) - 0.5) < 0.05
