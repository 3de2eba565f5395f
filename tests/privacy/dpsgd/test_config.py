"""Tests of pubsubml.privacy.dpsgd.config: DPSGDConfig and TrainResult."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.dpsgd.config import DPSGDConfig, TrainResult
from pubsubml.privacy.events import DPEvent


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _close(actual: Tensor, expected: Tensor | None) -> None:
    assert expected is not None
    np.testing.assert_allclose(
        actual.detach().numpy(), expected.detach().numpy(), rtol=1e-7, atol=1e-12
    )


@pytest.mark.parametrize(
    ("config", "n", "rate", "steps"),
    [
        (DPSGDConfig(batch_size=100, epochs=3), 500, 0.2, 15),
        (DPSGDConfig(batch_size=100, epochs=2), 250, 0.4, 4),  # 1/q = 2.5 rounds to 2
        (DPSGDConfig(batch_size=100, epochs=2), 350, 100 / 350, 8),  # 1/q = 3.5 rounds to 4
        (DPSGDConfig(batch_size=100, epochs=3), 40, 1.0, 3),  # a batch above n: q = 1
        (DPSGDConfig(sample_rate=0.3, batch_size=7, epochs=2), 1000, 0.3, 6),
        (DPSGDConfig(sample_rate=0.3, batch_size=40, epochs=2, private=False), 100, 0.4, 6),
        (DPSGDConfig(batch_size=30, epochs=4, private=False), 100, 0.3, 16),
    ],
)
def test_sample_rate_and_steps(config: DPSGDConfig, n: int, rate: float, steps: int) -> None:
    assert config.sample_rate_for(n) == pytest.approx(rate, rel=1e-15)
    assert config.steps_for(n) == steps


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"noise_multiplier": math.nan}, InvalidPrivacyParameterError),
        ({"noise_multiplier": math.inf}, InvalidPrivacyParameterError),
        ({"max_grad_norm": math.inf}, InvalidPrivacyParameterError),
        ({"max_grad_norm": -1.0}, InvalidPrivacyParameterError),
        ({"sample_rate": 0.0}, InvalidPrivacyParameterError),
        ({"batch_size": True}, ValueError),
        ({"batch_size": 10.0}, ValueError),
        ({"epochs": 2.5}, ValueError),
        ({"lr": math.nan}, ValueError),
        ({"lr": math.inf}, ValueError),
        ({"lr": 0.0}, ValueError),
    ],
)
def test_config_refuses_non_finite_and_mistyped_values(
    kwargs: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        DPSGDConfig(**kwargs)  # type: ignore[arg-type]


def test_config_accepts_zero_noise_and_a_full_sample_rate() -> None:
    config = DPSGDConfig(noise_multiplier=0.0, sample_rate=1.0, epochs=2)

    assert config.steps_for(10) == 2


def test_config_is_immutable() -> None:
    config = DPSGDConfig()

    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epochs = 3  # type: ignore[misc]


def _result(private: bool, sigma: float) -> TrainResult:
    return TrainResult(
        module=nn.Linear(2, 2),
        steps=12,
        sample_rate=0.25,
        noise_multiplier=sigma,
        max_grad_norm=1.0 if private else math.inf,
        private=private,
        batch_sizes=torch.zeros(12, dtype=torch.long),
    )


def test_private_run_is_one_subsampled_gaussian_event_per_step() -> None:
    events = _result(True, 1.3).events

    assert events == [
        DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.3, sample_rate=0.25, count=12)
    ]


def test_private_run_without_noise_has_no_guarantee() -> None:
    with pytest.raises(InvalidPrivacyParameterError):
        _ = _result(True, 0.0).events


def test_non_private_run_has_no_events_whatever_its_noise() -> None:
    assert _result(False, 0.0).events == []
    assert _result(False, 2.0).events == []
