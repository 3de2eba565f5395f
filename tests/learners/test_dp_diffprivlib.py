"""The diffprivlib-backed DP classifiers: public bounds, declared classes, export, privacy."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import onnxruntime as ort
import pandas as pd
import pytest
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import LogisticRegression as DiffprivlibLogisticRegression
from diffprivlib.utils import PrivacyLeakWarning
from skl2onnx import to_onnx
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

from pubsubml.errors import InvalidPrivacyParameterError, LabelError
from pubsubml.learners.diffprivlib_models import resolve_public_bounds, to_sklearn_base
from pubsubml.learners.forest import DPRandomForestClassifier
from pubsubml.learners.logistic import DPLogisticRegression, fit_one_vs_rest
from pubsubml.learners.naive_bayes import DPGaussianNB
from pubsubml.privacy.events import DPEvent
from pubsubml.schema import Feature, FeatureSchema

SCHEMA = FeatureSchema(
    features=(
        Feature(name="x0", lower=-2, upper=2, default=0),
        Feature(name="x1", lower=-2, upper=2, default=0),
        Feature(name="site", kind="categorical", categories=("a", "b"), default="a"),
    )
)
DP_CLASSES = [DPLogisticRegression, DPGaussianNB, DPRandomForestClassifier]
SKLEARN_BASE = {
    DPLogisticRegression: LogisticRegression,
    DPGaussianNB: GaussianNB,
    DPRandomForestClassifier: RandomForestClassifier,
}


def _data(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Two Gaussian blobs per class on x0, x1 (three classes), clipped by the schema."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 3, n)
    centers = np.array([[-1.0, -1.0], [1.0, -1.0], [0.0, 1.0]])
    xy = centers[codes] + rng.normal(0, 0.3, (n, 2))
    X = pd.DataFrame({"x0": xy[:, 0], "x1": xy[:, 1], "site": rng.choice(["a", "b"], n)})
    return X, np.array(["red", "green", "blue"], dtype=object)[codes]


X, Y = _data()
CLASSES = ["red", "green", "blue"]


def _model(cls: type, **params: Any) -> Any:
    return cls(schema=SCHEMA, classes=CLASSES, random_state=0, noise_seed=0, **params)


@pytest.mark.filterwarnings("ignore:.*iprint:DeprecationWarning")
@pytest.mark.parametrize("cls", DP_CLASSES)
def test_events_are_replace_one(cls: type) -> None:
    """diffprivlib calibrates for datasets that differ in one record's value."""
    events = _model(cls, epsilon=1.0).fit(X, Y).privacy_events_
    assert events and {e.neighbouring for e in events} == {"replace_one"}


# ---- public bounds ---------------------------------------------------------------------------
def test_logistic_regression_data_norm_comes_from_the_schema() -> None:
    clf = _model(DPLogisticRegression).fit(X, Y)

    # Two numeric features in [0, 1] and one one-hot block: ‖z‖² ≤ 3 = len(SCHEMA), not 4.
    assert clf.data_norm_ == math.sqrt(len(SCHEMA)) < math.sqrt(SCHEMA.n_encoded)
    assert clf.estimator_.data_norm == 1.0


@pytest.mark.filterwarnings("ignore:.*iprint:DeprecationWarning")
def test_logistic_regression_trains_on_unit_norm_rows_and_folds_the_scale() -> None:
    clf = _model(DPLogisticRegression).fit(X, Y)
    Z = SCHEMA.encode(X).astype(np.float64)
    # The intercept is a constant public feature inside the regulariser (Chaudhuri et al.'s
    # proof needs every weight regularised): rows [z, 1] / sqrt(bound² + 1), no free intercept.
    norm = math.hypot(math.sqrt(len(SCHEMA)), 1.0)
    rows = np.hstack([Z, np.ones((len(Z), 1))]) / norm
    codes = np.asarray([CLASSES.index(v) for v in Y])

    reference = fit_one_vs_rest(
        DiffprivlibLogisticRegression(
            epsilon=1.0,
            data_norm=1.0,
            fit_intercept=False,
            random_state=0,
            noise_seed=0,
            accountant=BudgetAccountant(),
        ),
        rows,
        codes,
        3,
    )

    assert np.all(np.linalg.norm(rows, axis=1) <= 1.0 + 1e-12)
    np.testing.assert_allclose(clf.estimator_.coef_ * norm, reference.coef_[:, :-1], rtol=1e-12)
    np.testing.assert_allclose(clf.estimator_.intercept_ * norm, reference.coef_[:, -1], rtol=1e-12)
    np.testing.assert_allclose(clf.predict_proba(X), reference.predict_proba(rows), atol=1e-12)
    assert clf.estimator_.n_features_in_ == Z.shape[1]
    # Without an intercept the rows are only divided by the public bound.
    plain = _model(DPLogisticRegression, fit_intercept=False).fit(X, Y)
    assert np.all(plain.estimator_.intercept_ == 0.0)


