"""UCI Heart Disease at four hospitals: the shipped files, the public schema, the as-recorded
loaders and FLamby's Fed-Heart-Disease split."""

from __future__ import annotations

import io
import tomllib
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pubsubml.data import (
    HEART_SCHEMA,
    HOSPITALS,
    LOADERS,
    FlambySplit,
    UnknownDatasetError,
    flamby_normalize,
    flamby_split,
    hospital_datasets,
    load,
    load_heart_disease,
    read_hospital,
    recorded_features,
)
from pubsubml.data import heart_disease as hd

SHARED = Path("/work/shared/data/heart-disease")
ROOT = Path(__file__).resolve().parents[2]

ROWS = {"cleveland": 303, "hungary": 294, "switzerland": 123, "va": 200}
DISEASE = {"cleveland": 139, "hungary": 106, "switzerland": 115, "va": 149}
FLAMBY_KEPT = {"cleveland": 303, "hungary": 261, "switzerland": 46, "va": 130}
FLAMBY_SIZES = {
    "cleveland": (199, 104),
    "hungary": (172, 89),
    "switzerland": (30, 16),
    "va": (85, 45),
}
FLAMBY_COLUMNS = (
    "age",
    "sex",
    "trestbps",
    "chol",
    "fbs",
    "thalach",
    "exang",
    "oldpeak",
    "cp_2",
    "cp_3",
    "cp_4",
    "restecg_1",
    "restecg_2",
)
ALL = list(HEART_SCHEMA.names)
LACKS = {
    "cleveland": [],
    "hungary": ["slope", "ca", "thal"],
    "switzerland": ["chol", "fbs", "ca"],
    "va": ["slope", "ca", "thal"],
}


# ---- the shipped files ----------------------------------------------------------------------
def _package_file(name: str) -> bytes:
    return resources.files("pubsubml.data").joinpath("heart_disease_files", name).read_bytes()


@pytest.mark.parametrize("hospital", HOSPITALS)
def test_each_hospital_file_ships_with_the_package(hospital: str) -> None:
    data = _package_file(hd.HOSPITAL_FILES[hospital])

    assert data.count(b"\n") == ROWS[hospital]
    if SHARED.is_dir():
        assert data == (SHARED / hd.HOSPITAL_FILES[hospital]).read_bytes()


def test_the_files_are_package_data_with_their_attribution() -> None:
    readme = _package_file("README.md").decode("utf-8")
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]["package-data"]["pubsubml"]

    assert "data/heart_disease_files/*.data" in patterns
    assert "data/heart_disease_files/README.md" in patterns
    for text in ("CC BY 4.0", "https://doi.org/10.24432/C52P4X", "Janosi", "Detrano", "unedited"):
        assert text in readme


def test_loading_never_changes_the_schema() -> None:
    before = HEART_SCHEMA.to_json()

    datasets = [load_heart_disease(), *hospital_datasets().values()]
    datasets += [load_heart_disease(h) for h in HOSPITALS]
    flamby_split()

    assert HEART_SCHEMA.to_json() == before
    assert all(d.schema is HEART_SCHEMA for d in datasets)


# ---- the files as recorded -------------------------------------------------------------------
@pytest.mark.parametrize("hospital", HOSPITALS)
def test_read_hospital_gives_the_14_columns_of_every_row(hospital: str) -> None:
    frame = read_hospital(hospital)

    assert frame.shape == (ROWS[hospital], 14)
    assert list(frame.columns) == list(hd.COLUMNS)
    assert all(frame[c].dtype == np.float64 for c in hd.COLUMNS[:-1])
    assert frame["num"].dtype == np.int64
    assert set(frame["num"]) <= {0, 1, 2, 3, 4}


def test_zero_cholesterol_and_blood_pressure_read_as_missing() -> None:
    switzerland, va = read_hospital("switzerland"), read_hospital("va")
    raw_va = pd.read_csv(
        io.BytesIO(_package_file("processed.va.data")),
        header=None,
        names=list(hd.COLUMNS),
        na_values=["?"],
    )

    assert switzerland["chol"].isna().all()
    assert int(((raw_va["chol"] == 0) & va["chol"].isna()).sum()) == 49
    assert int(va["chol"].isna().sum()) == 49 + 7
    assert int(va["trestbps"].isna().sum()) == 56 + 1
    for hospital in HOSPITALS:
        frame = read_hospital(hospital)
        assert not (frame["chol"] == 0).any() and not (frame["trestbps"] == 0).any()


