"""Personalized learning via stacking (pfl-stacking.txt §3).

:mod:`~pubsubml.methods.stacking.personalizer` holds the method: clients publish DP models, each
client stacks the models it receives on its own data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.methods.stacking.personalizer import (
        StackingPersonalizer,
        dp_median,
        dp_mode,
        hybrid_partition,
        release_dp_defaults,
        vertical_partition,
    )

__all__ = [
    "StackingPersonalizer",
    "dp_median",
    "dp_mode",
    "hybrid_partition",
    "release_dp_defaults",
    "vertical_partition",
]

__getattr__, __dir__ = attach(__name__, __file__)
