"""Tests of pubsubml.learners.forest: DPRandomForestClassifier's trees, votes and public bounds."""

from __future__ import annotations

import numpy as np
import pytest

from pubsubml.learners.forest import DPRandomForestClassifier
from pubsubml.schema import FeatureSchema


def _data(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, 2))
    return X, (X[:, 0] > 0.5).astype(int)


def test_probabilities_are_the_fraction_of_trees_voting() -> None:
    X, y = _data()
    clf = DPRandomForestClassifier(
        classes=[0, 1, 2], bounds=(0, 1), n_estimators=7, max_depth=3, random_state=0, noise_seed=0
    ).fit(X, y)

    proba = clf.predict_proba(X)

    votes = np.stack([tree.predict(X) for tree in clf.estimator_.estimators_])
    expected = np.stack([(votes == k).mean(axis=0) for k in range(3)], axis=1)
    np.testing.assert_allclose(proba, expected, atol=1e-12)
    assert len(clf.estimator_.estimators_) == 7


@pytest.mark.parametrize("max_depth", [1, 3])
def test_trees_are_no_deeper_than_max_depth(max_depth: int) -> None:
    X, y = _data()

    clf = DPRandomForestClassifier(
        classes=[0, 1],
        bounds=(0, 1),
        n_estimators=4,
        max_depth=max_depth,
        random_state=1,
        noise_seed=1,
    ).fit(X, y)

    assert all(t.get_depth() <= max_depth for t in clf.estimator_.estimators_)


def test_split_thresholds_are_drawn_within_the_public_bounds() -> None:
    rng = np.random.default_rng(2)
    lower, upper = np.array([0.2, 0.5]), np.array([0.4, 0.9])
    X = lower + (upper - lower) * rng.random((300, 2))
    y = (X[:, 1] > 0.7).astype(int)

    clf = DPRandomForestClassifier(
        classes=[0, 1],
        bounds=(lower, upper),
        n_estimators=5,
        max_depth=4,
        random_state=0,
        noise_seed=0,
    ).fit(X, y)

    for tree in clf.estimator_.estimators_:
        split = tree.tree_.feature >= 0
        features, thresholds = tree.tree_.feature[split], tree.tree_.threshold[split]
        assert len(thresholds) > 0
        assert np.all(thresholds >= lower[features]) and np.all(thresholds <= upper[features])


def test_without_shuffle_each_tree_trains_on_a_block_of_rows_in_input_order() -> None:
    rng = np.random.default_rng(0)
    X, y = rng.random((400, 2)), np.repeat([0, 1], 200)  # rows sorted by label

    def agreement(shuffle: bool) -> list[float]:
        clf = DPRandomForestClassifier(
            classes=[0, 1],
            bounds=(0, 1),
            n_estimators=2,
            max_depth=2,
            epsilon=1000.0,
            shuffle=shuffle,
            random_state=1,
            noise_seed=1,
        ).fit(X, y)
        trees = clf.estimator_.estimators_
        return [float(np.mean(tree.predict(X) == k)) for k, tree in enumerate(trees)]

    # tree k saw only label k in order; shuffled, each saw both labels
    assert min(agreement(shuffle=False)) > 0.95
    assert min(agreement(shuffle=True)) < 0.9


def test_schema_inputs_give_the_same_model_as_the_encoded_matrix_with_unit_bounds() -> None:
    schema = FeatureSchema.numeric(["u", "v"], lower=-10.0, upper=10.0)
    raw = np.random.default_rng(3).uniform(-10, 10, (150, 2))
    y = (raw[:, 0] > 0).astype(int)

    with_schema = DPRandomForestClassifier(
        schema=schema, classes=[0, 1], random_state=4, noise_seed=4
    ).fit(raw, y)
    encoded = DPRandomForestClassifier(
        classes=[0, 1], bounds=(0, 1), random_state=4, noise_seed=4
    ).fit(schema.encode(raw), y)

    np.testing.assert_array_equal(
        with_schema.predict_proba(raw), encoded.predict_proba(schema.encode(raw))
    )
