"""DPSGDLogisticRegression / DPSGDLinearRegression: the DP-SGD engine with no hidden layer."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import dp_accounting
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import cross_val_score

from pubsubml.errors import InvalidPrivacyParameterError, LabelError
from pubsubml.learners import (
    DPSGDDefaults,
    DPSGDLinearRegression,
    DPSGDLogisticRegression,
    create_learner,
    dp_sgd_defaults,
    fit_many,
    get_learner_spec,
)
from pubsubml.schema import Feature, FeatureSchema

SCHEMA = FeatureSchema(
    features=(
        *(Feature(name=f"x{i}", lower=-1, upper=1, default=0) for i in range(3)),
        Feature(name="site", kind="categorical", categories=("a", "b", "c"), default="a"),
    )
)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny models: one intra-op thread avoids OpenMP overhead on the shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(-1, 1, (n, 3)), columns=["x0", "x1", "x2"])
    frame["site"] = rng.choice(["a", "b", "c"], n)
    return frame


def _labels(frame: pd.DataFrame, n_classes: int) -> np.ndarray:
    score = frame["x0"] - frame["x1"] + 0.5 * (frame["site"] == "b")
    if n_classes == 2:
        return np.where(score > 0, "yes", "no")
    return np.asarray(["low", "mid", "high"], dtype=object)[
        np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    ]


TRAIN, TEST = _frame(1200, 0), _frame(2000, 1)


# ---- learning --------------------------------------------------------------------------------
@pytest.mark.parametrize(("n_classes", "floor"), [(2, 0.85), (3, 0.7)])
def test_logistic_regression_learns_at_epsilon_one_with_defaults(
    n_classes: int, floor: float
) -> None:
    classes = ["no", "yes"] if n_classes == 2 else ["low", "mid", "high"]
    clf = DPSGDLogisticRegression(schema=SCHEMA, classes=classes, random_state=0, noise_seed=0)

    clf.fit(TRAIN, _labels(TRAIN, n_classes))

    assert clf.score(TEST, _labels(TEST, n_classes)) > floor
    assert clf.epsilon_ <= 1.0 and clf.epsilon_ > 0.99 and clf.delta_ == 1e-5
    assert clf.predict_proba(TEST).shape == (len(TEST), n_classes)
    assert list(clf.classes_) == classes


def test_logistic_regression_is_the_engine_without_hidden_layers() -> None:
    clf = DPSGDLogisticRegression(
        schema=SCHEMA, classes=["no", "yes"], random_state=0, noise_seed=0
    )

    clf.fit(TRAIN, _labels(TRAIN, 2))

    assert [type(m) for m in clf.module_] == [torch.nn.Linear]
    assert clf.module_[0].weight.shape == (2, SCHEMA.n_encoded)
    logits = clf.module_(torch.from_numpy(SCHEMA.encode(TEST)))
    np.testing.assert_allclose(
        clf.predict_proba(TEST), torch.softmax(logits, 1).detach().numpy(), rtol=1e-6
    )


def test_linear_regression_learns_and_folds_the_public_target_bounds() -> None:
    y = 10 + 5 * (TRAIN["x0"] - TRAIN["x2"]).to_numpy()
    y_test = 10 + 5 * (TEST["x0"] - TEST["x2"]).to_numpy()
    reg = DPSGDLinearRegression(
        schema=SCHEMA, target_bounds=(0.0, 20.0), random_state=0, noise_seed=0
    )

    reg.fit(TRAIN, y)

    assert reg.score(TEST, y_test) > 0.8
    raw = reg.module_(torch.from_numpy(SCHEMA.encode(TEST[:5]))).detach().numpy()
    np.testing.assert_allclose(raw[:, 0], reg.predict(TEST[:5]), rtol=1e-6)
    assert (
        reg.hyperparameters_.learning_rate
        == dp_sgd_defaults(1200, 1.0, 1e-5, SCHEMA.n_encoded, task="regression").learning_rate
    )


# ---- "auto" hyperparameters and accounting ---------------------------------------------------
def test_auto_resolves_to_full_batch_adam_for_100_steps() -> None:
    clf = DPSGDLogisticRegression(
        schema=SCHEMA, classes=["no", "yes"], random_state=0, noise_seed=0
    )

    clf.fit(TRAIN, _labels(TRAIN, 2))

    expected = dp_sgd_defaults(1200, 1.0, 1e-5, SCHEMA.n_encoded)
    assert clf.hyperparameters_ == expected
    assert (clf.sample_rate_, clf.steps_) == (1.0, 100)
    assert expected.batch_size == 1200 and expected.optimizer == "adam"
    assert clf.get_params()["learning_rate"] == "auto"  # the parameter itself is untouched


def test_explicit_hyperparameters_win_over_auto() -> None:
    clf = DPSGDLogisticRegression(
        schema=SCHEMA,
        classes=["no", "yes"],
        epochs=3,
        batch_size=300,
        learning_rate=0.05,
        optimizer="sgd",
        max_grad_norm=0.5,
        random_state=0,
        noise_seed=0,
    )

    clf.fit(TRAIN, _labels(TRAIN, 2))

    assert clf.hyperparameters_ == DPSGDDefaults(
        batch_size=300, epochs=3, steps=12, learning_rate=0.05, optimizer="sgd", max_grad_norm=0.5
    )
    assert (clf.sample_rate_, clf.steps_) == (0.25, 12)


def test_resolved_hyperparameters_do_not_depend_on_the_private_rows() -> None:
    other = _frame(1200, 5)
    flipped = np.where(_labels(other, 2) == "yes", "no", "yes")
    params: dict[str, Any] = {
        "schema": SCHEMA,
        "classes": ["no", "yes"],
        "random_state": 0,
        "noise_seed": 0,
    }

    a = DPSGDLogisticRegression(**params).fit(TRAIN, _labels(TRAIN, 2))
    b = DPSGDLogisticRegression(**params).fit(other, flipped)

    assert a.hyperparameters_ == b.hyperparameters_
    assert a.noise_multiplier_ == b.noise_multiplier_ and a.privacy_events_ == b.privacy_events_
    assert not np.array_equal(a.predict_proba(TEST), b.predict_proba(TEST))


def test_reported_epsilon_is_dp_accounting_for_the_full_batch_run() -> None:
    clf = DPSGDLogisticRegression(
        schema=SCHEMA,
        classes=["no", "yes"],
        epsilon=None,
        noise_multiplier=30.0,
        random_state=0,
        noise_seed=0,
    )

    clf.fit(TRAIN[:400], _labels(TRAIN[:400], 2))

    reference = dp_accounting.pld.PLDAccountant()
    reference.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(1.0, dp_accounting.GaussianDpEvent(30.0)), 100
        )
    )
    assert clf.epsilon_ == pytest.approx(reference.get_epsilon(1e-5), rel=1e-3)
    assert clf.planned_privacy_events(400, 99) == clf.privacy_events_


def test_planned_events_match_what_fit_records() -> None:
    clf = DPSGDLogisticRegression(
        schema=SCHEMA, classes=["no", "yes"], random_state=0, noise_seed=0
    )

    planned = clf.planned_privacy_events(1200, SCHEMA.n_encoded)
    clf.fit(TRAIN, _labels(TRAIN, 2))

    assert planned == clf.privacy_events_


# ---- many sites, scikit-learn, registry ------------------------------------------------------
def test_fit_many_trains_each_site_as_its_own_fit() -> None:
    Xs = [TRAIN[:300], TRAIN[300:800], TRAIN[800:]]
    ys = [_labels(X, 2) for X in Xs]
    est = DPSGDLogisticRegression(
        schema=SCHEMA, classes=["no", "yes"], random_state=3, noise_seed=3
    )

    models = fit_many(est, Xs, ys)

    alone = clone(est).fit(Xs[0], ys[0])
    np.testing.assert_allclose(models[0].predict_proba(TEST), alone.predict_proba(TEST), atol=1e-5)
    assert [m.hyperparameters_.batch_size for m in models] == [300, 500, 400]
    assert all(m.steps_ == 100 for m in models)


def test_cross_val_score_and_clone() -> None:
    clf = DPSGDLogisticRegression(
        schema=SCHEMA, classes=["no", "yes"], random_state=0, noise_seed=0
    )

    scores = cross_val_score(clf, TRAIN, _labels(TRAIN, 2), cv=3)

    assert scores.shape == (3,) and np.all(scores > 0.75)
    assert clone(clf).get_params() == clf.get_params()


def test_registered_with_the_common_parameters() -> None:
    clf = create_learner(
        "dp_sgd_logistic",
        schema=SCHEMA,
        classes=[0, 1],
        epsilon=0.5,
        delta=1e-6,
        random_state=1,
        noise_seed=1,
    )
    reg = create_learner(
        "dp_sgd_linear", schema=SCHEMA, epsilon=2.0, delta=1e-6, random_state=1, noise_seed=1
    )

    assert isinstance(clf, DPSGDLogisticRegression) and isinstance(reg, DPSGDLinearRegression)
    assert (clf.epsilon, clf.delta, clf.classes) == (0.5, 1e-6, [0, 1])
    assert get_learner_spec("dp_sgd_logistic").private
    assert get_learner_spec("dp_sgd_linear").task == "regression"


# ---- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"epsilon": 0.0}, InvalidPrivacyParameterError, "epsilon"),
        ({"delta": 1 / 100}, InvalidPrivacyParameterError, "1/n"),
        ({"noise_multiplier": 1.0}, InvalidPrivacyParameterError, "both"),
        ({"epsilon": None}, InvalidPrivacyParameterError, "neither"),
        ({"max_grad_norm": 0.0}, InvalidPrivacyParameterError, "max_grad_norm"),
        ({"learning_rate": "fast"}, ValueError, "learning_rate"),
        ({"epochs": 0}, ValueError, "epochs"),
        ({"optimizer": "lbfgs"}, ValueError, "optimizer"),
        ({"accountant": "moments"}, InvalidPrivacyParameterError, "accountant"),
        ({"classes": None}, LabelError, "public label set"),
    ],
)
def test_bad_parameters_raise_and_change_nothing(
    params: dict[str, Any], error: type[Exception], match: str
) -> None:
    clf = DPSGDLogisticRegression(**{"schema": SCHEMA, "classes": ["no", "yes"], **params})

    with pytest.raises(error, match=match):
        clf.fit(TRAIN[:100], _labels(TRAIN[:100], 2))
    assert not hasattr(clf, "module_") and not hasattr(clf, "hyperparameters_")


def test_malformed_target_bounds_raise() -> None:
    with pytest.raises(ValueError, match="target_bounds"):
        DPSGDLinearRegression(target_bounds=(1.0, 0.0)).fit(np.eye(3), [0.0, 1.0, 2.0])


def test_epsilon_is_finite_and_sample_rate_public() -> None:
    reg = DPSGDLinearRegression(schema=SCHEMA, epsilon=0.5, random_state=0, noise_seed=0)

    reg.fit(TRAIN[:200], TRAIN["x0"][:200])

    assert math.isfinite(reg.epsilon_) and reg.epsilon_ <= 0.5
    assert reg.sample_rate_ == 1.0 and reg.noise_multiplier_ > 0
