"""DP-FedAvg baseline: per-client accounting within the target ε, and it learns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pubsubml.methods import DPFedAvg, hyperplane_chunks, hyperplane_schema
from pubsubml.methods.federated import client_schedule
from pubsubml.privacy import compute_epsilon

pytestmark = pytest.mark.usefixtures("one_thread")
SCHEMA = hyperplane_schema(4)


def _clients(n: int, rows: int) -> list[tuple[pd.DataFrame, np.ndarray]]:
    return list(hyperplane_chunks(n, rows, seed=3, n_features=4, mag_change=0.0))


def test_schedule_balances_participation() -> None:
    rounds = client_schedule(10, 3, 7, seed=1)
    counts = np.bincount(np.concatenate(rounds), minlength=10)
    assert all(len(set(r.tolist())) == 3 for r in rounds)
    assert counts.min() >= 2 and counts.max() == 3  # 21 slots over 10 clients


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
