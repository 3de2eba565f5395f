"""PrivateHyperparameterSearch: accounted random-stopping selection (Papernot & Steinke 2022)."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

import dp_accounting
import numpy as np
import pandas as pd
import pytest
import torch
from dp_accounting.dp_event import RepeatAndSelectDpEvent
from sklearn.base import clone

from pubsubml.errors import (
    InvalidPrivacyParameterError,
    LabelError,
    PrivacyBudgetExceededError,
)
from pubsubml.hub import LocalHub
from pubsubml.learners import (
    DPLogisticRegression,
    DPMLPClassifier,
    DPSGDLinearRegression,
    DPSGDLogisticRegression,
    PrivateHyperparameterSearch,
    select_hyperparameters,
)
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger
from pubsubml.schema import FeatureSchema
from pubsubml.sites import Site

logging.getLogger("absl").setLevel(logging.ERROR)
SCHEMA = FeatureSchema.numeric(["x0", "x1", "x2"])
GRID = {"learning_rate": [0.05, 0.2], "max_grad_norm": [0.5, 1.0]}


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _data(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.random((n, 3)), columns=SCHEMA.names)
    return X, (X["x0"] + 0.5 * X["x2"] > X["x1"] + 0.25).to_numpy().astype(int)


X, Y = _data(1000, 0)
X_TEST, Y_TEST = _data(2000, 1)


def _base(**params: Any) -> DPSGDLogisticRegression:
    return DPSGDLogisticRegression(schema=SCHEMA, classes=[0, 1], **params)


def _search(**params: Any) -> PrivateHyperparameterSearch:
    return PrivateHyperparameterSearch(
        estimator=params.pop("estimator", _base()),
        param_grid=params.pop("param_grid", GRID),
        **{"random_state": 0, "noise_seed": 0, **params},
    )


@pytest.fixture(scope="module")
def fitted() -> PrivateHyperparameterSearch:
    return _search().fit(X, Y)


# ---- what is released, and what it costs ----------------------------------------------------
def test_releases_the_best_run_only(fitted: PrivateHyperparameterSearch) -> None:
    assert fitted.best_params_ in [
        {"learning_rate": lr, "max_grad_norm": c} for lr in (0.05, 0.2) for c in (0.5, 1.0)
    ]
    assert (
        fitted.best_estimator_.get_params()["learning_rate"] == fitted.best_params_["learning_rate"]
    )
    assert fitted.n_runs_ >= 1 and 0.0 <= fitted.best_score_ <= 1.1
    assert fitted.score(X_TEST, Y_TEST) > 0.8
    np.testing.assert_array_equal(
        fitted.predict_proba(X_TEST), fitted.best_estimator_.predict_proba(X_TEST)
    )
    assert list(fitted.classes_) == [0, 1] and fitted.schema_ == SCHEMA
    assert not any(k.startswith("runs") or k == "cv_results_" for k in vars(fitted))


def test_epsilon_is_the_accountant_over_every_event_that_ran(
    fitted: PrivateHyperparameterSearch,
) -> None:
    (event,) = fitted.privacy_events_
    train, score = event.events or ()
    one_run = fitted.best_estimator_

    # The inner events are one run: its DP-SGD training (on the 800 training rows) and the
    # Gaussian noisy count on the 200 held-out rows.
    assert event.mechanism == "repeat_and_select" and (event.mean, event.shape) == (4.0, 1.0)
    assert [train] == one_run.privacy_events_ and one_run.hyperparameters_.batch_size == 800
    assert score == DPEvent(mechanism="gaussian", noise_multiplier=10.0)
    reference = dp_accounting.rdp.RdpAccountant()
    reference.compose(
        RepeatAndSelectDpEvent(
            dp_accounting.ComposedDpEvent(
                [
                    dp_accounting.SelfComposedDpEvent(
                        dp_accounting.PoissonSampledDpEvent(
                            1.0, dp_accounting.GaussianDpEvent(train.noise_multiplier)
                        ),
                        train.count,
                    ),
                    dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(10.0), 1),
                ]
            ),
            4.0,
            1.0,
        )
    )
    assert fitted.epsilon_ == pytest.approx(reference.get_epsilon(1e-5), rel=1e-9)
    assert fitted.epsilon_ == compute_epsilon(fitted.privacy_events_, fitted.delta_)
    assert fitted.delta_ == 1e-5
    assert fitted.epsilon_ > one_run.epsilon_ * 1.3  # selection costs more than one run


def test_publishing_charges_the_whole_selection_to_the_ledger(
    fitted: PrivateHyperparameterSearch,
) -> None:
    site = Site("pub", SCHEMA, PrivacyLedger(site="pub", epsilon_budget=10.0, delta=1e-5))
    hub = LocalHub()

    model_id = site.publish(fitted, hub)

    (release,) = site.ledger.releases
    assert list(release.events) == fitted.privacy_events_
    assert site.ledger.spent_epsilon() == pytest.approx(fitted.epsilon_, rel=1e-9)
    assert site.ledger.spent_epsilon() > fitted.best_estimator_.epsilon_
    card, _ = hub.fetch(model_id)
    assert card.privacy.epsilon == pytest.approx(fitted.epsilon_, rel=1e-9)


def test_a_budget_that_covers_one_run_but_not_the_selection_refuses(
    fitted: PrivateHyperparameterSearch,
) -> None:
    budget = 0.5 * (fitted.best_estimator_.epsilon_ + fitted.epsilon_)
    site = Site("pub", SCHEMA, PrivacyLedger(site="pub", epsilon_budget=budget, delta=1e-5))
    hub = LocalHub()

    site.publish(fitted.best_estimator_, hub)  # one run alone fits the budget
    with pytest.raises(PrivacyBudgetExceededError):
        Site("p2", SCHEMA, PrivacyLedger(site="p2", epsilon_budget=budget, delta=1e-5)).publish(
            fitted, hub
        )


# ---- selection behaviour ---------------------------------------------------------------------
def test_picks_the_candidate_that_learns() -> None:
    search = _search(param_grid={"learning_rate": [1e-4, 0.2]}, mean_repetitions=20.0)

    search.fit(X, Y)

    assert search.best_params_ == {"learning_rate": 0.2}
    assert search.score(X_TEST, Y_TEST) > 0.8


def test_same_seed_same_selection() -> None:
    a = _search(random_state=5, noise_seed=5).fit(X[:500], Y[:500])
    b = _search(random_state=5, noise_seed=5).fit(X[:500], Y[:500])

    assert a.best_params_ == b.best_params_ and a.n_runs_ == b.n_runs_
    np.testing.assert_array_equal(a.predict_proba(X_TEST), b.predict_proba(X_TEST))
    assert clone(a).get_params()["param_grid"] == GRID


def test_regressor_is_scored_on_its_public_target_bounds() -> None:
    t = (2 * X["x0"] - X["x1"]).to_numpy()
    reg = DPSGDLinearRegression(schema=SCHEMA, target_bounds=(-1.0, 2.0))

    search = select_hyperparameters(
        reg,
        {"learning_rate": [0.01, 0.02]},
        X,
        t,
        mean_repetitions=2.0,
        random_state=0,
        noise_seed=0,
    )

    assert search.predict(X_TEST[:5]).shape == (5,) and 0.0 < search.best_score_ <= 1.1
    assert search.privacy_events_[0].mechanism == "repeat_and_select"


def test_networks_can_tune_their_shape() -> None:
    net = DPMLPClassifier(schema=SCHEMA, classes=[0, 1], epochs=3, epsilon=1.0, accountant="rdp")

    search = _search(estimator=net, param_grid={"hidden_layer_sizes": [(4,), (8,)]}).fit(
        X[:400], Y[:400]
    )

    assert search.best_params_["hidden_layer_sizes"] in [(4,), (8,)]
    assert search.accountant_ == "rdp" and search.epsilon_ > search.best_estimator_.epsilon_


# ---- bad input changes nothing ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"param_grid": []}, ValueError, "no candidate"),
        ({"param_grid": {"learning_rate": []}}, ValueError, "param_grid"),
        ({"mean_repetitions": 0}, InvalidPrivacyParameterError, "positive"),
        ({"mean_repetitions": -2.0}, InvalidPrivacyParameterError, "positive"),
        ({"mean_repetitions": 0.5}, InvalidPrivacyParameterError, ">= 1"),
        ({"mean_repetitions": math.inf}, InvalidPrivacyParameterError, ">= 1"),
        ({"shape": -1.0}, ValueError, "shape"),
        ({"validation_fraction": 1.0}, ValueError, "validation_fraction"),
        ({"score_noise_multiplier": 0.0}, ValueError, "score_noise_multiplier"),
        ({"param_grid": {"random_state": [1, 2]}}, ValueError, "random_state"),
        ({"param_grid": {"batch_size": [100, 800]}}, InvalidPrivacyParameterError, "same DP"),
        ({"param_grid": {"epsilon": [0.5, 1.0]}}, InvalidPrivacyParameterError, "same DP"),
        ({"estimator": DPLogisticRegression(schema=SCHEMA, classes=[0, 1])}, TypeError, "DP-SGD"),
        (
            {"estimator": DPMLPClassifier(schema=SCHEMA, dp=False)},
            InvalidPrivacyParameterError,
            "without DP",
        ),
        ({"estimator": DPSGDLinearRegression(schema=SCHEMA)}, ValueError, "target_bounds"),
    ],
)
def test_bad_input_raises_clearly_and_changes_nothing(
    params: dict[str, Any], error: type[Exception], match: str
) -> None:
    search = _search(**params)
    estimator = search.estimator

    with pytest.raises(error, match=match):
        search.fit(X[:200], Y[:200] if "target_bounds" not in match else X["x0"][:200])

    assert not hasattr(search, "best_estimator_") and not hasattr(search, "epsilon_")
    assert not hasattr(estimator, "module_") and not hasattr(estimator, "estimator_")


def test_a_failed_refit_keeps_the_previous_selection(
    fitted: PrivateHyperparameterSearch,
) -> None:
    search = clone(fitted).fit(X[:300], Y[:300])
    before = dict(vars(search))

    with pytest.raises(InvalidPrivacyParameterError):
        search.set_params(mean_repetitions=0).fit(X, Y)

    after = dict(vars(search))
    after.pop("mean_repetitions")
    before.pop("mean_repetitions")
    assert after.keys() == before.keys()
    assert all(after[k] is before[k] for k in after)


def test_labels_outside_the_public_classes_raise_before_any_run() -> None:
    y_bad = Y[:200].astype(object)
    y_bad[-1] = "unheard-of"
    search = _search()

    with pytest.raises(LabelError, match="unheard-of"):
        search.fit(X[:200], y_bad)
    assert not hasattr(search, "best_estimator_")
