"""DPMLPClassifier / DPMLPRegressor: learning, accounting, scikit-learn integration, bad input."""

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
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError, LabelError
from pubsubml.learners.mlp import DPMLPClassifier, DPMLPRegressor, fit_many
from pubsubml.schema import Feature, FeatureSchema

FAST: dict[str, Any] = {
    "hidden_layer_sizes": (16,),
    "epochs": 5,
    "batch_size": 40,
    "accountant": "rdp",  # fast; the PLD accountant has its own test below
    "random_state": 0,
    "noise_seed": 0,
}


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny networks: one intra-op thread avoids OpenMP overhead on the shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _separable(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two classes split by a hyperplane with a margin, features in [0, 1]."""
    rng = np.random.default_rng(seed)
    X = rng.random((4 * n, 4))
    score = X @ np.array([1.0, -1.0, 0.5, -0.5])
    keep = np.abs(score) > 0.15
    X, score = X[keep][:n], score[keep][:n]
    return X, np.where(score > 0, "yes", "no")


X_TRAIN, Y_TRAIN = _separable(800)
X_TEST, Y_TEST = _separable(400, seed=1)


# ---- learning ---------------------------------------------------------------------------------
def test_non_private_network_learns_a_separable_problem() -> None:
    clf = DPMLPClassifier(
        dp=False,
        hidden_layer_sizes=(32,),
        epochs=30,
        batch_size=32,
        learning_rate=1e-2,
        random_state=0,
        noise_seed=0,
    )

    clf.fit(X_TRAIN, Y_TRAIN)

    assert clf.score(X_TEST, Y_TEST) > 0.95
    assert clf.epsilon_ == math.inf and clf.delta_ == 0.0 and clf.privacy_events_ == []
    assert clf.noise_multiplier_ == 0.0 and clf.steps_ == 30 * math.ceil(800 / 32)


def test_private_network_at_moderate_epsilon_beats_chance() -> None:
    clf = DPMLPClassifier(
        classes=["no", "yes"],
        hidden_layer_sizes=(32,),
        epochs=10,
        batch_size=80,
        learning_rate=1e-2,
        epsilon=4.0,
        delta=1e-4,
        random_state=0,
        noise_seed=0,
    )

    clf.fit(X_TRAIN, Y_TRAIN)

    assert clf.score(X_TEST, Y_TEST) > 0.75
    assert clf.epsilon_ <= 4.0 and clf.epsilon_ > 0.99 * 4.0
    assert (clf.sample_rate_, clf.steps_) == (0.1, 100)


def test_regressor_learns_and_folds_public_target_bounds_into_the_last_layer() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((600, 3))
    y = 100 + 50 * (X[:, 0] - X[:, 1])
    reg = DPMLPRegressor(
        dp=False,
        hidden_layer_sizes=(32,),
        epochs=40,
        batch_size=32,
        learning_rate=1e-2,
        target_bounds=(50.0, 150.0),
        random_state=0,
        noise_seed=0,
    )

    reg.fit(X, y)

    assert reg.score(X, y) > 0.9
    raw = reg.module_(torch.from_numpy(X[:5].astype(np.float32))).detach().numpy()
    assert raw.shape == (5, 1)
    np.testing.assert_allclose(raw[:, 0], reg.predict(X[:5]), rtol=1e-6)


def test_module_is_a_sequential_of_linear_and_activation_layers() -> None:
    clf = DPMLPClassifier(
        classes=["no", "yes"],
        noise_multiplier=1.0,
        **{**FAST, "hidden_layer_sizes": (10, 6)},
        activation="relu",
    )

    clf.fit(X_TRAIN[:200], Y_TRAIN[:200])

    kinds = [type(m) for m in clf.module_]
    assert kinds == [
        torch.nn.Linear,
        torch.nn.ReLU,
        torch.nn.Linear,
        torch.nn.ReLU,
        torch.nn.Linear,
    ]
    logits = clf.module_(torch.zeros(3, 4))
    assert logits.shape == (3, 2)
    np.testing.assert_allclose(
        clf.predict_proba(np.zeros((3, 4))), torch.softmax(logits, 1).detach().numpy(), rtol=1e-6
    )


# ---- accounting -------------------------------------------------------------------------------
@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_reported_epsilon_equals_dp_accounting_for_the_steps_that_ran(accountant: str) -> None:
    X, y = X_TRAIN[:120], Y_TRAIN[:120]
    clf = DPMLPClassifier(
        classes=["no", "yes"],
        noise_multiplier=2.0,
        **{**FAST, "epochs": 2, "batch_size": 30, "accountant": accountant},
    )

    clf.fit(X, y)

    q, steps = 30 / 120, 2 * 4
    assert (clf.sample_rate_, clf.steps_, clf.noise_multiplier_) == (q, steps, 2.0)
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(2.0)), steps
    )
    reference = (
        dp_accounting.pld.PLDAccountant()
        if accountant == "pld"
        else dp_accounting.rdp.RdpAccountant()
    )
    reference.compose(event)
    assert clf.epsilon_ == pytest.approx(reference.get_epsilon(1e-5), rel=1e-6)
    assert clf.delta_ == 1e-5 and clf.accountant_ == accountant
    assert [(e.noise_multiplier, e.sample_rate, e.count) for e in clf.privacy_events_] == [
        (2.0, q, steps)
    ]


# ---- many sites at once -----------------------------------------------------------------------
def test_fit_many_trains_each_site_as_its_own_fit() -> None:
    sizes = [150, 200, 90]
    Xs = [X_TRAIN[i * 200 : i * 200 + n] for i, n in enumerate(sizes)]
    ys = [Y_TRAIN[i * 200 : i * 200 + n] for i, n in enumerate(sizes)]
    est = DPMLPClassifier(classes=["no", "yes"], noise_multiplier=1.0, **FAST)

    models = fit_many(est, Xs, ys)

    alone = clone(est).fit(Xs[0], ys[0])
    np.testing.assert_allclose(
        models[0].predict_proba(X_TEST), alone.predict_proba(X_TEST), atol=1e-5
    )
    assert [m.steps_ for m in models] == [5 * round(n / 40) for n in sizes]
    assert [m.sample_rate_ for m in models] == [40 / n for n in sizes]
    assert models[2].epsilon_ > models[1].epsilon_  # fewer rows, larger sampling rate
    assert not hasattr(est, "module_")


def test_fit_many_in_batches_gives_the_models_of_one_call() -> None:
    sizes = [120, 160, 90, 100]
    Xs = [X_TRAIN[i * 160 : i * 160 + n] for i, n in enumerate(sizes)]
    ys = [Y_TRAIN[i * 160 : i * 160 + n] for i, n in enumerate(sizes)]
    est = DPMLPClassifier(classes=["no", "yes"], noise_multiplier=1.0, **FAST)

    whole = fit_many(est, Xs, ys)
    batches = fit_many(est, Xs[:1], ys[:1]) + fit_many(est, Xs[1:], ys[1:], first_site=1)

    for a, b in zip(whole, batches, strict=True):
        np.testing.assert_allclose(a.predict_proba(X_TEST), b.predict_proba(X_TEST), atol=1e-5)
        assert a.epsilon_ == b.epsilon_
    shifted = fit_many(est, Xs[1:2], ys[1:2])  # without first_site: site 0's generator
    assert not np.allclose(shifted[0].predict_proba(X_TEST), whole[1].predict_proba(X_TEST))
    with pytest.raises(ValueError, match="first_site"):
        fit_many(est, Xs, ys, first_site=-1)


def test_fit_many_is_all_or_nothing() -> None:
    est = DPMLPClassifier(classes=["no", "yes"], noise_multiplier=1.0, **FAST)
    bad = X_TRAIN[:50].copy()
    bad[3, 1] = np.nan

    with pytest.raises(DataValidationError):
        fit_many(est, [X_TRAIN[:50], bad], [Y_TRAIN[:50], Y_TRAIN[:50]])
    with pytest.raises(ValueError):
        fit_many(est, [X_TRAIN[:50]], [])


# ---- scikit-learn integration ----------------------------------------------------------------
def test_clone_get_set_params_round_trip() -> None:
    clf = DPMLPClassifier(classes=["no", "yes"], epsilon=1.0, **FAST)

    twin = clone(clf)

    assert twin.get_params() == clf.get_params()
    assert twin.set_params(epochs=3) is twin and twin.epochs == 3
    with pytest.raises(NotFittedError):
        twin.predict(X_TEST)


def test_pipeline_and_cross_val_score() -> None:
    schema = FeatureSchema(
        features=tuple(Feature(name=f"x{i}", lower=0, upper=1, default=0.5) for i in range(4))
    )
    frame = pd.DataFrame(X_TRAIN[:300], columns=schema.names)
    model = DPMLPClassifier(
        schema=schema,
        classes=["no", "yes"],
        noise_multiplier=0.8,
        **{**FAST, "learning_rate": 1e-2},
    )
    pipe = Pipeline([("identity", FunctionTransformer()), ("model", model)])

    scores = cross_val_score(pipe, frame, Y_TRAIN[:300], cv=3)

    assert scores.shape == (3,) and np.all(scores > 0.5)
    assert pipe.fit(frame, Y_TRAIN[:300]).predict(frame[::-1]).shape == (300,)


def test_same_seed_same_model_other_seed_other_model() -> None:
    params = {**FAST, "noise_multiplier": 1.0, "classes": ["no", "yes"]}
    a = DPMLPClassifier(**params).fit(X_TRAIN[:200], Y_TRAIN[:200])
    b = DPMLPClassifier(**params).fit(X_TRAIN[:200], Y_TRAIN[:200])
    c = DPMLPClassifier(**{**params, "random_state": 1, "noise_seed": 1}).fit(
        X_TRAIN[:200], Y_TRAIN[:200]
    )

    np.testing.assert_array_equal(a.predict_proba(X_TEST), b.predict_proba(X_TEST))
    assert not np.array_equal(a.predict_proba(X_TEST), c.predict_proba(X_TEST))


# ---- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"epsilon": 0.0}, InvalidPrivacyParameterError, "epsilon"),
        ({"epsilon": -1.0}, InvalidPrivacyParameterError, "epsilon"),
        ({"epsilon": 1.0, "delta": 1 / 100}, InvalidPrivacyParameterError, "1/n"),
        ({"epsilon": 1.0, "noise_multiplier": 1.0}, InvalidPrivacyParameterError, "both"),
        ({}, InvalidPrivacyParameterError, "neither"),
        ({"noise_multiplier": 0.0}, InvalidPrivacyParameterError, "noise_multiplier"),
        (
            {"noise_multiplier": 1.0, "max_grad_norm": 0.0},
            InvalidPrivacyParameterError,
            "max_grad_norm",
        ),
        (
            {"noise_multiplier": 1.0, "accountant": "moments"},
            InvalidPrivacyParameterError,
            "accountant",
        ),
        ({"dp": False, "epsilon": 1.0}, InvalidPrivacyParameterError, "dp=False"),
        ({"noise_multiplier": 1.0, "classes": None}, LabelError, "public label set"),
        ({"noise_multiplier": 1.0, "activation": "swish"}, ValueError, "activation"),
        ({"noise_multiplier": 1.0, "hidden_layer_sizes": (0,)}, ValueError, "hidden_layer_sizes"),
        ({"noise_multiplier": 1.0, "optimizer": "lbfgs"}, ValueError, "optimizer"),
    ],
)
def test_bad_parameters_raise_clear_errors(
    params: dict[str, Any], error: type[Exception], match: str
) -> None:
    clf = DPMLPClassifier(**{**FAST, "classes": ["no", "yes"], **params})

    with pytest.raises(error, match=match):
        clf.fit(X_TRAIN[:100], Y_TRAIN[:100])
    assert not hasattr(clf, "module_")


def test_bad_data_raises_and_a_failed_fit_changes_nothing() -> None:
    clf = DPMLPClassifier(classes=["no", "yes"], noise_multiplier=1.0, **FAST).fit(
        X_TRAIN[:100], Y_TRAIN[:100]
    )
    before = (dict(vars(clf)), clf.predict_proba(X_TEST))
    nan_X = X_TRAIN[:100].copy()
    nan_X[0, 0] = np.nan
    unknown = Y_TRAIN[:100].astype(object)
    unknown[0] = "maybe"

    with pytest.raises(DataValidationError):
        clf.fit(nan_X, Y_TRAIN[:100])
    with pytest.raises(LabelError, match="maybe"):
        clf.fit(X_TRAIN[:100], unknown)
    with pytest.raises(DataValidationError):
        DPMLPRegressor(noise_multiplier=1.0, **FAST).fit(X_TRAIN[:100], np.full(100, np.nan))
    with pytest.raises(DataValidationError):
        clf.predict(nan_X)

    assert vars(clf).keys() == before[0].keys() and clf.module_ is before[0]["module_"]
    np.testing.assert_array_equal(clf.predict_proba(X_TEST), before[1])
