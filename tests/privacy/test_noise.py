"""Secure and seeded DP randomness (pubsubml.privacy.noise) and the engine that draws from it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.dpsgd import DPSGDConfig, MLPStack, init_mlp, train_dp, train_dp_stacked
from pubsubml.privacy.noise import (
    SecureNoise,
    SecureRandom,
    SeededNoise,
    check_noise_seed,
    noise_kind,
)


def test_uniforms_lie_in_the_open_unit_interval_and_two_sources_never_agree() -> None:
    a, b = SecureRandom(), SecureRandom()
    u = a.uniform(100_000)
    assert u.dtype == np.float64 and 0.0 < u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01
    assert not np.array_equal(a.uniform(8), b.uniform(8))


@pytest.mark.parametrize(("n", "p"), [(50_000, 0.002), (500, 0.2), (100, 0.9), (7, 0.5)])
def test_bernoulli_masks_have_rate_p_at_every_position(n: int, p: float) -> None:
    rng = SecureRandom()
    masks = np.array([rng.bernoulli(n, p) for _ in range(400)])
    se = math.sqrt(p * (1 - p) / masks.size)
    assert abs(masks.mean() - p) < 5 * se
    per_position = masks.mean(axis=0)  # no position is favoured (the gaps restart correctly)
    assert abs(per_position[: min(n, 5)].mean() - p) < 5 * math.sqrt(p * (1 - p) / 2000)


def test_bernoulli_edge_rates() -> None:
    rng = SecureRandom()
    assert rng.bernoulli(9, 1.0).all() and not rng.bernoulli(9, 0.0).any()
    assert rng.bernoulli(0, 0.5).shape == (0,)


def test_hardened_gaussian_has_unit_variance_and_normal_tails() -> None:
    z = SecureRandom().standard_normal(400_000)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    assert abs((z**4).mean() - 3.0) < 0.1  # kurtosis of a normal law
    assert abs((np.abs(z) > 1.96).mean() - 0.05) < 0.003


def test_integers_and_choice_stay_in_range() -> None:
    rng = SecureRandom()
    draws = [rng.integers(3) for _ in range(600)]
    assert set(draws) == {0, 1, 2}
    picks = [rng.choice(3, np.array([0.0, 1.0, 0.0])) for _ in range(20)]
    assert picks == [1] * 20
    with pytest.raises(ValueError, match="high"):
        rng.integers(0)


def test_seeded_noise_draws_what_the_generator_draws() -> None:
    src = SeededNoise(torch.Generator().manual_seed(3))
    ref = torch.Generator().manual_seed(3)
    assert torch.equal(src.poisson_mask(50, 0.3), torch.rand(50, generator=ref) < 0.3)
    out = src.normal_(torch.empty(4))
    assert torch.equal(out, torch.randn(4, generator=ref))


def test_noise_seed_validation_and_kinds() -> None:
    assert check_noise_seed(None) == "secure" and check_noise_seed(np.int64(2)) == "seeded"
    for bad in (True, -1, 1.5, "0", np.random.default_rng(0)):
        with pytest.raises(InvalidPrivacyParameterError, match="noise_seed"):
            check_noise_seed(bad)
    assert noise_kind([SecureNoise(), SecureNoise()]) == "secure"
    assert noise_kind([SecureNoise(), SeededNoise(torch.Generator())]) == "seeded"


def _stack_run(noise: list[object] | None) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    X = torch.rand(64, 3, generator=torch.Generator().manual_seed(1))
    y = (X[:, 0] > 0.5).long()
    stack = MLPStack.init((3, 4, 2), "tanh", [g])
    config = DPSGDConfig(noise_multiplier=1.0, max_grad_norm=1.0, batch_size=16, epochs=1)
    result = train_dp_stacked(stack, [X], [y], configs=config, generators=[g], noise=noise)  # type: ignore[arg-type]
    assert result[0].noise == ("seeded" if noise is None else "secure")
    return torch.cat([p.detach().flatten() for p in result[0].module.parameters()])


def test_the_engine_draws_secure_noise_when_given_a_secure_source() -> None:
    seeded = [_stack_run(None) for _ in range(2)]
    secure = [_stack_run([SecureNoise()]) for _ in range(2)]
    assert torch.equal(seeded[0], seeded[1])
    assert not torch.equal(secure[0], secure[1]) and not torch.equal(secure[0], seeded[0])


def test_the_generic_path_reports_its_noise_source() -> None:
    X = torch.rand(32, 2)
    y = (X[:, 0] > 0.5).long()
    config = DPSGDConfig(noise_multiplier=1.0, max_grad_norm=1.0, batch_size=8, epochs=1)
    module = init_mlp((2, 2), "tanh", torch.Generator().manual_seed(0))
    result = train_dp(module, X, y, config=config, generator=torch.Generator(), noise=SecureNoise())
    assert result.noise == "secure" and result.steps == 4
