"""The rows of the heart-disease benchmark: FLamby's split as frames, repeated splits, clinics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsubml.data.heart_disease import HOSPITALS, flamby_split, hospital_datasets
from pubsubml.data.heart_disease_schema import HEART_SCHEMA
from pubsubml.experiments.heart_disease.splits import (
    FLAMBY_FEATURES,
    FLAMBY_SCHEMA,
    TEST_FRACTION,
    clinic_rows,
    flamby_frame,
    flamby_frames,
    hospital_splits,
    split_seed,
)


def test_flamby_schema_is_the_public_schema_without_slope_ca_thal() -> None:
    assert FLAMBY_FEATURES == tuple(
        n for n in HEART_SCHEMA.names if n not in {"slope", "ca", "thal"}
    )
    assert FLAMBY_SCHEMA.names == list(FLAMBY_FEATURES) and FLAMBY_SCHEMA.n_encoded == 18
    assert TEST_FRACTION == 0.34


def test_flamby_frames_hold_flambys_rows_with_the_codes_restored() -> None:
    raw, frames = flamby_split(), flamby_frames()
    assert list(frames) == list(HOSPITALS)
    for hospital, split in raw.items():
        frame = frames[hospital]
        for X, encoded, y, labels in (
            (frame.X_train, split.X_train, frame.y_train, split.y_train),
            (frame.X_test, split.X_test, frame.y_test, split.y_test),
        ):
            assert list(X.columns) == list(FLAMBY_FEATURES) and len(X) == len(encoded)
            np.testing.assert_array_equal(y, labels)
            onehot = pd.DataFrame(encoded, columns=list(split.columns))
            for level in (2, 3, 4):  # re-encoding the decoded codes gives FLamby's columns back
                np.testing.assert_array_equal(X["cp"] == level, onehot[f"cp_{level}"] == 1)
            for level in (1, 2):
                np.testing.assert_array_equal(
                    X["restecg"] == level, onehot[f"restecg_{level}"] == 1
                )
            for column in ("age", "chol", "oldpeak", "sex"):
                np.testing.assert_array_equal(X[column].to_numpy(float), onehot[column])
            assert X["cp"].dtype == np.int64 and X["age"].dtype == np.float64
    assert set(frames["switzerland"].y_train) == {1}  # no healthy Swiss patient to train on


def test_flamby_frame_decodes_the_dropped_first_levels() -> None:
    columns = ("age", "sex", "trestbps", "chol", "fbs", "thalach", "exang", "oldpeak")
    columns += ("cp_2", "cp_3", "cp_4", "restecg_1", "restecg_2")
    rows = np.zeros((2, 13))
    rows[1, 9] = rows[1, 11] = 1  # cp_3, restecg_1
    frame = flamby_frame(rows, columns)
    assert frame["cp"].tolist() == [1, 3] and frame["restecg"].tolist() == [0, 1]


def test_hospital_splits_are_stratified_disjoint_and_differ_by_repeat() -> None:
    data = hospital_datasets()
    first, again, other = hospital_splits(0), hospital_splits(0), hospital_splits(1)
    for hospital, split in first.items():
        n = len(data[hospital].y)
        assert len(split.y_test) == int(np.ceil(TEST_FRACTION * n))
        assert len(split.y_train) + len(split.y_test) == n
        assert list(split.X_train.columns) == list(data[hospital].X.columns)
        share = data[hospital].y.mean()
        assert abs(split.y_test.sum() - share * len(split.y_test)) <= 1  # stratified
        pd.testing.assert_frame_equal(split.X_test, again[hospital].X_test)
        assert not split.X_test.equals(other[hospital].X_test)
    swiss = first["switzerland"]
    assert (swiss.y_test == 0).sum() == 3 and (swiss.y_train == 0).sum() == 5
    with pytest.raises(ValueError, match="repeat"):
        hospital_splits(-1)


def test_clinic_rows_are_nested_stratified_samples() -> None:
    y = np.array([0] * 90 + [1] * 110)
    small, large = clinic_rows(y, 30, seed=3), clinic_rows(y, 100, seed=3)
    assert set(small) <= set(large) and len(set(large)) == 100
    assert abs(y[small].sum() - 30 * 0.55) <= 1 and abs(y[large].sum() - 55) <= 1
    assert not np.array_equal(small, clinic_rows(y, 30, seed=4))
    for bad in (0, 201):
        with pytest.raises(ValueError):
            clinic_rows(y, bad, seed=0)


def test_split_seed_is_a_deterministic_function_of_its_keys() -> None:
    assert split_seed(1, 2, 3) == split_seed(1, 2, 3)
    assert len({split_seed(0, r) for r in range(50)}) == 50
