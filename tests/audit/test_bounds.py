"""ε lower bounds from membership guesses: one run (Steinke et al. 2023) and many runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pubsubml.audit.bounds import (
    clopper_pearson_upper,
    many_run_epsilon_lower_bound,
    one_run_epsilon_lower_bound,
    one_run_p_value,
)


def test_p_value_without_delta_is_the_binomial_tail_of_randomized_response() -> None:
    p = math.exp(1.0) / (1 + math.exp(1.0))
    assert one_run_p_value(500, 100, 80, 1.0, 0.0) == pytest.approx(stats.binom.sf(79, 100, p))


def test_delta_only_raises_the_p_value() -> None:
    without = one_run_p_value(1000, 200, 150, 1.0, 0.0)
    assert one_run_p_value(1000, 200, 150, 1.0, 1e-5) > without


@pytest.mark.parametrize(("r", "v"), [(100, 100), (200, 170), (500, 300)])
def test_the_bound_is_where_the_p_value_crosses_the_level(r: int, v: int) -> None:
    eps = one_run_epsilon_lower_bound(5000, r, v, 1e-5, 0.95)
    assert eps > 0
    assert one_run_p_value(5000, r, v, eps * 0.999, 1e-5) < 0.05
    assert one_run_p_value(5000, r, v, eps * 1.001 + 1e-9, 1e-5) >= 0.05


def test_more_right_guesses_give_a_larger_bound() -> None:
    bounds = [one_run_epsilon_lower_bound(2000, 200, v, 1e-5) for v in (120, 150, 180, 200)]
    assert bounds == sorted(bounds) and bounds[0] < bounds[-1]


def test_chance_level_guesses_give_zero() -> None:
    assert one_run_epsilon_lower_bound(1000, 200, 100, 1e-5) == 0.0


def test_guesses_of_an_eps_dp_coin_rarely_exceed_eps() -> None:
    # randomized response at ε = 1 is exactly 1-DP: its bound exceeds 1 in at most ~5 % of runs
    rng = np.random.default_rng(0)
    p = math.exp(1.0) / (1 + math.exp(1.0))
    over = sum(
        one_run_epsilon_lower_bound(400, 400, int(rng.binomial(400, p)), 0.0) > 1.0
        for _ in range(200)
    )
    assert over <= 20


def test_clopper_pearson_covers_the_rate() -> None:
    assert clopper_pearson_upper(0, 100, 0.05) == pytest.approx(1 - 0.05 ** (1 / 100))
    assert clopper_pearson_upper(100, 100, 0.05) == 1.0
    assert clopper_pearson_upper(10, 100, 0.05) > 0.1


def test_many_run_bound_of_a_perfect_and_a_useless_test() -> None:
    perfect = many_run_epsilon_lower_bound(0, 1000, 0, 1000, 1e-5)
    rate = 1 - 0.025 ** (1 / 1000)  # each Clopper–Pearson bound at 97.5 %
    assert perfect == pytest.approx(math.log((1 - 1e-5 - rate) / rate))
    assert many_run_epsilon_lower_bound(500, 1000, 500, 1000, 1e-5) == 0.0


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((10, 20, 5, 1.0, 0.0), ValueError),  # r > m
        ((10, 5, 6, 1.0, 0.0), ValueError),  # v > r
        ((10, 5, 3, -1.0, 0.0), ValueError),  # ε < 0
        ((10, 5, 3, 1.0, 1.0), ValueError),  # δ = 1
        ((10.0, 5, 3, 1.0, 0.0), TypeError),  # not an integer
    ],
)
def test_bad_input_is_refused(args: tuple[float, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        one_run_p_value(*args)  # type: ignore[arg-type]


def test_bad_confidence_and_empty_runs_are_refused() -> None:
    with pytest.raises(ValueError, match="confidence"):
        one_run_epsilon_lower_bound(10, 5, 5, 0.0, confidence=1.0)
    with pytest.raises(ValueError, match="at least one run"):
        many_run_epsilon_lower_bound(0, 0, 0, 10, 1e-5)