def _one_hot_heavy(n: int, seed: int) -> tuple[FeatureSchema, pd.DataFrame, np.ndarray]:
    """One informative binary category (70/30) and four 25-way distractors: 102 encoded columns."""
    rng = np.random.default_rng(seed)
    levels = tuple(f"c{k}" for k in range(25))
    schema = FeatureSchema(
        features=(
            Feature(name="key", kind="categorical", categories=("a", "b"), default="a"),
            *(
                Feature(name=f"f{j}", kind="categorical", categories=levels, default="c0")
                for j in range(4)
            ),
        )
    )
    frame = pd.DataFrame({"key": rng.choice(["a", "b"], n, p=[0.7, 0.3])})
    for j in range(4):
        frame[f"f{j}"] = rng.choice(levels, n)
    y = (frame["key"] == "a").to_numpy().astype(int)
    y = np.where(rng.random(n) < 0.1, 1 - y, y)  # 10% label noise
    return schema, frame, y


@pytest.mark.filterwarnings("ignore:.*iprint:DeprecationWarning")
def test_logistic_regression_beats_the_majority_on_a_one_hot_heavy_schema() -> None:
    schema, frame, y = _one_hot_heavy(5000, seed=0)
    _, test_frame, y_test = _one_hot_heavy(3000, seed=1)
    majority = max(y_test.mean(), 1 - y_test.mean())
    Z, Z_test = schema.encode(frame).astype(np.float64), schema.encode(test_frame)

    scaled = [
        DPLogisticRegression(
            schema=schema, classes=[0, 1], epsilon=1.0, random_state=s, noise_seed=s
        )
        .fit(frame, y)
        .score(test_frame, y_test)
        for s in range(3)
    ]
    # The former default: unscaled rows with data_norm = sqrt(n_encoded).
    former = [
        float(
            np.mean(
                fit_one_vs_rest(
                    DiffprivlibLogisticRegression(
                        epsilon=1.0,
                        data_norm=math.sqrt(schema.n_encoded),
                        random_state=s,
                        noise_seed=s,
                        accountant=BudgetAccountant(),
                    ),
                    Z,
                    y,
                    2,
                ).predict(Z_test)
                == y_test
            )
        )
        for s in range(3)
    ]

    assert schema.n_encoded == 102 and len(schema) == 5
    assert np.mean(former) < majority
    assert min(scaled) > majority + 0.03


@pytest.mark.parametrize("cls", [DPGaussianNB, DPRandomForestClassifier])
def test_bounds_come_from_the_schema(cls: type) -> None:
    clf = _model(cls).fit(X, Y)

    lower, upper = clf.estimator_.bounds
    np.testing.assert_array_equal(lower, np.zeros(SCHEMA.n_encoded))
    np.testing.assert_array_equal(upper, np.ones(SCHEMA.n_encoded))


@pytest.mark.parametrize("cls", DP_CLASSES)
def test_without_schema_public_bounds_are_required(cls: type) -> None:
    clf = cls(classes=CLASSES, random_state=0, noise_seed=0)
    Z = SCHEMA.encode(X)

    with pytest.raises(InvalidPrivacyParameterError, match="public"):
        clf.fit(Z, Y)
    assert not hasattr(clf, "estimator_") and not hasattr(clf, "n_features_in_")


@pytest.mark.parametrize(
    ("cls", "param", "value"),
    [
        (DPLogisticRegression, "data_norm", 2.0),
        (DPGaussianNB, "bounds", (0.0, 1.0)),
        (DPRandomForestClassifier, "bounds", ([0.0] * 4, [1.0] * 4)),
    ],
)
def test_without_schema_explicit_public_bounds_are_used(cls: type, param: str, value: Any) -> None:
    clf = cls(classes=CLASSES, random_state=0, noise_seed=0, **{param: value})

    clf.fit(SCHEMA.encode(X), Y)

    assert clf.schema_ is None and clf.n_features_in_ == SCHEMA.n_encoded
    assert clf.predict_proba(SCHEMA.encode(X)).shape == (len(X), 3)


