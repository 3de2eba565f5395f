"""Tests of pubsubml.privacy.calibration: σ never overshoots the target and is nearly tight."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy import DPEvent, calibrate_noise, compute_epsilon

DELTA = 1e-5


def _epsilon(sigma: float, q: float, steps: int, backend: str = "pld") -> float:
    event = DPEvent(
        mechanism="subsampled_gaussian", noise_multiplier=sigma, sample_rate=q, count=steps
    )
    return compute_epsilon([event], DELTA, backend=backend)  # type: ignore[arg-type]


@pytest.mark.parametrize("target", [0.5, 2.0])
def test_pld_calibration_is_tight_and_never_overshoots(target: float) -> None:
    # Prepare: a site with 500 rows and expected batch 100 → q = 0.2; 4 epochs → 20 steps.
    q, steps = 0.2, 20

    # Execute
    sigma = calibrate_noise(target, DELTA, q, steps)

    # Assert: within budget, and 1% less noise would exceed it.
    assert _epsilon(sigma, q, steps) <= target
    assert _epsilon(0.99 * sigma, q, steps) > target


def test_rdp_calibration_is_tight_and_never_overshoots() -> None:
    q, steps, target = 0.05, 100, 1.0
    sigma = calibrate_noise(target, DELTA, q, steps, accountant="rdp")
    assert _epsilon(sigma, q, steps, "rdp") <= target
    assert _epsilon(0.99 * sigma, q, steps, "rdp") > target
    # RDP is conservative: its σ is at least the PLD σ for the same target.
    assert sigma >= calibrate_noise(target, DELTA, q, steps)


@settings(max_examples=5, deadline=None, derandomize=True)
@given(
    target=st.floats(min_value=0.3, max_value=6.0),
    q=st.floats(min_value=0.01, max_value=0.3),
    steps=st.integers(min_value=10, max_value=200),
)
def test_calibration_never_overshoots(target: float, q: float, steps: int) -> None:
    sigma = calibrate_noise(target, DELTA, q, steps)
    eps = _epsilon(sigma, q, steps)
    assert eps <= target
    # The documented stop: ε within 0.3 % of the target, or σ pinned within 0.2 %.
    assert eps >= target * (1 - 3e-3) or _epsilon(sigma * math.exp(-2e-3), q, steps) > target


@pytest.mark.parametrize(
    "kwargs",
    [
        {"target_epsilon": 0.0},
        {"target_epsilon": -1.0},
        {"target_epsilon": float("inf")},
        {"delta": 1.0},
        {"delta": 0.0},
        {"sample_rate": 0.0},
        {"sample_rate": 1.5},
        {"steps": 0},
        {"accountant": "moments"},
    ],
)
def test_bad_arguments_rejected(kwargs: dict[str, object]) -> None:
    arguments: dict[str, object] = {
        "target_epsilon": 1.0,
        "delta": DELTA,
        "sample_rate": 0.1,
        "steps": 10,
    } | kwargs
    with pytest.raises(InvalidPrivacyParameterError):
        calibrate_noise(**arguments)  # type: ignore[arg-type]
