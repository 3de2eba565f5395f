"""Tests of pubsubml.audit.dirac: the audit task, Dirac canaries, negative controls, scoring."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from pubsubml.audit.dirac import (
    DIRAC_NORM,
    REAL_FEATURES,
    broken_run,
    check_count,
    dirac_coordinates,
    dirac_rows,
    dirac_task,
    gaussian_claim,
    mlp_parameter_count,
    one_run_result,
    padded_rows,
    real_rows,
    run_details,
)
from pubsubml.audit.guesses import dirac_scores, draw_inclusion, one_run_bound
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent


def test_real_rows_are_a_seeded_binary_task() -> None:
    X, y = real_rows(300, np.random.default_rng(0))
    X2, y2 = real_rows(300, np.random.default_rng(0))

    assert X.shape == (300, REAL_FEATURES) and y.shape == (300,) and y.dtype == np.int64
    assert set(np.unique(y).tolist()) == {0, 1}
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)


def test_padded_rows_are_the_real_rows_widened_by_zero_columns() -> None:
    X, y = padded_rows(50, REAL_FEATURES + 4, np.random.default_rng(1))
    X_real, y_real = real_rows(50, np.random.default_rng(1))

    assert X.dtype == torch.float32 and X.shape == (50, REAL_FEATURES + 4)
    np.testing.assert_array_equal(X[:, :REAL_FEATURES].numpy(), X_real.astype(np.float32))
    assert bool((X[:, REAL_FEATURES:] == 0).all())
    assert torch.equal(y, torch.from_numpy(y_real))


@pytest.mark.parametrize(("m", "out0", "width"), [(7, 3, 14), (12, 4, 13), (1, 5, 11)])
def test_coordinates_are_distinct_first_layer_weights_on_canary_columns(
    m: int, out0: int, width: int
) -> None:
    net = nn.Sequential(nn.Linear(width, out0), nn.Tanh(), nn.Linear(out0, 2))
    n_params = sum(p.numel() for p in net.parameters())

    coords = dirac_coordinates(m, out0, width)

    assert len(set(coords.tolist())) == m
    for index in coords.tolist():
        flat = torch.zeros(n_params)
        flat[index] = 1.0
        nn.utils.vector_to_parameters(flat, net.parameters())
        rows, cols = net[0].weight.detach().nonzero(as_tuple=True)  # where the flat index lands
        assert len(rows) == 1 and int(cols[0]) >= REAL_FEATURES


def test_dirac_rows_put_ten_clip_norms_on_each_included_canary() -> None:
    coords = torch.tensor([3, 8, 5, 1])
    included = np.array([True, False, True, True])

    rows = dirac_rows(coords, included, n_params=10, clip=0.5)

    assert rows.shape == (3, 10)
    assert rows.nonzero()[:, 1].tolist() == [3, 5, 1]
    np.testing.assert_allclose(rows.norm(dim=1).numpy(), DIRAC_NORM * 0.5, rtol=1e-6)


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        ("correct", (1.2, 0.5)),
        ("noise-off", (0.0, 0.5)),
        ("noise-x0.1", (0.12, 0.5)),
        ("paper-accounting", (1.2, 0.5)),
    ],
)
def test_broken_runs_change_the_noise_or_keep_the_shipped_mechanism(
    variant: str, expected: tuple[float, float]
) -> None:
    assert broken_run(variant, 1.2, 0.5) == pytest.approx(expected)


def test_clip_off_keeps_the_noise_but_does_not_clip() -> None:
    sigma, clip = broken_run("clip-off", 1.2, 0.5)

    assert sigma * clip == pytest.approx(1.2 * 0.5)
    assert clip >= 1e5 * DIRAC_NORM * 0.5  # a Dirac canary of 10·C is far below the new C


def test_one_run_result_reports_the_bound_of_the_canary_scores() -> None:
    rng = np.random.default_rng(0)
    included = rng.random(200) < 0.5
    releases = rng.normal(0.0, 0.3, (5, 200)) + included  # an included canary adds 1 per step

    result = one_run_result(
        "toy",
        "noise-x0.1",
        claimed_epsilon=1.0,
        delta=1e-5,
        releases=releases,
        q=1.0,
        sigma=0.3,
        included=included,
        confidence=0.95,
        start=time.perf_counter(),
        details={"steps": 5},
    )

    bound = one_run_bound(dirac_scores(releases, 1.0, 0.3), included, 1e-5, 0.95)
    assert (result.lower_bound, result.guesses, result.correct) == (
        bound.lower_bound,
        bound.guesses,
        bound.correct,
    )
    assert result.lower_bound > 1.0 and result.violated
    assert (result.method, result.canary, result.canaries) == ("one-run", "gradient", 200)
    assert (result.target, result.variant, result.details) == ("toy", "noise-x0.1", {"steps": 5})


def test_one_run_result_of_pure_noise_has_no_evidence() -> None:
    rng = np.random.default_rng(1)
    included = rng.random(100) < 0.5

    result = one_run_result(
        "toy",
        "correct",
        claimed_epsilon=2.0,
        delta=1e-5,
        releases=rng.normal(0.0, 1.0, (4, 100)),
        q=0.5,
        sigma=1.0,
        included=included,
        confidence=0.95,
        start=time.perf_counter(),
        details={},
        canary="client",
    )

    assert result.lower_bound == 0.0 and not result.violated and result.canary == "client"


@pytest.mark.parametrize("value", [0, -1, 2.0, True, "3", None, math.inf])
def test_check_count_refuses_non_integers_and_small_values(value: Any) -> None:
    with pytest.raises(ValueError, match="canaries"):
        check_count("canaries", value, 1)


def test_check_count_accepts_integers_from_the_minimum() -> None:
    check_count("canaries", 2, 2)
    check_count("canaries", 10**6, 2)


def test_check_count_accepts_numpy_integers() -> None:
    check_count("canaries", np.int64(4), 1)


def test_a_dirac_task_draws_the_rows_then_the_coins_as_the_audits_did() -> None:
    task = dirac_task((30, 12), 9, 4, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    width = REAL_FEATURES + math.ceil(9 / 4)
    first, second = padded_rows(30, width, rng), padded_rows(12, width, rng)

    assert task.width == width and [len(X) for X, _ in task.splits] == [30, 12]
    torch.testing.assert_close(task.splits[0][0], first[0])
    torch.testing.assert_close(task.splits[1][1], second[1])
    np.testing.assert_array_equal(task.included, draw_inclusion(9, rng))
    torch.testing.assert_close(task.coords, dirac_coordinates(9, 4, width))
    torch.testing.assert_close(
        task.gradients(80, 2.0), dirac_rows(task.coords, task.included, 80, 2.0)
    )


def test_claims_details_and_parameter_counts() -> None:
    event = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=1.1, sample_rate=0.05, count=40
    )
    assert gaussian_claim(1.1, 0.05, 40, 1e-5) == compute_epsilon([event], 1e-5)
    assert mlp_parameter_count((3, 4, 2)) == 3 * 4 + 4 + 4 * 2 + 2
    assert run_details("central", 7, 0.1, 1.5, 20, counted="rounds", guarantee="x") == {
        "path": "central",
        "rounds": 7,
        "sample_rate": 0.1,
        "noise_multiplier": 1.5,
        "rows": 20,
        "guarantee": "x",
    }
