"""Tests of pubsubml.schema.features: Feature validation and FeatureSchema checks and encoding."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError
from sklearn.preprocessing import OneHotEncoder

from pubsubml.errors import DataValidationError, SchemaMismatchError
from pubsubml.schema import Feature, FeatureSchema


@pytest.fixture
def schema() -> FeatureSchema:
    """Two numeric features with different bounds, a string and an integer categorical."""
    return FeatureSchema(
        features=(
            Feature(name="age", lower=0, upper=100, default=50),
            Feature(name="temp", lower=35.0, upper=42.0, default=37.0),
            Feature(name="sex", kind="categorical", categories=("f", "m", "x"), default="f"),
            Feature(name="grade", kind="categorical", categories=(1, 2, 3), default=2),
        )
    )


def _frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.uniform(0, 100, n),
            "temp": rng.uniform(35, 42, n),
            "sex": rng.choice(["f", "m", "x"], n),
            "grade": rng.choice([1, 2, 3], n),
        }
    )


# ---- Feature --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "1age", "lower": 0, "upper": 1, "default": 0}, "invalid feature name"),
        ({"name": "a b", "lower": 0, "upper": 1, "default": 0}, "invalid feature name"),
        ({"name": "a" * 129, "lower": 0, "upper": 1, "default": 0}, "invalid feature name"),
        ({"name": "a", "default": 0}, "needs public lower and upper bounds"),
        ({"name": "a", "lower": 0, "upper": float("inf"), "default": 0}, "must be finite"),
        ({"name": "a", "lower": 1, "upper": 1, "default": 1}, "lower must be < upper"),
        ({"name": "a", "lower": 0, "upper": 1, "default": 2}, "within"),
        ({"name": "a", "lower": 0, "upper": 1, "default": "0.5"}, "within"),
        (
            {"name": "a", "lower": 0, "upper": 1, "categories": (0, 1), "default": 0},
            "cannot have categories",
        ),
        ({"name": "c", "kind": "categorical", "default": "u"}, "needs its public categories"),
        (
            {"name": "c", "kind": "categorical", "categories": ("u", "u"), "default": "u"},
            "not unique",
        ),
        (
            {"name": "c", "kind": "categorical", "categories": ("u",), "lower": 0, "default": "u"},
            "cannot have bounds",
        ),
        (
            {"name": "c", "kind": "categorical", "categories": ("u", "v"), "default": "w"},
            "must be one of its categories",
        ),
    ],
)
def test_inconsistent_features_are_rejected(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Feature(**fields)


def test_name_rules_accept_dots_dashes_and_128_characters() -> None:
    names = ["_x", "lab.wbc-count", "a" * 128]

    features = [Feature(name=n, lower=0, upper=1, default=0) for n in names]

    assert [f.name for f in features] == names


def test_width_is_one_for_numeric_and_one_per_category(schema: FeatureSchema) -> None:
    assert [f.width for f in schema] == [1, 1, 3, 3]


def test_features_are_frozen() -> None:
    feature = Feature(name="a", lower=0, upper=1, default=0)

    with pytest.raises(ValidationError):
        feature.upper = 5  # type: ignore[misc]


# ---- FeatureSchema container ----------------------------------------------------------------
def test_schema_rejects_duplicates_and_emptiness() -> None:
    a = Feature(name="a", lower=0, upper=1, default=0)

    with pytest.raises(ValidationError, match=r"duplicate feature names: \['a'\]"):
        FeatureSchema(features=(a, a))
    with pytest.raises(ValidationError, match="at least one feature"):
        FeatureSchema(features=())


def test_container_protocol(schema: FeatureSchema) -> None:
    assert schema.names == ["age", "temp", "sex", "grade"]
    assert len(schema) == 4
    assert [f.name for f in schema] == schema.names
    assert "sex" in schema and "wbc" not in schema and 3 not in schema
    assert schema["temp"].upper == 42.0
    with pytest.raises(SchemaMismatchError, match="'wbc' is not in the schema"):
        schema["wbc"]


def test_subset_keeps_the_order_given_and_refuses_unknown_names(schema: FeatureSchema) -> None:
    sub = schema.subset(["grade", "age"])

    assert sub.names == ["grade", "age"]
    assert sub["grade"] == schema["grade"]
    with pytest.raises(SchemaMismatchError):
        schema.subset(["age", "wbc"])


def test_encoded_names_and_defaults(schema: FeatureSchema) -> None:
    assert schema.n_encoded == len(schema.encoded_names) == 8
    assert schema.encoded_names == [
        "age",
        "temp",
        "sex=f",
        "sex=m",
        "sex=x",
        "grade=1",
        "grade=2",
        "grade=3",
    ]
    assert schema.defaults == {"age": 50, "temp": 37.0, "sex": "f", "grade": 2}


def test_equal_schemas_hash_alike_and_survive_json(schema: FeatureSchema) -> None:
    again = FeatureSchema.from_json(schema.to_json())

    assert again == schema
    assert len({schema, again}) == 1
    assert schema.subset(["age"]) != schema.subset(["temp"])


def test_from_json_rejects_bad_input() -> None:
    with pytest.raises(ValidationError):
        FeatureSchema.from_json('{"features": [{"name": "a", "default": 0}]}')
    with pytest.raises(ValidationError):
        FeatureSchema.from_json(b"not json")


def test_numeric_shares_bounds_and_defaults_to_the_midpoint() -> None:
    mid = FeatureSchema.numeric(["a", "b"], lower=-2.0, upper=6.0)
    fixed = FeatureSchema.numeric(["a"], lower=-2.0, upper=6.0, default=-1.0)

    assert [(f.lower, f.upper, f.default) for f in mid] == [(-2.0, 6.0, 2.0)] * 2
    assert fixed["a"].default == -1.0
    with pytest.raises(ValidationError, match="within"):
        FeatureSchema.numeric(["a"], default=3.0)


# ---- validate_frame -------------------------------------------------------------------------
def test_validate_frame_orders_columns_and_keeps_the_index(schema: FeatureSchema) -> None:
    X = _frame(5)[["grade", "sex", "temp", "age"]].set_axis([10, 11, 12, 13, 14])

    out = schema.validate_frame(X)

    assert list(out.columns) == schema.names
    assert list(out.index) == [10, 11, 12, 13, 14]
    np.testing.assert_array_equal(out["age"].to_numpy(), X["age"].to_numpy())
    assert out["sex"].tolist() == X["sex"].tolist()


def test_array_input_is_read_in_schema_order(schema: FeatureSchema) -> None:
    rows = [[10.0, 36.0, "m", 3], [90.0, 41.0, "x", 1]]

    out = schema.validate_frame(rows)

    assert out["age"].tolist() == [10.0, 90.0]
    assert out["sex"].tolist() == ["m", "x"]
    assert out["grade"].tolist() == [3, 1]


def test_array_input_of_wrong_shape(schema: FeatureSchema) -> None:
    with pytest.raises(SchemaMismatchError, match="array input has 3 columns"):
        schema.validate_frame([[1.0, 36.0, "m"]])
    with pytest.raises(DataValidationError, match="2-D"):
        schema.validate_frame([1.0, 36.0, "m", 1])


def test_missing_features_raise_or_take_public_defaults(schema: FeatureSchema) -> None:
    X = _frame(4)[["age", "sex"]]

    with pytest.raises(SchemaMismatchError, match=r"lacks features \['temp', 'grade'\]"):
        schema.validate_frame(X)
    out = schema.validate_frame(X, missing="default")

    assert out["temp"].tolist() == [37.0] * 4
    assert out["grade"].tolist() == [2] * 4
    assert out["age"].tolist() == X["age"].tolist()


def test_extra_columns_raise_or_are_dropped(schema: FeatureSchema) -> None:
    X = _frame(3).assign(zip_code=1234)

    with pytest.raises(SchemaMismatchError, match=r"\['zip_code'\] that are not in the schema"):
        schema.validate_frame(X)
    out = schema.validate_frame(X, extra="ignore")

    assert list(out.columns) == schema.names


def test_out_of_bounds_values_are_clipped_or_refused(schema: FeatureSchema) -> None:
    X = _frame(3).assign(age=[-5.0, 100.0, 250.0])

    clipped = schema.validate_frame(X)

    assert clipped["age"].tolist() == [0.0, 100.0, 100.0]
    with pytest.raises(DataValidationError, match="2 values outside the public bounds"):
        schema.validate_frame(X, out_of_bounds="error")
    inside = X.assign(age=[0.0, 50.0, 100.0])  # the bounds themselves are inside
    assert schema.validate_frame(inside, out_of_bounds="error")["age"].tolist() == [0, 50, 100]


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("age", np.nan, "NaN or infinite"),
        ("temp", np.inf, "NaN or infinite"),
        ("age", "old", "is not numeric"),
        ("sex", None, "missing values"),
        ("sex", "unknown", r"values \['unknown'\] outside its categories"),
        ("grade", 4, r"values \['4'\] outside its categories"),
    ],
)
def test_invalid_values_raise_data_validation_error(
    schema: FeatureSchema, column: str, value: Any, message: str
) -> None:
    X = _frame(3)
    X[column] = X[column].astype(object)
    X.loc[1, column] = value

    with pytest.raises(DataValidationError, match=message):
        schema.validate_frame(X)


def test_duplicate_column_names_are_refused(schema: FeatureSchema) -> None:
    X = _frame(2)
    X.columns = ["age", "age", "sex", "grade"]

    with pytest.raises(SchemaMismatchError, match="duplicate column names"):
        schema.validate_frame(X)


def test_numeric_strings_are_parsed(schema: FeatureSchema) -> None:
    X = _frame(2).assign(age=["12.5", "40"])

    assert schema.validate_frame(X)["age"].tolist() == [12.5, 40.0]


def test_extend_fills_defaults_drops_extras_and_clips(schema: FeatureSchema) -> None:
    X = pd.DataFrame({"sex": ["m", "x"], "age": [150.0, 20.0], "site": ["n", "s"]})

    out = schema.extend(X)

    expected = pd.DataFrame(
        {"age": [100.0, 20.0], "temp": [37.0, 37.0], "sex": ["m", "x"], "grade": [2, 2]}
    )
    assert out.astype(object).equals(expected.astype(object))


def _per_column(schema: FeatureSchema, X: pd.DataFrame, out_of_bounds: str) -> pd.DataFrame:
    """validate_frame written one column at a time, as the documentation states it."""
    out: dict[str, Any] = {}
    for f in schema:
        if f.kind == "categorical":
            out[f.name] = X[f.name].to_numpy(dtype=object)
            continue
        values = pd.to_numeric(X[f.name]).to_numpy(dtype=float)
        if not np.isfinite(values).all():
            raise DataValidationError(f"feature {f.name!r} contains NaN or infinite values")
        if out_of_bounds == "error" and ((values < f.lower) | (values > f.upper)).any():
            raise DataValidationError(f"feature {f.name!r}: values outside the public bounds")
        out[f.name] = np.clip(values, f.lower, f.upper)
    return pd.DataFrame(out, index=X.index)


@pytest.mark.parametrize("out_of_bounds", ["clip", "error"])
def test_numeric_columns_of_every_dtype_give_the_per_column_result(out_of_bounds: str) -> None:
    numeric = FeatureSchema(
        features=tuple(Feature(name=n, lower=-1.0, upper=2.0, default=0.0) for n in "abcde")
    )
    rng = np.random.default_rng(7)
    for trial in range(40):
        X = pd.DataFrame(
            {
                "a": rng.normal(size=6),  # float64
                "b": rng.integers(-2, 4, 6),  # int64
                "c": rng.random(6).astype(np.float32),
                "d": rng.random(6) > 0.5,  # bool: through pd.to_numeric
                "e": rng.random(6).round(3).astype(str),  # numeric strings: parsed
            },
            index=np.arange(10, 16),
        )
        X = X[list(rng.permutation(X.columns))]  # any column order
        if trial % 3 == 0:  # a NaN in one of the float columns
            X.loc[X.index[int(rng.integers(6))], str(rng.choice(["a", "c"]))] = np.nan
        for schema in (numeric, numeric.subset("edcba")):
            try:
                expected = _per_column(schema, X, out_of_bounds)
            except DataValidationError as exc:
                message = str(exc).split(":")[0].split(" contains")[0]
                with pytest.raises(DataValidationError, match=message):
                    schema.validate_frame(X, out_of_bounds=out_of_bounds)  # type: ignore[arg-type]
                continue
            got = schema.validate_frame(X, out_of_bounds=out_of_bounds)  # type: ignore[arg-type]
            assert got.columns.tolist() == schema.names and got.index.equals(X.index)
            np.testing.assert_array_equal(got.to_numpy(dtype=float), expected.to_numpy(dtype=float))
            assert all(dtype == np.float64 for dtype in got.dtypes)


def test_the_first_invalid_feature_in_schema_order_is_named(schema: FeatureSchema) -> None:
    X = _frame(3)
    X.loc[1, "temp"] = np.inf  # a float column, checked with the other numeric ones
    X["sex"] = X["sex"].astype(object)
    X.loc[0, "sex"] = "unknown"  # also invalid, but after "temp" in the schema
    with pytest.raises(DataValidationError, match="'temp' contains NaN or infinite"):
        schema.validate_frame(X)
    X.loc[1, "temp"] = 99.0  # outside [35, 42]: refused, then the categorical is reached
    with pytest.raises(DataValidationError, match="'temp': 1 values outside"):
        schema.validate_frame(X, out_of_bounds="error")
    with pytest.raises(DataValidationError, match="'sex' has values"):
        schema.validate_frame(X)
    X.loc[2, "age"] = np.nan  # the first feature of the schema comes first
    with pytest.raises(DataValidationError, match="'age' contains NaN"):
        schema.validate_frame(X)


def test_integer_column_names_are_read_as_text() -> None:
    schema = FeatureSchema(features=(Feature(name="_1", lower=0, upper=1, default=0),))
    X = pd.DataFrame({"_1": [0.5, 3.0]})
    assert schema.validate_frame(X)["_1"].tolist() == [0.5, 1.0]
    numeric_names = FeatureSchema(features=(Feature(name="x", lower=0, upper=1, default=0),))
    with pytest.raises(SchemaMismatchError, match=r"columns \['0'\]"):
        numeric_names.validate_frame(pd.DataFrame({0: [0.5], "x": [0.2]}))


# ---- encode ---------------------------------------------------------------------------------
def test_encode_matches_an_independent_reference(schema: FeatureSchema) -> None:
    X = _frame(40, seed=3)
    onehot = OneHotEncoder(categories=[["f", "m", "x"], [1, 2, 3]], sparse_output=False)
    reference = np.column_stack(
        [
            X["age"] / 100.0,
            (X["temp"] - 35.0) / 7.0,
            onehot.fit_transform(X[["sex", "grade"]]),
        ]
    )

    Z = schema.encode(X[list(reversed(X.columns))])

    assert Z.dtype == np.float32
    assert Z.shape == (40, schema.n_encoded)
    np.testing.assert_allclose(Z, reference, rtol=1e-6, atol=1e-7)


def test_encode_stays_in_the_unit_interval_with_one_hot_rows(schema: FeatureSchema) -> None:
    X = _frame(30, seed=4).assign(age=np.linspace(-50, 150, 30))

    Z = schema.encode(X)

    assert Z.min() >= 0.0 and Z.max() <= 1.0
    np.testing.assert_array_equal(Z[:, 2:5].sum(axis=1), np.ones(30))
    np.testing.assert_array_equal(Z[:, 5:].sum(axis=1), np.ones(30))


def test_encode_passes_its_options_to_validation(schema: FeatureSchema) -> None:
    X = pd.DataFrame({"age": [25.0], "other": [1]})

    Z = schema.encode(X, missing="default", extra="ignore")

    defaults = schema.encode(pd.DataFrame([schema.defaults]))
    np.testing.assert_array_equal(Z[:, 1:], defaults[:, 1:])
    assert Z[0, 0] == pytest.approx(0.25)
    with pytest.raises(SchemaMismatchError):
        schema.encode(X)
    with pytest.raises(DataValidationError):
        schema.encode(_frame(1).assign(age=[101.0]), out_of_bounds="error")


def test_encode_of_zero_rows(schema: FeatureSchema) -> None:
    Z = schema.encode(_frame(0))

    assert Z.shape == (0, schema.n_encoded)
