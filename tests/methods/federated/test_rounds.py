"""DP-FedAvg baseline: per-client accounting within the target ε, and it learns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.datasets import make_friedman1

from pubsubml.errors import LabelError
from pubsubml.learners import DPMLPClassifier, DPSGDLogisticRegression
from pubsubml.methods import DPFedAvg, hyperplane_chunks, hyperplane_schema
from pubsubml.methods.federated import DPFedAdam, DPFedProx, FederatedMLP
from pubsubml.methods.federated.loop import client_schedule
from pubsubml.privacy import DEFAULT_DELTA, compute_epsilon
from pubsubml.schema import FeatureSchema

pytestmark = pytest.mark.usefixtures("one_thread")
SCHEMA = hyperplane_schema(4)


def _clients(n: int, rows: int) -> list[tuple[pd.DataFrame, np.ndarray]]:
    return list(hyperplane_chunks(n, rows, seed=3, n_features=4, mag_change=0.0))


def test_schedule_balances_participation() -> None:
    rounds = client_schedule(10, 3, 7, seed=1)
    counts = np.bincount(np.concatenate(rounds), minlength=10)
    assert all(len(set(r.tolist())) == 3 for r in rounds)
    assert counts.min() >= 2 and counts.max() == 3  # 21 slots over 10 clients


@pytest.mark.parametrize("seed", range(6))
def test_schedule_is_balanced_for_every_size(seed: int) -> None:
    for n in range(1, 13):
        for m in range(1, n + 1):
            for rounds in (1, 2, 3, 5, 8, 13):
                schedule = client_schedule(n, m, rounds, seed)
                counts = np.bincount(np.concatenate(schedule), minlength=n)
                assert all(len(np.unique(r)) == m for r in schedule)
                assert counts.max() == -(-rounds * m // n)  # ⌈R·m/N⌉
                assert counts.min() == rounds * m // n  # ⌊R·m/N⌋


def test_schedule_rejects_bad_sizes() -> None:
    for n, m, rounds in ((3, 0, 2), (3, 4, 2), (3, 1, -1)):
        with pytest.raises(ValueError, match="per_round"):
            client_schedule(n, m, rounds, seed=0)


@pytest.mark.parametrize("seed", [0, 3, 4])
def test_sampled_clients_never_exceed_the_target(seed: int) -> None:
    # 3 clients, 2 per round, 4 rounds: 8 turns, so every client takes part 2 or 3 times and σ
    # must cover 3 turns for everyone.
    fl = DPFedAvg(
        schema=SCHEMA,
        classes=[0, 1],
        hidden_layer_sizes=(4,),
        rounds=4,
        client_fraction=0.67,
        batch_size=20,
        target_epsilon=1.0,
        target_delta=1e-4,
        accountant="rdp",
        random_state=seed,
    ).fit(_clients(3, 60))
    assert sorted(fl.participation_.tolist()) == [2, 3, 3]
    assert fl.epsilon_ <= 1.0 + 1e-9


def test_local_dp_rejects_delta_too_large_for_a_client() -> None:
    from pubsubml.errors import InvalidPrivacyParameterError

    fl = DPFedAvg(schema=SCHEMA, classes=[0, 1], rounds=1, target_delta=0.05)
    with pytest.raises(InvalidPrivacyParameterError, match="delta"):
        fl.fit(_clients(2, 30))  # δ = 0.05 ≥ 1/30


def test_dp_fedavg_accounts_every_client_within_target() -> None:
    clients = _clients(8, 150)
    fl = DPFedAvg(
        schema=SCHEMA,
        classes=[0, 1],
        hidden_layer_sizes=(8,),
        rounds=5,
        client_fraction=0.5,
        batch_size=30,
        lr=0.05,
        target_epsilon=1.0,
        target_delta=1e-4,
        accountant="rdp",
    ).fit(clients)
    steps = 5  # one local epoch of round(1 / q) = 150 / 30 steps
    assert fl.participation_.sum() == 5 * 4
    for c, events in enumerate(fl.client_events_):
        assert [e.count for e in events] == [steps * fl.participation_[c]]
        assert compute_epsilon(events, 1e-4, backend="rdp") == pytest.approx(fl.client_epsilons_[c])
    assert fl.epsilon_ <= 1.0 and fl.epsilon_ == fl.client_epsilons_.max()
    assert fl.predict_proba(clients[0][0]).shape == (150, 2)


def test_non_private_fedavg_learns() -> None:
    clients = _clients(5, 200)
    test_X, test_y = _clients(6, 200)[5]
    fl = DPFedAvg(
        schema=SCHEMA,
        classes=[0, 1],
        hidden_layer_sizes=(16,),
        rounds=10,
        client_fraction=1.0,
        local_epochs=2,
        batch_size=20,
        lr=0.01,
        dp=False,
    ).fit(clients)
    assert fl.epsilon_ == float("inf") and fl.client_events_ == [[]] * 5
    assert fl.score(test_X, test_y) > 0.75


def test_regression_and_bad_input() -> None:
    clients = [(X, X.sum(axis=1).to_numpy()) for X, _ in _clients(3, 60)]
    reg = DPFedAvg(
        schema=SCHEMA,
        task="regression",
        hidden_layer_sizes=(4,),
        rounds=2,
        client_fraction=1.0,
        batch_size=20,
        noise_multiplier=1.0,
        accountant="rdp",
    ).fit(clients)
    assert reg.predict(clients[0][0]).shape == (60,)
    with pytest.raises(ValueError, match="client_fraction"):
        DPFedAvg(schema=SCHEMA, client_fraction=0.0).fit(clients)


@pytest.mark.parametrize("dp", [True, "central"])
def test_dp_needs_the_public_label_set(dp: bool | str) -> None:
    clients = _clients(3, 40)
    with pytest.raises(LabelError, match="public label set"):
        DPFedAvg(schema=SCHEMA, rounds=1, dp=dp, target_delta=1e-3).fit(clients)
    plain = DPFedAvg(schema=SCHEMA, rounds=1, dp=False, hidden_layer_sizes=(4,)).fit(clients)
    assert plain.classes_.tolist() == [0, 1]  # without DP the clients' labels may be read


@pytest.mark.parametrize("cls", [DPFedAvg, DPFedProx, DPFedAdam])
def test_clients_with_different_columns_are_extended_with_the_public_defaults(
    cls: type[FederatedMLP],
) -> None:
    # pubsub-ml.txt §8.1.3: FL sites keep every feature of the schema and set the ones they
    # lack to a default.
    full = _clients(3, 60)
    clients = [(full[0][0][["x0", "x1"]], full[0][1]), (full[1][0][["x3", "x2", "x0"]], full[1][1])]
    clients.append(full[2])
    params: dict[str, Any] = dict(
        schema=SCHEMA,
        classes=[0, 1],
        hidden_layer_sizes=(4,),
        rounds=2,
        client_fraction=1.0,
        batch_size=20,
        noise_multiplier=1.0,
        accountant="rdp",
    )

    fl = cls(**params).fit(clients)

    by_hand = cls(**params).fit([(SCHEMA.extend(X), y) for X, y in clients])
    X_test = full[2][0]
    np.testing.assert_array_equal(fl.predict_proba(X_test), by_hand.predict_proba(X_test))
    assert fl.epsilon_ == by_hand.epsilon_


def test_the_fl_baselines_default_to_the_delta_of_the_learners() -> None:
    fl = DPFedAvg(schema=SCHEMA)

    assert fl.target_delta == DEFAULT_DELTA
    assert DPMLPClassifier().delta == DEFAULT_DELTA
    assert DPSGDLogisticRegression().delta == DEFAULT_DELTA


FRIEDMAN = FeatureSchema.numeric([f"x{i}" for i in range(5)])
#: The public range of Friedman #1's target: 10·sin ∈ [0, 10], 20·(x − ½)² ∈ [0, 5], 10x, 5x.
FRIEDMAN_BOUNDS = (0.0, 30.0)


def _friedman(seed: int) -> tuple[list[tuple[pd.DataFrame, np.ndarray]], pd.DataFrame, np.ndarray]:
    """Friedman #1 (targets in about [0, 30]) over 4 clients of 500 rows, and 500 test rows."""
    X, y = make_friedman1(n_samples=2500, n_features=5, noise=1.0, random_state=seed)
    frame = pd.DataFrame(X, columns=FRIEDMAN.names)
    clients = [(frame.iloc[i * 500 : (i + 1) * 500], y[i * 500 : (i + 1) * 500]) for i in range(4)]
    return clients, frame.iloc[2000:], y[2000:]