def test_reading_returns_fresh_copies() -> None:
    frame = read_hospital("cleveland")
    frame.iloc[0, 0] = -1.0
    X, y = load_heart_disease("cleveland").X, load_heart_disease("cleveland").y
    X.iloc[0, 0] = -1.0
    y[0] = 7

    assert read_hospital("cleveland").iloc[0, 0] == 63.0
    assert load_heart_disease("cleveland").X.iloc[0, 0] == 63.0
    assert load_heart_disease("cleveland").y[0] == 0


@pytest.mark.parametrize("hospital", HOSPITALS)
def test_recorded_features_are_those_missing_in_at_most_half_the_rows(hospital: str) -> None:
    recorded = recorded_features(hospital)
    share = read_hospital(hospital)[ALL].isna().mean()

    assert recorded == [n for n in ALL if n not in LACKS[hospital]]
    assert all(share[n] <= 0.5 for n in recorded)
    assert all(share[n] > 0.5 for n in LACKS[hospital])


@pytest.mark.parametrize("hospital", HOSPITALS)
def test_each_hospital_keeps_its_recorded_features_without_nan(hospital: str) -> None:
    d = hospital_datasets()[hospital]

    assert list(d.X.columns) == recorded_features(hospital)
    assert len(d) == ROWS[hospital] and d.y.shape == (ROWS[hospital],)
    assert not d.X.isna().any().any()
    for name in d.X.columns:
        expected = np.int64 if HEART_SCHEMA[name].kind == "categorical" else np.float64
        assert d.X[name].dtype == expected


@pytest.mark.parametrize("hospital", HOSPITALS)
def test_missing_cells_of_recorded_features_hold_the_public_default(hospital: str) -> None:
    frame = read_hospital(hospital)
    X = load_heart_disease(hospital).X

    for name in X.columns:
        missing = frame[name].isna().to_numpy()
        assert (X[name].to_numpy()[missing] == HEART_SCHEMA[name].default).all()
        np.testing.assert_array_equal(
            X[name].to_numpy()[~missing], frame[name].to_numpy()[~missing]
        )


@pytest.mark.parametrize("hospital", [*HOSPITALS, None])
def test_every_value_lies_within_the_public_bounds_and_categories(hospital: str | None) -> None:
    d = load_heart_disease(hospital)
    schema = HEART_SCHEMA.subset(d.X.columns)

    checked = schema.validate_frame(d.X, out_of_bounds="error")  # raises on any value outside
    encoded = HEART_SCHEMA.encode(HEART_SCHEMA.extend(d.X))

    assert checked.shape == d.X.shape
    assert encoded.shape == (len(d), HEART_SCHEMA.n_encoded)
    assert encoded.min() >= 0.0 and encoded.max() <= 1.0


@pytest.mark.parametrize("hospital", HOSPITALS)
def test_labels_are_binary_disease(hospital: str) -> None:
    d = load_heart_disease(hospital)

    assert (d.task, d.classes) == ("classification", (0, 1))
    assert d.y.dtype == np.int64 and set(np.unique(d.y)) == {0, 1}
    assert int(d.y.sum()) == DISEASE[hospital]
    np.testing.assert_array_equal(d.y, (read_hospital(hospital)["num"] > 0).to_numpy())


def test_pooled_hospitals_are_extended_with_the_public_defaults() -> None:
    pooled = load_heart_disease()
    parts = hospital_datasets()

    assert pooled.X.shape == (920, 13) and list(pooled.X.columns) == ALL
    assert not pooled.X.isna().any().any()
    start = 0
    for hospital in HOSPITALS:
        rows = slice(start, start + ROWS[hospital])
        start += ROWS[hospital]
        part = pooled.X.iloc[rows].reset_index(drop=True)
        pd.testing.assert_frame_equal(
            part, HEART_SCHEMA.extend(parts[hospital].X).astype(part.dtypes)
        )
        np.testing.assert_array_equal(pooled.y[rows], parts[hospital].y)
        for name in LACKS[hospital]:
            assert (part[name] == HEART_SCHEMA[name].default).all()
    assert int(pooled.y.sum()) == sum(DISEASE.values())


def test_the_catalog_loads_heart_disease_by_name() -> None:
    assert "heart-disease" in LOADERS
    pd.testing.assert_frame_equal(load("heart-disease").X, load_heart_disease().X)
    pd.testing.assert_frame_equal(
        load("heart-disease", hospital="va").X, load_heart_disease("va").X
    )


