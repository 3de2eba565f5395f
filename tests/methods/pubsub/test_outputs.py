"""Tests of pubsubml.methods.pubsub.outputs: running black boxes, aligning and scoring outputs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, is_classifier, is_regressor
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import r2_score

from pubsubml.errors import DataValidationError, LabelError, SchemaMismatchError
from pubsubml.methods.pubsub.outputs import (
    SELECTION_METRICS,
    OwnModel,
    TaskEstimatorMixin,
    align_outputs,
    candidate_ids,
    encode_targets,
    model_classes,
    model_features,
    public_encoder,
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


def test_own_model_reads_only_its_features() -> None:
    est = LogisticRegression().fit(FRAME[["c", "a"]], ["no", "yes"])
    own = OwnModel(est, ["c", "a"])
    np.testing.assert_array_equal(own.predict_proba(FRAME), est.predict_proba(FRAME[["c", "a"]]))
    np.testing.assert_array_equal(own.predict(FRAME), ["no", "yes"])
    assert model_features(own) == ["c", "a"] and model_classes(own) == ["no", "yes"]


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


def test_encode_targets_indexes_labels_in_the_given_order() -> None:
    y = np.array(["b", "a", "c", "a"])
    labels, codes = encode_targets(y, "classification", None)
    assert labels is not None and labels.tolist() == ["a", "b", "c"]
    assert codes.tolist() == [1, 0, 2, 0] and codes.dtype == np.int64
    public, codes2 = encode_targets(y, "classification", ["c", "b", "a", "d"])
    assert public is not None and public.tolist() == ["c", "b", "a", "d"]
    assert codes2.tolist() == [1, 2, 0, 2]
    none, values = encode_targets(np.array([1, 2]), "regression", ["ignored"])
    assert none is None and values.dtype == np.float64 and values.tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    ("y", "task", "classes", "error"),
    [
        (np.array(["a", None], dtype=object), "classification", None, LabelError),
        (np.array([1, 1, 1]), "classification", None, LabelError),
        (np.array([1, 2]), "classification", [1, 1, 2], LabelError),
        (np.array([1, 3]), "classification", [1, 2], LabelError),
        (np.array(["x", "1.0"]), "regression", None, DataValidationError),
        (np.array([1.0, math.inf]), "regression", None, DataValidationError),
    ],
)
def test_encode_targets_refuses_bad_labels(
    y: np.ndarray, task: str, classes: list[Any] | None, error: type[Exception]
) -> None:
    with pytest.raises(error):
        encode_targets(y, task, classes)


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


def test_r2_selection_on_a_constant_target_matches_scikit_learn() -> None:
    t = np.full(5, 2.0)
    outs = np.stack([np.full((5, 1), 2.0), np.full((5, 1), 3.0)])
    expected = [r2_score(t, o[:, 0]) for o in outs]
    np.testing.assert_allclose(SELECTION_METRICS["r2"].score(t, outs), expected)
    assert expected == [1.0, 0.0]


def test_f1_minority_is_zero_when_the_minority_is_never_predicted() -> None:
    y = np.array([0, 0, 0, 1])
    never = np.tile([[0.9, 0.1]], (4, 1))[None]
    always = np.tile([[0.1, 0.9]], (4, 1))[None]
    scores = SELECTION_METRICS["f1_minority"].score(y, np.concatenate([never, always]))
    np.testing.assert_allclose(scores, [0.0, 2 * 1 / (4 + 1)])
    assert {name for name, m in SELECTION_METRICS.items() if "regression" in m.tasks} == {
        "mse",
        "r2",
    }


def test_public_encoder_scales_by_the_public_bounds() -> None:
    schema = FeatureSchema.numeric(["a", "b", "c"], lower=0.0, upper=10.0)
    encode = public_encoder(schema, ["c", "a"])
    np.testing.assert_allclose(encode(FRAME), [[0.5, 0.1], [0.6, 0.2]])
    plain = public_encoder(None, ["c", "a"])
    np.testing.assert_array_equal(plain(FRAME), [[5.0, 1.0], [6.0, 2.0]])
    with pytest.raises(DataValidationError, match="numeric"):
        plain(FRAME.assign(a=["x", "y"]))


class _Task(TaskEstimatorMixin, BaseEstimator):
    def __init__(self, task: str = "classification") -> None:
        self.task = task

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return X["a"].to_numpy()


def test_task_mixin_makes_a_classifier_or_a_regressor() -> None:
    assert is_classifier(_Task()) and not is_regressor(_Task())
    assert is_regressor(_Task("regression")) and not is_classifier(_Task("regression"))
    X = pd.DataFrame({"a": [1, 0, 1, 1]})
    assert _Task().score(X, [1, 0, 0, 1]) == 0.75
    assert _Task().score(X, [1, 0, 0, 1], sample_weight=[1, 1, 2, 0]) == 0.5
    assert _Task("regression").score(X, [1, 0, 1, 1]) == 1.0