@pytest.mark.parametrize("seed", [0, 1])
def test_public_target_bounds_let_dp_fedavg_learn_a_raw_scale_regression(seed: int) -> None:
    clients, X_test, y_test = _friedman(seed)
    params: dict[str, Any] = dict(
        schema=FRIEDMAN,
        task="regression",
        hidden_layer_sizes=(16,),
        rounds=10,
        client_fraction=1.0,
        lr=0.03,
        target_epsilon=1.0,
        accountant="rdp",
        random_state=seed,
    )

    raw = DPFedAvg(**params).fit(clients)
    bounded = DPFedAvg(**params, target_bounds=FRIEDMAN_BOUNDS).fit(clients)

    assert raw.score(X_test, y_test) < 0.4
    assert bounded.score(X_test, y_test) > 0.6
    assert bounded.epsilon_ == pytest.approx(raw.epsilon_)  # the bounds cost no privacy
    with torch.no_grad():  # the global network itself predicts in target units
        Z = torch.from_numpy(FRIEDMAN.encode(X_test))
        np.testing.assert_allclose(
            bounded.module_(Z)[:, 0].numpy(), bounded.predict(X_test), rtol=1e-6
        )


def test_target_bounds_are_checked_before_training() -> None:
    clients, _, _ = _friedman(0)
    with pytest.raises(ValueError, match="lower < upper"):
        DPFedAvg(schema=FRIEDMAN, task="regression", target_bounds=(3.0, 1.0)).fit(clients)
    with pytest.raises(ValueError, match="for regression"):
        DPFedAvg(schema=FRIEDMAN, classes=[0, 1], target_bounds=(0.0, 1.0)).fit(clients)
