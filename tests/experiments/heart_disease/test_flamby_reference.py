"""FLamby's published Fed-Heart-Disease results and hyperparameters, as stored constants."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from pubsubml.data.heart_disease import HOSPITALS, flamby_split
from pubsubml.experiments.heart_disease.flamby_reference import (
    FLAMBY_HYPERPARAMETERS,
    FLAMBY_RESULTS,
    FLAMBY_STRATEGY_HYPERPARAMETERS,
    POOLED_TEST,
    TEST_HOSPITALS,
    TEST_SETS,
    TEST_SIZES,
    FlambyResult,
    mean_accuracy,
)

METHODS = [
    "Pooled Training",
    "Local 0",
    "Local 1",
    "Local 2",
    "Local 3",
    "Cyclic100",
    "FedAdagrad100",
    "FedAdam100",
    "FedAvg100",
    "FedProx100",
    "FedYogi100",
    "Scaffold100",
]


def test_the_table_has_every_method_seed_and_test_set_once() -> None:
    keys = Counter((r.method, r.seed, r.test) for r in FLAMBY_RESULTS)

    assert len(FLAMBY_RESULTS) == 12 * 5 * 5 == len(keys)
    assert {m for m, _, _ in keys} == set(METHODS)
    assert {s for _, s, _ in keys} == {42, 43, 44, 45, 46}
    assert {t for _, _, t in keys} == set(TEST_SETS)
    assert all(0 <= r.correct <= r.n_test for r in FLAMBY_RESULTS)


def test_rows_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        FLAMBY_RESULTS[0].correct = 0  # type: ignore[misc]
    assert isinstance(FLAMBY_RESULTS[0], FlambyResult)


def test_published_values_read_back_exactly() -> None:
    rows = {(r.method, r.seed, r.test): r.accuracy for r in FLAMBY_RESULTS}

    # Values as written in heart_seed42.csv / heart_seed46.csv.
    assert rows[("Pooled Training", 42, "client_test_0")] == 0.7980769230769231
    assert rows[("Pooled Training", 42, POOLED_TEST)] == 0.7913385826771654
    assert rows[("FedAvg100", 42, "client_test_1")] == 0.6966292134831461
    assert rows[("Local 2", 46, POOLED_TEST)] == 0.5078740157480315


def test_mean_accuracy_over_the_five_seeds() -> None:
    means = mean_accuracy()

    assert list(means) == METHODS
    assert all(list(by_test) == list(TEST_SETS) for by_test in means.values())
    assert means["Pooled Training"][POOLED_TEST] == pytest.approx(0.7953, abs=1e-4)
    assert means["Pooled Training"]["client_test_0"] == pytest.approx(0.7827, abs=1e-4)
    assert means["FedAvg100"][POOLED_TEST] == pytest.approx(0.7480, abs=1e-4)
    assert means["Cyclic100"][POOLED_TEST] == pytest.approx(0.7850, abs=1e-4)
    assert means["Local 2"][POOLED_TEST] == pytest.approx(0.4827, abs=1e-4)


def test_test_sets_are_the_hospitals_of_flamby_split() -> None:
    split = flamby_split()

    assert list(TEST_HOSPITALS.values()) == list(HOSPITALS)
    for test, hospital in TEST_HOSPITALS.items():
        assert TEST_SIZES[test] == len(split[hospital].y_test)
    assert TEST_SIZES[POOLED_TEST] == sum(len(s.y_test) for s in split.values())


def test_hyperparameters_are_flambys() -> None:
    assert FLAMBY_HYPERPARAMETERS["batch_size"] == 4
    assert FLAMBY_HYPERPARAMETERS["learning_rate"] == 0.001
    assert FLAMBY_HYPERPARAMETERS["num_epochs_pooled"] == 50
    assert FLAMBY_HYPERPARAMETERS["num_rounds"] == (486 // 4 // 4) * 50 // 100 == 15
    assert FLAMBY_STRATEGY_HYPERPARAMETERS["FedProx"]["mu"] == 0.01
    assert {f"{name}100" for name in FLAMBY_STRATEGY_HYPERPARAMETERS} == set(METHODS[5:])
