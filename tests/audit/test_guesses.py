"""Guesses and threshold tests: from scores to an ε lower bound."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pubsubml.audit.guesses import (
    dirac_scores,
    draw_inclusion,
    many_run_bound,
    many_run_result,
    one_run_bound,
)


def test_one_run_bound_grows_with_the_separation_of_the_scores() -> None:
    rng = np.random.default_rng(1)
    included = draw_inclusion(2000, rng)
    noise = rng.normal(size=2000)
    bounds = [
        one_run_bound(included * gap + noise, included, 1e-5).lower_bound for gap in (0, 2, 8)
    ]
    assert bounds[0] == 0.0 and bounds[0] < bounds[1] < bounds[2]


def test_many_run_bound_is_zero_for_indistinguishable_runs_and_counts_the_scored_half() -> None:
    rng = np.random.default_rng(2)
    test = many_run_bound(rng.normal(size=1000), rng.normal(size=1000))
    assert test.lower_bound == 0.0
    assert test.scored == 1000 and 0 <= test.correct <= 1000


def test_many_run_bound_of_laplace_shift_is_below_the_true_epsilon() -> None:
    # one Laplace release of scale 1 shifted by 1 is exactly 1-DP
    rng = np.random.default_rng(3)
    test = many_run_bound(rng.laplace(0, 1, 20_000), rng.laplace(1, 1, 20_000))
    assert 0.5 < test.lower_bound <= 1.0


def test_many_run_bound_refuses_unequal_or_tiny_samples() -> None:
    with pytest.raises(ValueError, match="equal samples"):
        many_run_bound(np.zeros(10), np.zeros(9))
    with pytest.raises(ValueError, match="equal samples"):
        many_run_bound(np.zeros(2), np.zeros(2))


def test_many_run_bound_splits_discrete_scores() -> None:
    # a vote (0 or 1) that follows the canary: thresholds from both samples find "score > 0"
    test = many_run_bound(np.zeros(4000), np.ones(4000))
    assert test.lower_bound > 6 and test.correct == test.scored


def test_dirac_scores_rank_a_sampled_canary_above_pure_noise() -> None:
    rng = np.random.default_rng(4)
    noise = rng.normal(0, 1.0, (50, 2))
    noise[:, 0] += rng.random(50) < 0.5  # the canary's coordinate, sampled at q = 0.5
    scores = dirac_scores(noise, q=0.5, sigma=1.0)
    assert scores[0] > scores[1]
    with pytest.raises(ValueError, match="sigma"):
        dirac_scores(noise, q=0.5, sigma=0.0)


def test_a_many_run_result_reports_its_test_and_threshold() -> None:
    rng = np.random.default_rng(0)
    test = many_run_bound(rng.normal(0, 1, 400), rng.normal(4, 1, 400))

    result = many_run_result(
        "t",
        "correct",
        test,
        claimed_epsilon=2.0,
        delta=0.0,
        confidence=0.95,
        canary="record",
        runs=400,
        start=time.perf_counter(),
        details={"n_records": 5},
    )

    assert result.method == "many-run" and result.canaries == 400
    assert (result.lower_bound, result.guesses, result.correct) == (
        test.lower_bound,
        test.scored,
        test.correct,
    )
    assert result.details == {"n_records": 5, "threshold": test.threshold}
