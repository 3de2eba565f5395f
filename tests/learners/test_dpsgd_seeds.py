"""Each site's generator and noise source in a DP-SGD fit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pubsubml.learners.dpsgd_seeds import noise_sources, site_generators
from pubsubml.privacy.noise import SecureNoise, SeededNoise


def _draws(generators: list[torch.Generator]) -> list[float]:
    return [float(torch.rand(1, generator=g)) for g in generators]


def test_a_site_generator_depends_only_on_the_seed_and_its_index() -> None:
    all_at_once = _draws(site_generators(7, 4))
    in_batches = _draws(site_generators(7, 2)) + _draws(site_generators(7, 2, first=2))

    assert all_at_once == in_batches
    assert len(set(all_at_once)) == 4
    assert _draws(site_generators(8, 1)) != all_at_once[:1]


def test_numpy_generators_are_accepted_and_negative_seeds_refused() -> None:
    assert len(site_generators(np.random.default_rng(0), 2)) == 2
    assert len(site_generators(np.random.RandomState(0), 2)) == 2
    with pytest.raises(ValueError, match="random_state"):
        site_generators(-1, 1)


def test_noise_is_secure_without_a_noise_seed() -> None:
    sources = noise_sources(0, None, site_generators(0, 3), 0)

    assert all(isinstance(s, SecureNoise) for s in sources)


def test_a_noise_seed_equal_to_the_random_state_shares_the_site_generator() -> None:
    generators = site_generators(5, 2)
    shared = noise_sources(5, 5, generators, 0)
    own = noise_sources(5, 6, site_generators(5, 2), 0)

    assert all(isinstance(s, SeededNoise) for s in shared + own)
    assert [s.generator for s in shared] == generators
    assert all(s.generator is not g for s, g in zip(own, generators, strict=True))
