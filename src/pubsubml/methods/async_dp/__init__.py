"""Asynchronous DP learning with Laplace-noised gradient queries (async-dp-cost-of-privacy.txt).

* :mod:`~pubsubml.methods.async_dp.learner`: Algorithm 1, the learner and the data owners;
* :mod:`~pubsubml.methods.async_dp.theory`: Ξ, the Laplace scale, Π_Θ and the step sizes;
* :mod:`~pubsubml.methods.async_dp.oracle`: the owners' gradient of Eq. 3;
* :mod:`~pubsubml.methods.async_dp.simulation`: one-process simulation with Poisson clocks;
* :mod:`~pubsubml.methods.async_dp.peers`: the learner and every owner in their own process;
* :mod:`~pubsubml.methods.async_dp.cost`: the cost of privacy, Theorem 2 and its forecast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pubsubml.lazy import attach

if TYPE_CHECKING:
    from pubsubml.methods.async_dp.learner import (
        AsyncDPLearner,
        DataOwner,
        SquaredLossOracle,
        StepSizes,
        answer_gradient_query,
    )
    from pubsubml.methods.async_dp.simulation import AsyncDPRun, simulate_async_dp

__all__ = [
    "AsyncDPLearner",
    "AsyncDPRun",
    "DataOwner",
    "SquaredLossOracle",
    "StepSizes",
    "answer_gradient_query",
    "simulate_async_dp",
]

__getattr__, __dir__ = attach(__name__, __file__)
