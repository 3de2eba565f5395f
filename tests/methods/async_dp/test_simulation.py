"""Tests of pubsubml.methods.async_dp.simulation: Algorithm 1 driven by rate-1 Poisson clocks."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest
from scipy import stats

from pubsubml.errors import (
    DataValidationError,
    InvalidPrivacyParameterError,
    PrivacyBudgetExceededError,
)
from pubsubml.methods.async_dp.learner import AsyncDPLearner, DataOwner
from pubsubml.methods.async_dp.simulation import simulate_async_dp

P, SIZES = 2, (20, 30, 25)


def _owners(horizon: int, sizes: tuple[int, ...] = SIZES) -> list[DataOwner]:
    """Owners with their own seeded noise, so that two calls build identical owners."""
    data = np.random.default_rng(0)
    out = []
    for i, n in enumerate(sizes):
        X = data.uniform(-0.5, 0.5, (n, P))
        y = np.clip(X @ [0.4, -0.3] + 0.1 * data.normal(size=n), -1, 1)
        noise = np.random.default_rng(10 + i)
        owner = DataOwner(site=f"o{i}", X=X, y=y, epsilon=50.0, horizon=horizon, clip_norm=4.0,
                          theta_max=1.0, rng=noise)  # fmt: skip
        out.append(owner)
    return out


def _learner(horizon: int, sizes: tuple[int, ...] = SIZES, **kw: object) -> AsyncDPLearner:
    args: dict[str, object] = {"n_records": list(sizes), "n_features": P, "horizon": horizon,
                               "reg": 0.05, "theta_max": 1.0, "rho": 2.0}  # fmt: skip
    return AsyncDPLearner(**(args | kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("style", ["request", "broadcast"])
def test_run_replays_algorithm_1_in_the_recorded_owner_order(
    style: Literal["request", "broadcast"],
) -> None:
    # Prepare / Execute
    horizon = 25
    run = simulate_async_dp(
        _owners(horizon), _learner(horizon), rng=np.random.default_rng(1), style=style
    )
    # Assert: the same owners and learner, stepped by hand in run.owners' order, pass through
    # exactly the recorded θ_L after every iteration.
    owners, learner = _owners(horizon), _learner(horizon)
    for k, i in enumerate(run.owners.tolist()):
        theta_hat = learner.query(i)
        learner.update(i, theta_hat, owners[i].answer(theta_hat))
        np.testing.assert_array_equal(run.thetas[k], learner.theta_learner)
    assert run.owners.shape == run.times.shape == (horizon,) and run.thetas.shape == (horizon, P)
    assert [o.answers_given for o in owners] == np.bincount(run.owners, minlength=3).tolist()


def test_same_clock_seed_gives_the_same_run() -> None:
    a = simulate_async_dp(_owners(15), _learner(15), rng=np.random.default_rng(4))
    b = simulate_async_dp(_owners(15), _learner(15), rng=np.random.default_rng(4))
    c = simulate_async_dp(_owners(15), _learner(15), rng=np.random.default_rng(5))
    for x, y in ((a.owners, b.owners), (a.times, b.times), (a.thetas, b.thetas)):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.times, c.times)


def test_request_style_updates_arrive_as_a_rate_n_poisson_process() -> None:
    # N independent rate-1 clocks superpose to one rate-N process: exponential gaps of mean 1/N.
    horizon = 300
    run = simulate_async_dp(_owners(horizon), _learner(horizon), rng=np.random.default_rng(2))
    gaps = np.diff(np.concatenate([[0.0], run.times]))
    assert stats.kstest(gaps, "expon", args=(0, 1 / 3)).pvalue > 0.01
    assert stats.kstest(gaps, "expon", args=(0, 1.0)).pvalue < 1e-3  # the test has power


def test_broadcast_style_answers_once_per_round_after_each_broadcast() -> None:
    horizon, interval = 300, 2.0
    run = simulate_async_dp(
        _owners(horizon),
        _learner(horizon),
        rng=np.random.default_rng(3),
        style="broadcast",
        broadcast_interval=interval,
    )
    # Each update waits for the next broadcast after the previous update (the first at
    # t = interval), so no two updates fall in one round.
    before = np.concatenate([[0.0], run.times[:-1]])
    broadcasts = interval * np.ceil(before / interval + 1e-12)
    assert np.all(run.times >= broadcasts) and broadcasts[0] == interval
    assert np.all(np.diff(np.floor(run.times / interval)) >= 1)
    # Memoryless clocks: the wait from the broadcast to the first of N clocks is Exp(rate N).
    waits = run.times - broadcasts
    assert stats.kstest(waits, "expon", args=(0, 1 / 3)).pvalue > 0.01
    assert stats.kstest(waits, "expon", args=(0, 1.0)).pvalue < 1e-3


def test_owner_with_a_shorter_horizon_runs_out_of_budget() -> None:
    owners = _owners(2, sizes=(20,))
    with pytest.raises(PrivacyBudgetExceededError, match="query 3 is refused"):
        simulate_async_dp(owners, _learner(5, sizes=(20,)), rng=np.random.default_rng(0))
    assert owners[0].answers_given == 2 and owners[0].spent_epsilon() == pytest.approx(50.0)


def test_owners_that_do_not_match_the_learner_are_refused() -> None:
    owners, rng = _owners(5), np.random.default_rng(0)
    with pytest.raises(DataValidationError, match="single-run learner"):
        simulate_async_dp(owners, _learner(5, replicas=2), rng=rng)
    with pytest.raises(DataValidationError, match="one entry per owner"):
        simulate_async_dp(owners[:2], _learner(5), rng=rng)
    with pytest.raises(DataValidationError, match="n_records"):
        simulate_async_dp(owners, _learner(5, sizes=(20, 25, 30)), rng=rng)
    with pytest.raises(DataValidationError, match="style"):
        simulate_async_dp(owners, _learner(5), rng=rng, style="gossip")  # type: ignore[arg-type]
    with pytest.raises(InvalidPrivacyParameterError, match="broadcast_interval"):
        simulate_async_dp(owners, _learner(5), rng=rng, broadcast_interval=0.0)
    assert all(o.answers_given == 0 for o in owners)
