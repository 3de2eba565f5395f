"""Algorithm 1: the owners' Laplace answers and budgets, the learner's updates, the simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pubsubml.errors import DataValidationError, PrivacyBudgetExceededError
from pubsubml.methods.async_dp.cost import FitnessStatistics, optimal_parameters, relative_fitness
from pubsubml.methods.async_dp.learner import (
    AsyncDPLearner,
    DataOwner,
    answer_gradient_query,
    choose_rho,
    laplace_noise_scale,
    step_sizes,
)
from pubsubml.methods.async_dp.oracle import SquaredLossOracle
from pubsubml.methods.async_dp.simulation import simulate_async_dp
from pubsubml.methods.async_dp.theory import gradient_norm_bound, project
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import Release


def _data(rng: np.random.Generator, n: int, p: int = 3) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(-0.5, 0.5, (n, p))
    y = np.clip(X @ np.linspace(-0.5, 0.5, p) + 0.1 * rng.normal(size=n), -1, 1)
    return X, y


def _owner(rng: np.random.Generator, **kw: object) -> DataOwner:
    X, y = _data(rng, 200)
    args: dict[str, object] = {"site": "bank", "X": X, "y": y, "epsilon": 2.0, "horizon": 5,
                               "clip_norm": 4.0, "theta_max": 1.0, "rng": rng}  # fmt: skip
    args.update(kw)
    return DataOwner(**args)  # type: ignore[arg-type]


def test_noise_scale_is_theorem_1(rng: np.random.Generator) -> None:
    owner = _owner(rng, epsilon=0.5, horizon=40, clip_norm=3.0)
    assert owner.noise_scale == pytest.approx(2 * 3.0 * 40 / (200 * 0.5))
    assert (
        laplace_noise_scale(clip_norm=3.0, horizon=40, n_records=200, epsilon=0.5)
        == owner.noise_scale
    )


def test_empirical_noise_is_laplace_of_that_scale(rng: np.random.Generator) -> None:
    X, y = _data(rng, 100)
    oracle = SquaredLossOracle(X, y, clip_norm=2.0, theta_max=1.0)
    theta = np.tile([0.2, -0.1, 0.3], (3000, 1))
    answers, event = answer_gradient_query(
        theta, oracle, epsilon=1.5, horizon=10, rng=np.random.default_rng(7)
    )
    noise = (answers - oracle.mean_gradient(theta)).ravel()
    scale = 2 * 2.0 * 10 / (100 * 1.5)
    assert stats.kstest(noise, "laplace", args=(0.0, scale)).pvalue > 0.01
    assert (
        stats.kstest(noise, "laplace", args=(0.0, 1.2 * scale)).pvalue < 1e-6
    )  # the test has power
    assert event.mechanism == "laplace" and event.noise_multiplier == pytest.approx(10 / 1.5)


def test_owner_refuses_query_after_horizon(rng: np.random.Generator) -> None:
    owner = _owner(rng, horizon=3)
    for _ in range(3):
        owner.answer(np.zeros(3))
    with pytest.raises(PrivacyBudgetExceededError, match="query 4 is refused"):
        owner.answer(np.zeros(3))
    assert owner.answers_given == 3 and len(owner.ledger.releases) == 3


def test_spent_epsilon_is_budget_after_horizon(rng: np.random.Generator) -> None:
    owner = _owner(rng, epsilon=0.8, horizon=4)
    spent = []
    for _ in range(4):
        owner.answer(np.zeros(3))
        spent.append(owner.spent_epsilon())
    assert spent == pytest.approx([0.2, 0.4, 0.6, 0.8])
    events = [e for r in owner.ledger.releases for e in r.events]
    assert len(events) == 4 and all(e.noise_multiplier == pytest.approx(4 / 0.8) for e in events)
    # The ledger's accountant (RDP at δ = 1e-6 for ε_i/T = 0.2) is close, and would refuse a 5th answer.
    assert owner.ledger.backend == "rdp"
    assert owner.ledger.spent_epsilon() == pytest.approx(0.8, rel=1e-2)
    fifth = Release(release_id="extra", events=(owner.event,))
    assert owner.ledger.epsilon_if_charged(fifth) > owner.ledger.epsilon_budget
    assert compute_epsilon(events[:1], 1e-6) <= 0.2 + 1e-9


def test_owner_rejects_query_outside_theta_and_charges_nothing(rng: np.random.Generator) -> None:
    owner = _owner(rng)
    for bad in ([2.0, 0.0, 0.0], [np.nan, 0.0, 0.0], [0.0, 0.0]):
        with pytest.raises(DataValidationError):
            owner.answer(bad)
    assert owner.answers_given == 0 and owner.ledger.releases == []


def test_clipping_bounds_l1_sensitivity(rng: np.random.Generator) -> None:
    X, y = _data(rng, 50)
    base = SquaredLossOracle(X, y, clip_norm=0.5, theta_max=1.0)
    X2, y2 = X.copy(), y.copy()
    X2[0], y2[0] = [30.0, -40.0, 50.0], 1e3  # a replaced record far outside the public bounds
    other = SquaredLossOracle(X2, y2, clip_norm=0.5, theta_max=1.0)
    assert not base.clipping_inactive
    for theta in rng.uniform(-1, 1, (20, 3)):
        diff = np.abs(base.mean_gradient(theta) - other.mean_gradient(theta)).sum()
        assert diff <= base.sensitivity + 1e-12


def test_fast_path_equals_per_example_gradient(rng: np.random.Generator) -> None:
    X, y = _data(rng, 80)
    xi = gradient_norm_bound(x_l1_bound=1.5, y_abs_bound=1.0, theta_max=1.0)
    oracle = SquaredLossOracle(X, y, clip_norm=xi, theta_max=1.0)
    assert oracle.clipping_inactive
    theta = rng.uniform(-1, 1, 3)
    reference = np.mean(
        [-2 * (yi - theta @ xi_) * xi_ for xi_, yi in zip(X, y, strict=True)], axis=0
    )
    np.testing.assert_allclose(oracle.mean_gradient(theta), reference, atol=1e-12)


def test_step_sizes_make_appendix_b_deltas_vanish() -> None:
    n, sigma = 7, 0.3
    s = step_sizes(n_owners=n, horizon=100, rho=5.0, strong_convexity=sigma)
    sigma_learner, sigma_owner = (1 - s.eta * n) * sigma, s.eta * sigma
    assert s.alpha_learner * sigma_learner == pytest.approx(s.alpha_owner * sigma_owner)
    assert s.alpha_learner * 1.0 == pytest.approx(s.alpha_owner / n)  # γ_L = 1, γ_i = 1/N


def test_learner_update_is_eq_5_and_7() -> None:
    learner = AsyncDPLearner(
        n_records=[10, 30], n_features=2, horizon=4, reg=0.25, theta_max=1.0, rho=2.0
    )
    learner.theta_learner[:] = [0.4, -0.2]
    learner.theta_owners[1] = [0.0, 0.6]
    theta_hat = learner.query(1)
    np.testing.assert_allclose(theta_hat, [0.2, 0.2])
    answer = np.array([1.0, -3.0])
    learner.update(1, theta_hat, answer)
    alpha, sigma, n = 2.0 / 16, 0.5, 2
    grad_g = 0.5 * theta_hat
    owner = np.clip(theta_hat - n * alpha / sigma * (grad_g / (2 * n) + 0.75 * answer), -1, 1)
    central = np.clip(theta_hat - alpha / sigma * 0.5 * grad_g, -1, 1)
    np.testing.assert_allclose(learner.theta_owners[1], owner)
    np.testing.assert_allclose(learner.theta_learner, central)
    np.testing.assert_allclose(learner.theta_owners[0], 0.0)  # other copies untouched


def test_projection_keeps_iterates_in_theta(rng: np.random.Generator) -> None:
    X, y = _data(rng, 40)
    owners = [DataOwner(site=f"o{i}", X=X, y=y, epsilon=1e-3, horizon=50, clip_norm=5.0, theta_max=0.3,
                        rng=rng) for i in range(2)]  # fmt: skip
    learner = AsyncDPLearner(
        n_records=[40, 40], n_features=3, horizon=50, reg=0.01, theta_max=0.3, rho=1.0
    )
    run = simulate_async_dp(owners, learner, rng=rng)
    assert np.abs(run.thetas).max() <= 0.3 and np.abs(learner.theta_owners).max() <= 0.3
    assert np.abs(learner.theta_owners).max() == pytest.approx(
        0.3
    )  # the noise did reach the border
    assert np.array_equal(project([0.5, -0.1, -2.0], 0.3), [0.3, -0.1, -0.3])


@pytest.mark.parametrize("style", ["request", "broadcast"])
def test_nonprivate_limit_converges_to_theta_star(rng: np.random.Generator, style: str) -> None:
    parts = [_data(rng, n) for n in (300, 500, 200)]
    reg, horizon, theta_max = 1e-3, 400, 1.0
    xi = gradient_norm_bound(x_l1_bound=1.5, y_abs_bound=1.0, theta_max=theta_max)
    owners = [DataOwner(site=f"o{i}", X=X, y=y, epsilon=1e12, horizon=horizon, clip_norm=xi,
                        theta_max=theta_max, rng=rng)
              for i, (X, y) in enumerate(parts)]  # fmt: skip
    rho = choose_rho(
        curvature=2 / 12, n_owners=3, horizon=horizon, strong_convexity=2 * reg, contraction=8
    )
    learner = AsyncDPLearner(n_records=[300, 500, 200], n_features=3, horizon=horizon, reg=reg,
                             theta_max=theta_max, rho=rho)  # fmt: skip
    run = simulate_async_dp(owners, learner, rng=rng, style=style)
    pooled = FitnessStatistics.pooled(
        [FitnessStatistics.from_data(X, y, reg=reg) for X, y in parts]
    )
    psi = relative_fitness(
        learner.theta_learner, pooled, optimal_parameters(pooled, theta_max=theta_max)
    )
    assert 0 <= psi < 1e-4
    assert np.all(np.diff(run.times) > 0) and sorted(set(run.owners.tolist())) == [0, 1, 2]
    counts = np.bincount(run.owners, minlength=3)
    assert stats.chisquare(counts).pvalue > 1e-3  # uniform choice of the answering owner
    assert sum(o.answers_given for o in owners) == horizon


def test_learner_rejects_bad_input() -> None:
    learner = AsyncDPLearner(
        n_records=[5, 5], n_features=2, horizon=3, reg=0.1, theta_max=1.0, rho=1.0
    )
    with pytest.raises(DataValidationError):
        learner.update(2, np.zeros(2), np.zeros(2))
    with pytest.raises(DataValidationError):
        learner.update(0, np.zeros(2), np.array([np.inf, 0.0]))
    assert learner.iteration == 0 and not learner.theta_learner.any()


def test_accountant_at_small_delta_vs_pure_composition() -> None:
    # T Laplace answers of noise multiplier T/ε_i: pure DP composes to exactly ε_i at δ = 0 (the
    # paper's accounting); the PLD accountant gives (ε, δ) guarantees below ε_i for δ > 0.
    many = DPEvent(mechanism="laplace", noise_multiplier=1000.0, count=1000)
    assert compute_epsilon([many], 1e-12) == pytest.approx(0.197, abs=0.005)
    assert compute_epsilon([many], 1e-6) == pytest.approx(0.116, abs=0.005)
    one = DPEvent(mechanism="laplace", noise_multiplier=1.0, count=1)
    assert compute_epsilon([one], 1e-12) == pytest.approx(1.0, abs=1e-3)
