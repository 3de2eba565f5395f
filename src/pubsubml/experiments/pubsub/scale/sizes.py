"""The sizes of the Hyperplane scale experiments (pubsub-ml.txt §8.2.3–8.2.4, appendix B).

:class:`ScaleSizes` holds the number of sites, their rows, Table 4's network and the FL baselines'
schedule of one run; :data:`SIZES` names the paper's sizes and a smoke run of seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pubsubml.experiments.base import RunOptions

__all__ = ["SIZES", "Frame", "ScaleSizes", "size_name"]

Frame = tuple[pd.DataFrame, np.ndarray]
"""One site's rows: features and labels."""


@dataclass(frozen=True)
class ScaleSizes:
    """Sizes of a run (Table 4 network; §8 budget ε = 1, δ = 10⁻⁴; §8.2.3 sizes)."""

    n_publishers: int = 1000
    n_subscribers: int = 10
    rows: int = 500
    folds: int = 5
    hidden: tuple[int, ...] = (100, 50)
    epochs: int = 30
    top_ms: tuple[int | None, ...] = (None, 100, 50, 10)
    publisher_counts: tuple[int, ...] = (5, 10, 20, 50, 100, 200, 500, 1000)
    fl_rounds: int = 30
    fl_fraction: float = 0.1
    fine_tune_epochs: int = 30
    epsilon: float = 1.0
    delta: float = 1e-4


SIZES: dict[str, ScaleSizes] = {
    "full": ScaleSizes(),
    "smoke": ScaleSizes(
        n_publishers=6,
        n_subscribers=2,
        rows=60,
        folds=2,
        hidden=(8,),
        epochs=2,
        top_ms=(None, 4, 2),
        publisher_counts=(2, 6),
        fl_rounds=2,
        fl_fraction=0.5,
        fine_tune_epochs=2,
    ),
}
"""Named sizes: ``full`` (the paper's sizes, 10 subscribers) and ``smoke`` (seconds)."""


def size_name(opts: RunOptions) -> str:
    """The key in :data:`SIZES` of a run: ``"smoke"`` with ``--smoke``, else ``"full"``."""
    return "smoke" if opts.smoke else "full"