@pytest.mark.parametrize(
    "bounds", [(1.0, 0.0), (0.0, np.nan), ([0.0, 0.0], [1.0, 1.0]), (0.0,), "0,1"]
)
def test_malformed_bounds_raise(bounds: Any) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        resolve_public_bounds(bounds, None, 4)


@pytest.mark.parametrize("data_norm", [0.0, -1.0, math.inf, math.nan, True])
def test_malformed_data_norm_raises(data_norm: Any) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        DPLogisticRegression(classes=CLASSES, data_norm=data_norm).fit(SCHEMA.encode(X), Y)


@pytest.mark.parametrize("cls", DP_CLASSES)
def test_no_privacy_leak_warning(cls: type) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _model(cls).fit(X, Y).predict_proba(X)

    assert not [w for w in caught if issubclass(w.category, PrivacyLeakWarning)]


# ---- declared classes ------------------------------------------------------------------------
@pytest.mark.parametrize("cls", DP_CLASSES)
def test_classes_must_be_declared(cls: type) -> None:
    with pytest.raises(LabelError, match="classes="):
        cls(schema=SCHEMA).fit(X, Y)


@pytest.mark.parametrize("cls", DP_CLASSES)
def test_declared_class_order_is_kept(cls: type) -> None:
    clf = _model(cls, epsilon=20.0).fit(X, Y)

    proba = clf.predict_proba(X)

    assert clf.classes_.tolist() == CLASSES == clf.estimator_.classes_.tolist()
    np.testing.assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(X))


@pytest.mark.parametrize("cls", [DPLogisticRegression, DPRandomForestClassifier])
def test_absent_declared_class_keeps_its_column(cls: type) -> None:
    classes = [*CLASSES, "purple"]

    clf = cls(schema=SCHEMA, classes=classes, random_state=0, noise_seed=0).fit(X, Y)

    assert clf.predict_proba(X).shape == (len(X), 4)
    if cls is DPLogisticRegression:
        assert clf.estimator_.coef_.shape == (4, SCHEMA.n_encoded)


def test_naive_bayes_refuses_an_absent_declared_class() -> None:
    clf = DPGaussianNB(schema=SCHEMA, classes=[*CLASSES, "purple"], random_state=0, noise_seed=0)

    with pytest.raises(LabelError, match="purple"):
        clf.fit(X, Y)
    assert not hasattr(clf, "estimator_")


@pytest.mark.filterwarnings("ignore:.*iprint:DeprecationWarning")
@pytest.mark.parametrize("n_classes", [2, 3])
def test_one_vs_rest_matches_diffprivlib_fit(n_classes: int) -> None:
    # Reference: diffprivlib's own fit, valid when every class occurs in y.
    Z = SCHEMA.encode(X).astype(np.float64)
    codes = np.unique(Y, return_inverse=True)[1] % n_classes
    params: dict[str, Any] = {"epsilon": 2.0, "data_norm": 2.0, "random_state": 7, "noise_seed": 7}

    reference = DiffprivlibLogisticRegression(accountant=BudgetAccountant(), **params)
    reference.fit(Z, codes)
    ours = fit_one_vs_rest(
        DiffprivlibLogisticRegression(accountant=BudgetAccountant(), **params), Z, codes, n_classes
    )

    np.testing.assert_array_equal(ours.coef_, reference.coef_)
    np.testing.assert_array_equal(ours.intercept_, reference.intercept_)
    np.testing.assert_array_equal(ours.predict_proba(Z), reference.predict_proba(Z))


# ---- privacy ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", DP_CLASSES)
def test_privacy_attributes_record_the_guarantee(cls: type) -> None:
    clf = _model(cls, epsilon=0.5).fit(X, Y)

    assert clf.epsilon_ == 0.5 and clf.delta_ == 0.0
    assert clf.privacy_events_ == [
        DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0, neighbouring="replace_one")
    ]
    # the events are what diffprivlib's accountant for this fit recorded, not the parameter:
    # add/remove-calibrated mechanisms run at ε/2 for a replace-one ε
    assert clf.estimator_.accountant.spent_budget == [(0.5 / cls._replace_one_factor, 0)]


@pytest.mark.parametrize(
    ("cls", "factor"),
    [(DPLogisticRegression, 1.0), (DPGaussianNB, 2.0), (DPRandomForestClassifier, 2.0)],
)
def test_class_count_mechanisms_run_at_half_epsilon_for_a_replace_one_claim(
    cls: type, factor: float
) -> None:
    # naive Bayes's class-count histogram and the forest's monotonic permute-and-flip leaves are
    # ε-DP for add/remove; replacing a label moves two counts, so replace-one needs ε/2
    clf = _model(cls, epsilon=1.0).fit(X, Y)

    assert clf.estimator_.epsilon == pytest.approx(1.0 / factor)
    assert clf.epsilon_ == pytest.approx(1.0)


