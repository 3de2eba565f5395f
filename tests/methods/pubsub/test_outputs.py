"""Tests of pubsubml.methods.pubsub.outputs: running black boxes, aligning and scoring outputs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from methods.pubsub.conftest import Threshold, _frame
from pubsubml.errors import DataValidationError, LabelError, SchemaMismatchError
from pubsubml.methods import Customizer
from pubsubml.methods.pubsub.outputs import (
    align_outputs,
    candidate_ids,
    check_frame,
    extend_features,
    meta_features,
    meta_layout,
    model_classes,
    model_features,
    run_models,
)
from pubsubml.schema import FeatureSchema


class Box:
    """A black box that records the columns it was given and returns fixed outputs."""

    def __init__(self, features: list[Any], classes: Any = None,
                 out: np.ndarray | None = None) -> None:  # fmt: skip
        self.input_features = features
        self.classes = classes
        self.out = out
        self.seen: list[list[str]] = []

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        self.seen.append(list(X.columns))
        return self.out if self.out is not None else np.full((len(X), 2), 0.5)


class ValueBox(Box):
    """A black box with ``predict`` only (a regressor)."""

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        self.seen.append(list(X.columns))
        return np.zeros(len(X))


FRAME = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0], "c": [5.0, 6.0]})


def test_model_features_and_classes_come_from_what_the_model_declares() -> None:
    fitted = LogisticRegression().fit(FRAME[["a", "b"]], [0, 1])
    assert model_features(fitted) == ["a", "b"]  # feature_names_in_
    classes = model_classes(fitted)
    assert classes == [0, 1] and type(classes[0]) is int
    declared = Box(["b", 3], classes=np.array(["x", "y"]))
    declared.feature_names_in_ = np.array(["ignored"])  # type: ignore[attr-defined]
    assert model_features(declared) == ["b", "3"] and model_classes(declared) == ["x", "y"]
    assert model_classes(object()) is None
    with pytest.raises(SchemaMismatchError, match="input_features"):
        model_features(object())


def test_candidate_ids_take_given_names_then_model_ids_then_positions() -> None:
    named = Box(["a"])
    named.model_id = "pub-7"  # type: ignore[attr-defined]
    models = [named, Box(["a"])]
    assert candidate_ids(models, None, reserved="own") == ["pub-7", "m1"]
    assert candidate_ids(models, ["x", 2], reserved="own") == ["x", "2"]  # type: ignore[list-item]
    for given in (["x"], ["x", "x"], ["own", "y"]):
        with pytest.raises(ValueError):
            candidate_ids(models, given, reserved="own")
    with pytest.raises(ValueError, match="unique"):
        candidate_ids([Box(["a"]), named], ["m1", "m1"], reserved="own")


def test_run_models_gives_each_model_only_its_declared_features() -> None:
    wide, narrow, absent = Box(["c", "a", "z"]), Box(["b"]), Box(["b"])
    outs = run_models([wide, narrow, absent], FRAME, "predict_proba")
    assert len(outs) == 3 and all(o.shape == (2, 2) for o in outs)
    assert wide.seen == [["c", "a"]]  # "z" is left for the model to default
    assert narrow.seen == absent.seen == [["b"]]
    regressor = ValueBox(["a"])
    with pytest.raises(LabelError, match="model 1 has no predict"):
        run_models([regressor, narrow], FRAME, "predict")


def test_run_models_with_a_runner_checks_it_returns_one_output_per_model() -> None:
    calls: list[tuple[int, str]] = []

    def runner(models: Sequence[Any], frame: pd.DataFrame, method: str) -> list[Any]:
        calls.append((len(models), method))
        return [[0.5] * len(frame) for _ in models]

    outs = run_models([Box(["a"]), Box(["b"])], FRAME, "predict", runner)
    assert calls == [(2, "predict")] and all(isinstance(o, np.ndarray) for o in outs)
    with pytest.raises(DataValidationError, match="1 outputs for 2 models"):
        run_models([Box(["a"]), Box(["b"])], FRAME, "predict", lambda m, f, k: [np.zeros(2)])


def test_align_outputs_orders_columns_by_the_subscriber_labels() -> None:
    out = np.array([[0.1, 0.9], [0.6, 0.4]])
    model = Box(["a"], classes=["yes", "no"])
    aligned = align_outputs(out, model, np.array(["no", "maybe", "yes"]), 0)
    np.testing.assert_array_equal(aligned, [[0.9, 0.0, 0.1], [0.4, 0.0, 0.6]])
    assert aligned.dtype == np.float64


def test_outputs_already_in_the_subscriber_order_come_back_as_a_float64_copy() -> None:
    model = Box(["a"], classes=["no", "yes"])
    for out in (np.array([[0.1, 0.9], [0.6, 0.4]]), np.array([[0.25, 0.75]], np.float32)):
        aligned = align_outputs(out, model, np.array(["no", "yes"]), 0)
        np.testing.assert_array_equal(aligned, out)
        assert aligned.dtype == np.float64 and not np.shares_memory(aligned, out)
    with pytest.raises(DataValidationError, match="NaN or infinite"):
        align_outputs(np.array([[np.nan, 1.0]]), model, np.array(["no", "yes"]), 2)


def test_align_outputs_makes_one_column_of_regression_outputs() -> None:
    for out in (np.array([1.0, 2.0]), np.array([[1.0], [2.0]])):
        np.testing.assert_array_equal(align_outputs(out, Box(["a"]), None, 0), [[1.0], [2.0]])
    with pytest.raises(DataValidationError, match="one output per row"):
        align_outputs(np.zeros((2, 2)), Box(["a"]), None, 3)


@pytest.mark.parametrize(
    ("out", "classes", "error", "match"),
    [
        (np.full((2, 2), 0.5), None, LabelError, "declares no classes"),
        (np.full((2, 2), 0.5), ["no", "other"], LabelError, "outside the subscriber"),
        (np.full((2, 3), 0.3), ["no", "yes"], DataValidationError, "shape"),
        (np.array([[0.5, math.nan], [0.5, 0.5]]), ["no", "yes"], DataValidationError, "NaN"),
    ],
)
def test_align_outputs_refuses_what_cannot_be_aligned(
    out: np.ndarray, classes: list[str] | None, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        align_outputs(out, Box(["a"], classes=classes), np.array(["no", "yes"]), 0)


def test_feature_extension_uses_public_defaults() -> None:
    schema = FeatureSchema.numeric(["x0", "x1", "x2", "z"], default=0.25)
    seen: list[pd.DataFrame] = []

    class Spy(Threshold):
        input_features = ("z", "x0")

        def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
            seen.append(X)
            return super().predict_proba(X)

    X, y = _frame(100, 4)
    Customizer(models=[Spy(0.5)], own_model=None, schema=schema, random_state=0).fit(X, y)
    assert list(seen[0].columns) == ["z", "x0"]
    assert (seen[0]["z"] == 0.25).all()


def test_extend_features_fills_only_what_a_model_needs_from_the_schema() -> None:
    schema = FeatureSchema.numeric(["a", "b", "c", "z"], default=0.25)
    box = Box(["z", "a", "w"])
    extended = extend_features(FRAME, [box], schema)
    assert list(extended.columns) == ["a", "b", "c", "z"] and (extended["z"] == 0.25).all()
    assert extend_features(FRAME, [box], None) is FRAME


def test_meta_features_are_log_odds_for_the_stacked_fusion_and_probabilities_otherwise() -> None:
    outs = [np.array([[0.5, 0.5], [0.9, 0.1]]), np.array([[0.2, 0.8], [0.5, 0.5]])]
    raw = meta_features(outs, task="classification", stacked=False, scale=None)
    np.testing.assert_array_equal(raw, np.hstack(outs))
    pooled = meta_features(outs, task="classification", stacked=True, scale=None)
    np.testing.assert_allclose(pooled[:, 0], -pooled[:, 1])  # centred per model and class pair
    reg = meta_features([np.array([[3.0], [5.0]])], task="regression", stacked=True, scale=(1, 2))
    np.testing.assert_array_equal(reg, [[1.0], [2.0]])
    blocks, names = meta_layout([2, 2], ["own", "m0"], np.array([0, 1]))
    assert blocks == [slice(0, 2), slice(2, 4)] and names == ["own:0", "own:1", "m0:0", "m0:1"]


def test_check_frame_names_columns_as_strings_and_refuses_what_the_schema_lacks() -> None:
    frame = check_frame(pd.DataFrame({0: [1.0], "b": [2.0]}), None)
    assert list(frame.columns) == ["0", "b"]
    with pytest.raises(SchemaMismatchError, match="not in the public schema"):
        check_frame(FRAME, FeatureSchema.numeric(["a"]))
    with pytest.raises(SchemaMismatchError, match="DataFrame"):
        check_frame(FRAME.to_numpy(), None)
    with pytest.raises(DataValidationError, match="no rows"):
        check_frame(FRAME.iloc[:0], None)
