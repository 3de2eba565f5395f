"""Shared pytest configuration."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator so every test is reproducible."""
    return np.random.default_rng(0)