@pytest.mark.parametrize("cls", DP_CLASSES)
def test_a_fit_that_spends_more_than_asked_is_refused(
    cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = cls._train

    def overspending(self: Any, Z: Any, codes: Any, n_classes: int, epsilon: float) -> Any:
        model = real(self, Z, codes, n_classes, epsilon)
        model.accountant.spend(0.1, 0)  # a mechanism that ran beyond the request
        return model

    monkeypatch.setattr(cls, "_train", overspending)
    clf = _model(cls, epsilon=0.5)
    with pytest.raises(InvalidPrivacyParameterError, match="did not run"):
        clf.fit(X, Y)
    assert not hasattr(clf, "epsilon_")


@pytest.mark.parametrize("epsilon", [0, -0.1, math.inf, math.nan, "1", True, None])
@pytest.mark.parametrize("cls", DP_CLASSES)
def test_invalid_epsilon_raises_before_touching_data(cls: type, epsilon: Any) -> None:
    clf = _model(cls, epsilon=epsilon)

    with pytest.raises(InvalidPrivacyParameterError):
        clf.fit(X, Y)
    assert not hasattr(clf, "n_features_in_")


@pytest.mark.parametrize("cls", DP_CLASSES)
def test_default_diffprivlib_accountant_is_not_charged(cls: type) -> None:
    default = BudgetAccountant.load_default(None)
    spent_before = default.spent_budget

    _model(cls).fit(X, Y)

    assert default.spent_budget == spent_before


def test_noise_shrinks_as_epsilon_grows() -> None:
    # The model is a random variable of the data; its spread across noise seeds must fall
    # with ε (objective perturbation: noise norm ∝ 1/ε).
    def spread(epsilon: float) -> float:
        coefs = [
            DPLogisticRegression(
                schema=SCHEMA, classes=CLASSES, epsilon=epsilon, random_state=s, noise_seed=s
            )
            .fit(X, Y)
            .estimator_.coef_
            for s in range(6)
        ]
        return float(np.std(np.stack(coefs), axis=0).mean())

    assert spread(0.2) > 3 * spread(20.0)


@pytest.mark.parametrize("cls", DP_CLASSES)
def test_large_epsilon_learns_the_blobs(cls: type) -> None:
    X_test, y_test = _data(seed=1)

    clf = _model(cls, epsilon=50.0).fit(X, Y)

    assert clf.score(X_test, y_test) > 0.7


# ---- export to scikit-learn and ONNX ---------------------------------------------------------
@pytest.mark.parametrize("cls", DP_CLASSES)
def test_to_sklearn_base_predicts_identically(cls: type) -> None:
    clf = _model(cls).fit(X, Y)
    Z = SCHEMA.encode(X)

    base = to_sklearn_base(clf.estimator_)

    assert type(base) is SKLEARN_BASE[cls]
    assert not hasattr(base, "accountant") and not hasattr(base, "bounds")
    np.testing.assert_array_equal(base.predict_proba(Z), clf.predict_proba(X))
    np.testing.assert_array_equal(base.predict(Z), clf.predict(X))
    if cls is DPRandomForestClassifier:
        assert all(type(tree) is DecisionTreeClassifier for tree in base.estimators_)


def test_to_sklearn_base_copy_is_independent() -> None:
    clf = _model(DPLogisticRegression).fit(X, Y)
    before = clf.estimator_.coef_.copy()

    to_sklearn_base(clf.estimator_).coef_[:] = 0.0

    np.testing.assert_array_equal(clf.estimator_.coef_, before)


def test_to_sklearn_base_returns_other_estimators_unchanged() -> None:
    plain = LogisticRegression()

    assert to_sklearn_base(plain) is plain


@pytest.mark.parametrize("cls", DP_CLASSES)
def test_exported_onnx_matches_the_model(cls: type) -> None:
    clf = _model(cls).fit(X, Y)
    Z = SCHEMA.encode(X)
    base = to_sklearn_base(clf.estimator_)

    onx = to_onnx(base, Z[:1], options={id(base): {"zipmap": False}})
    session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    labels, proba = session.run(None, {session.get_inputs()[0].name: Z})

    np.testing.assert_allclose(proba, clf.predict_proba(X), atol=1e-5)
    np.testing.assert_array_equal(labels, clf.predict(X))