@pytest.mark.parametrize("name", ["hungarian", "Cleveland", "", None])
def test_unknown_hospitals_raise(name: str | None) -> None:
    with pytest.raises(UnknownDatasetError, match="unknown hospital"):
        read_hospital(name)  # type: ignore[arg-type]
    if name is not None:
        with pytest.raises(UnknownDatasetError):
            load_heart_disease(name)
        with pytest.raises(UnknownDatasetError):
            recorded_features(name)


# ---- FLamby's protocol -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def split() -> dict[str, FlambySplit]:
    return flamby_split()


def test_flamby_split_sizes_and_columns(split: dict[str, FlambySplit]) -> None:
    assert list(split) == list(HOSPITALS)
    for hospital, s in split.items():
        n_train, n_test = FLAMBY_SIZES[hospital]
        assert s.columns == FLAMBY_COLUMNS
        assert s.X_train.shape == (n_train, 13) and s.X_test.shape == (n_test, 13)
        assert s.y_train.shape == (n_train,) and s.y_test.shape == (n_test,)
        assert n_train + n_test == FLAMBY_KEPT[hospital]
        assert s.X_train.dtype == np.float64 and s.X_test.dtype == np.float64
        assert s.y_train.dtype == np.int64 and s.y_test.dtype == np.int64
        assert np.isfinite(s.X_train).all() and np.isfinite(s.X_test).all()
    assert sum(n for n, _ in FLAMBY_SIZES.values()) == 486


def test_flamby_split_is_reproducible(split: dict[str, FlambySplit]) -> None:
    again = flamby_split()

    for hospital in HOSPITALS:
        for field in ("X_train", "y_train", "X_test", "y_test"):
            np.testing.assert_array_equal(
                getattr(split[hospital], field), getattr(again[hospital], field)
            )


def test_flamby_keeps_zero_cholesterol_and_its_rows(split: dict[str, FlambySplit]) -> None:
    chol = FLAMBY_COLUMNS.index("chol")
    switzerland = split["switzerland"]

    assert (switzerland.X_train[:, chol] == 0).all() and (switzerland.X_test[:, chol] == 0).all()
    disease = {h: int(s.y_train.sum() + s.y_test.sum()) for h, s in split.items()}
    assert disease == {"cleveland": 139, "hungary": 98, "switzerland": 45, "va": 101}


def test_flamby_split_is_stratified_where_both_classes_have_more_than_two_rows(
    split: dict[str, FlambySplit],
) -> None:
    for hospital in ("cleveland", "hungary", "va"):
        s = split[hospital]
        assert abs(s.y_train.mean() - s.y_test.mean()) < 0.02
    assert int(split["switzerland"].y_train.sum() + split["switzerland"].y_test.sum()) == 45


def test_flamby_sets_partition_the_complete_rows_in_file_order(
    split: dict[str, FlambySplit],
) -> None:
    # Cleveland keeps all its rows: rebuild them with the public codes and find each split row.
    raw = read_hospital("cleveland").fillna({"chol": 0.0, "trestbps": 0.0})
    full = np.column_stack(
        [raw[c].to_numpy() for c in FLAMBY_COLUMNS[:8]]
        + [(raw["cp"] == level).to_numpy(dtype=np.float64) for level in (2, 3, 4)]
        + [(raw["restecg"] == level).to_numpy(dtype=np.float64) for level in (1, 2)]
    )
    assert len(np.unique(full, axis=0)) == len(full)  # every row is distinct
    s = split["cleveland"]

    def positions(X: np.ndarray) -> list[int]:
        return [int(np.flatnonzero((full == row).all(axis=1))[0]) for row in X]

    train, test = positions(s.X_train), positions(s.X_test)
    assert train == sorted(train) and test == sorted(test)
    assert sorted(train + test) == list(range(len(full)))


def test_flamby_normalize_standardises_each_hospital_with_its_train_set(
    split: dict[str, FlambySplit],
) -> None:
    for s in split.values():
        n = flamby_normalize(s)
        mean = s.X_train.mean(axis=0)
        scale = s.X_train.std(axis=0, ddof=1) + 1e-9
        np.testing.assert_allclose(n.X_test, (s.X_test - mean) / scale)
        np.testing.assert_allclose(n.X_train.mean(axis=0), 0.0, atol=1e-9)
        assert n.y_train is s.y_train and n.columns == s.columns
    constant = flamby_normalize(split["switzerland"]).X_train[:, FLAMBY_COLUMNS.index("chol")]
    assert (constant == 0).all()


def test_flamby_normalize_is_not_applied_by_default(split: dict[str, FlambySplit]) -> None:
    age = FLAMBY_COLUMNS.index("age")

    assert split["cleveland"].X_train[:, age].min() >= 18
