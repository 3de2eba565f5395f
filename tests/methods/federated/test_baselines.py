"""Tests of pubsubml.methods.federated.baselines: DPFedAvg, DPFedProx, DPFedAdam, min_epsilon."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.methods import hyperplane_chunks, hyperplane_schema
from pubsubml.methods.federated import (
    DPFedAdam,
    DPFedAvg,
    DPFedProx,
    FedAvg,
    FederatedMLP,
    min_epsilon,
)
from pubsubml.privacy.accountants import compute_epsilon

pytestmark = pytest.mark.usefixtures("one_thread")
SCHEMA = hyperplane_schema(3)
SMALL: dict[str, Any] = {"schema": SCHEMA, "classes": [0, 1], "hidden_layer_sizes": (4,),
                         "client_fraction": 0.5, "batch_size": 10, "rounds": 2,
                         "accountant": "rdp"}  # fmt: skip


def _clients() -> list[tuple[pd.DataFrame, np.ndarray]]:
    return list(hyperplane_chunks(4, 40, seed=1, n_features=3, mag_change=0.0))


def test_the_three_baselines_run_at_the_same_privacy_level() -> None:
    # Prepare / Execute: personalised budgets, so the smallest is the target of all three.
    clients = _clients()
    budgets = {"a": 2.0, "b": 0.8, "c": 5.0}
    target = min_epsilon(budgets)
    kinds: list[tuple[type[FederatedMLP], dict[str, Any]]] = [
        (DPFedAvg, {}),
        (DPFedProx, {"mu": 0.5}),
        (DPFedAdam, {}),
    ]
    fits = [
        cls(**SMALL, **extra, target_epsilon=target, target_delta=1e-3).fit(clients)
        for cls, extra in kinds
    ]
    # Assert: the same σ, the same steps, the same ε for every client, within the target, and
    # each ε is the accountant's on the events that ran.
    reference = fits[0]
    for fl in fits:
        np.testing.assert_array_equal(fl.noise_multiplier_, reference.noise_multiplier_)
        np.testing.assert_array_equal(fl.participation_, reference.participation_)
        assert fl.client_events_ == reference.client_events_
        for events, eps in zip(fl.client_events_, fl.client_epsilons_, strict=True):
            assert eps == pytest.approx(compute_epsilon(events, 1e-3, backend="rdp"))
        assert 0.7 < fl.epsilon_ <= min(budgets.values()) + 1e-9
    # The server strategies differ, so the published models differ.
    weights = [next(fl.module_.parameters()).detach() for fl in fits]
    assert not torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])


def test_each_baseline_builds_its_own_server_strategy() -> None:
    avg = DPFedAvg(**{**SMALL, "client_fraction": 0.3}).server_strategy()
    prox = DPFedProx(**SMALL, mu=0.25).server_strategy()
    adam = DPFedAdam(**SMALL, server_lr=0.2, beta1=0.5, beta2=0.9, tau=0.01).server_strategy()
    assert type(avg) is FedAvg and avg.client_fraction == 0.3
    assert prox.mu == 0.25 and prox.client_fraction == 0.5
    assert (adam.server_lr, adam.beta1, adam.beta2, adam.tau) == (0.2, 0.5, 0.9, 0.01)


def test_fed_adam_exposes_one_server_moment_per_parameter() -> None:
    fl = DPFedAdam(**SMALL, dp=False).fit(_clients())
    shapes = [tuple(p.shape) for p in fl.module_.parameters()]
    assert [tuple(m.shape) for m in fl.server_m_] == shapes
    assert [tuple(v.shape) for v in fl.server_v_] == shapes
    assert fl.server_steps_ == SMALL["rounds"]
    assert all(bool((v > 0).all()) for v in fl.server_v_)


def test_fed_adam_refuses_a_server_strategy_that_is_not_adam() -> None:
    class NotAdam(DPFedAdam):
        def server_strategy(self) -> FedAvg:  # type: ignore[override]
            return FedAvg(client_fraction=self.client_fraction)

    with pytest.raises(TypeError, match="FedAdam"):
        NotAdam(**SMALL, dp=False).fit(_clients())


def test_min_epsilon_takes_any_iterable_and_checks_every_budget() -> None:
    assert min_epsilon(eps for eps in (2.0, 0.3, 1.0)) == 0.3
    assert min_epsilon({("site", 1): 4.0}) == 4.0
    assert type(min_epsilon([np.float64(0.5)])) is float
    for bad in ([0.5, -1.0], [math.nan], [0.5, math.nan]):
        with pytest.raises(InvalidPrivacyParameterError):
            min_epsilon(bad)
