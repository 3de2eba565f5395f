"""Tests of pubsubml.privacy.mechanisms: noise distributions, events and clipping."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pubsubml.errors import DataValidationError, InvalidPrivacyParameterError
from pubsubml.privacy import clip_by_l2_norm, gaussian_mechanism, laplace_mechanism


def test_gaussian_noise_has_std_sigma_times_sensitivity(rng: np.random.Generator) -> None:
    # Prepare
    value = np.full(20_000, 3.0)

    # Execute
    noisy, event = gaussian_mechanism(value, sensitivity=1.5, noise_multiplier=2.0, rng=rng)

    # Assert: the noise is N(0, (2·1.5)²) by a KS test, and the event says what ran.
    result = stats.kstest(noisy - value, stats.norm(loc=0.0, scale=3.0).cdf)
    assert result.pvalue > 0.01
    assert event.mechanism == "gaussian"
    assert event.noise_multiplier == 2.0
    assert event.count == 1


def test_laplace_noise_has_scale_sensitivity_over_epsilon(rng: np.random.Generator) -> None:
    value = np.zeros((100, 200))
    noisy, event = laplace_mechanism(value, sensitivity=2.0, epsilon=0.5, rng=rng)
    assert noisy.shape == value.shape
    result = stats.kstest(noisy.ravel(), stats.laplace(loc=0.0, scale=4.0).cdf)
    assert result.pvalue > 0.01
    # A wrong scale is detected by the same test.
    assert stats.kstest(noisy.ravel(), stats.laplace(loc=0.0, scale=3.6).cdf).pvalue < 0.01
    assert event.mechanism == "laplace"
    assert event.noise_multiplier == pytest.approx(4.0 / 2.0)


def test_mechanisms_accept_scalars_and_are_reproducible() -> None:
    first, _ = gaussian_mechanism(
        1.0, sensitivity=1.0, noise_multiplier=1.0, rng=np.random.default_rng(7)
    )
    second, _ = gaussian_mechanism(
        1.0, sensitivity=1.0, noise_multiplier=1.0, rng=np.random.default_rng(7)
    )
    assert first.shape == ()
    assert first == second


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sensitivity": 0.0},
        {"sensitivity": -1.0},
        {"sensitivity": float("inf")},
        {"noise_multiplier": 0.0},
        {"noise_multiplier": float("nan")},
        {"rng": 0},
    ],
)
def test_gaussian_bad_parameters_rejected(kwargs: dict[str, object]) -> None:
    arguments: dict[str, object] = {
        "sensitivity": 1.0,
        "noise_multiplier": 1.0,
        "rng": np.random.default_rng(0),
    } | kwargs
    with pytest.raises(InvalidPrivacyParameterError):
        gaussian_mechanism([1.0], **arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("epsilon", [0.0, -0.5, float("inf")])
def test_laplace_bad_epsilon_rejected(epsilon: float, rng: np.random.Generator) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        laplace_mechanism([1.0], sensitivity=1.0, epsilon=epsilon, rng=rng)


@pytest.mark.parametrize("value", [[1.0, np.nan], [np.inf], ["a"]])
def test_non_finite_values_rejected(value: list[object], rng: np.random.Generator) -> None:
    with pytest.raises(DataValidationError):
        gaussian_mechanism(value, sensitivity=1.0, noise_multiplier=1.0, rng=rng)


def test_clip_bounds_every_row_and_keeps_short_rows(rng: np.random.Generator) -> None:
    # Prepare: rows of shape (3, 4) with norms spread around the clip bound, one zero row.
    per_sample = rng.normal(size=(50, 3, 4)) * rng.uniform(0.0, 3.0, size=(50, 1, 1))
    per_sample[0] = 0.0

    # Execute
    clipped = clip_by_l2_norm(per_sample, 2.0)

    # Assert
    before = np.linalg.norm(per_sample.reshape(50, -1), axis=1)
    after = np.linalg.norm(clipped.reshape(50, -1), axis=1)
    assert clipped.shape == per_sample.shape
    assert np.all(after <= 2.0)
    short = before <= 2.0
    np.testing.assert_array_equal(clipped[short], per_sample[short])
    np.testing.assert_allclose(after[~short], 2.0, rtol=1e-12)
    # Directions are kept: clipped rows are positive multiples of the originals.
    cosine = np.einsum("ij,ij->i", clipped.reshape(50, -1)[1:], per_sample.reshape(50, -1)[1:])
    np.testing.assert_allclose(cosine / (after[1:] * before[1:]), 1.0, rtol=1e-12)


def test_clip_float32_and_vector_rows() -> None:
    rows = np.array([[3.0, 4.0]] * 1000, dtype=np.float32) * np.float32(1.0000001)
    clipped = clip_by_l2_norm(rows, 5.0)
    assert clipped.dtype == np.float32
    assert np.all(np.linalg.norm(clipped.astype(np.float64), axis=1) <= 5.0)
    np.testing.assert_array_equal(clip_by_l2_norm(np.array([-3.0, 0.5]), 1.0), [-1.0, 0.5])


@pytest.mark.parametrize("max_norm", [0.0, -1.0, float("inf")])
def test_clip_bad_norm_rejected(max_norm: float) -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        clip_by_l2_norm(np.ones((2, 2)), max_norm)


def test_clip_rejects_scalars_and_nan() -> None:
    with pytest.raises(DataValidationError):
        clip_by_l2_norm(np.float64(1.0), 1.0)  # type: ignore[arg-type]
    with pytest.raises(DataValidationError):
        clip_by_l2_norm(np.array([[np.nan, 1.0]]), 1.0)
