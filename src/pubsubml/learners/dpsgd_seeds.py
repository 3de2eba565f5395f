"""Each site's random sources in a DP-SGD fit: its generator and its noise source.

Site ``i`` of a population takes the ``i``-th child of ``SeedSequence(random_state)`` for its
initial weights (and the shuffles of a non-private run), and draws its Poisson sampling and noise
from a secure source, or, in a simulation with a ``noise_seed``, from the ``i``-th child of
``noise_seed``.  So every site's model depends only on its own data and seeds, and a population
trained in batches gives the models of one call over all of it
(:func:`~pubsubml.learners.dpsgd_base.fit_many`).

References
----------
pubsub-ml.txt §8.2.3–8.2.4 (many publishers); :mod:`pubsubml.privacy.noise` (secure and seeded
noise).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pubsubml.privacy.noise import NoiseSource, SecureNoise, SeededNoise, check_noise_seed

__all__ = ["noise_sources", "site_generators"]


def site_generators(random_state: Any, n_sites: int, first: int = 0) -> list[torch.Generator]:
    """One torch generator per site, the children ``first … first + n_sites - 1`` of
    ``SeedSequence(random_state).spawn`` (child 0 is what ``fit`` uses)."""
    if isinstance(random_state, np.random.RandomState):
        entropy: Any = int(random_state.randint(0, 2**31 - 1))
    elif isinstance(random_state, np.random.Generator):
        entropy = int(random_state.integers(0, 2**63 - 1))
    elif random_state is None or (isinstance(random_state, int | np.integer) and random_state >= 0):
        entropy = None if random_state is None else int(random_state)
    else:
        raise ValueError(
            f"random_state must be None, an int >= 0 or a numpy generator, got {random_state!r}"
        )
    root = np.random.SeedSequence(entropy)
    children = [
        np.random.SeedSequence(root.entropy, spawn_key=(first + i,)) for i in range(n_sites)
    ]
    return [torch.Generator().manual_seed(int(c.generate_state(1, np.uint64)[0])) for c in children]


def noise_sources(
    random_state: Any,
    noise_seed: int | None,
    generators: list[torch.Generator],
    first: int,
) -> list[NoiseSource]:
    """Each site's source of Poisson draws and noise: secure unless ``noise_seed`` is given.

    With ``noise_seed`` equal to ``random_state`` the site's one generator draws the initial
    weights and then the noise (a single-seed simulation); another ``noise_seed`` spawns its own
    generators.
    """
    if check_noise_seed(noise_seed) == "secure":
        return [SecureNoise() for _ in generators]
    same = isinstance(random_state, int | np.integer) and int(random_state) == noise_seed
    seeded = generators if same else site_generators(noise_seed, len(generators), first)
    return [SeededNoise(g) for g in seeded]
