"""Fixtures shared by the site commands' tests (``test_site.py``, ``test_train.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site's folder: 300 labelled rows of three features, public bounds of four."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (300, 3))
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"])
    frame["y"] = (X[:, 0] + X[:, 1] > 1).astype(int)
    frame.to_csv(tmp_path / "a.csv", index=False)
    bounds = {f"x{i}": {"lower": 0, "upper": 1, "default": 0.5} for i in range(4)}
    (tmp_path / "bounds.json").write_text(json.dumps(bounds))
    return tmp_path
