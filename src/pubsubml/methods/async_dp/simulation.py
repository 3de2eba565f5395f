"""One-process simulation of Algorithm 1 with independent rate-1 Poisson clocks.

The owners and the learner are the objects of :mod:`pubsubml.methods.async_dp.learner`, the same ones the
multi-process mode (:mod:`pubsubml.methods.async_dp.peers`) runs in separate processes.

References
----------
async-dp-cost-of-privacy.txt §3 (Poisson clocks, the two communication styles, Algorithm 1).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from pubsubml.errors import DataValidationError
from pubsubml.methods.async_dp.learner import AsyncDPLearner, DataOwner
from pubsubml.methods.async_dp.theory import check_positive

__all__ = ["AsyncDPRun", "simulate_async_dp"]

Style = Literal["broadcast", "request"]


@dataclasses.dataclass(frozen=True)
class AsyncDPRun:
    """What one run of Algorithm 1 did.

    Attributes
    ----------
    owners : ndarray of shape (T,)
        i_k, the owner that answered at iteration k.
    times : ndarray of shape (T,)
        t_k in units of the owners' mean clock period (rate-1 Poisson clocks).
    thetas : ndarray of shape (T, p)
        θ_L,k after each iteration.
    """

    owners: np.ndarray
    times: np.ndarray
    thetas: np.ndarray


def simulate_async_dp(
    owners: Sequence[DataOwner],
    learner: AsyncDPLearner,
    *,
    rng: np.random.Generator,
    style: Style = "request",
    broadcast_interval: float = 1.0,
) -> AsyncDPRun:
    """Run Algorithm 1 for T iterations in one process, with independent rate-1 Poisson clocks.

    ``style="request"``: the learner listens; the owner whose clock fires first requests an update.
    ``style="broadcast"``: the learner broadcasts a query every ``broadcast_interval`` time units
    (once the previous update is over); the first owner whose clock fires after the broadcast
    answers.  In both styles every owner is the next one with probability 1/N (§3).

    Parameters
    ----------
    owners : sequence of DataOwner
        In the learner's owner order.
    learner : AsyncDPLearner
        A single-run learner (``replicas=None``).
    rng : numpy.random.Generator
        Drives the clocks (each owner has its own noise generator).
    style : {"request", "broadcast"}, default="request"
    broadcast_interval : float, default=1.0

    Returns
    -------
    AsyncDPRun

    Raises
    ------
    DataValidationError
        If the owners do not match the learner.
    PrivacyBudgetExceededError
        If an owner's horizon is shorter than the learner's and it runs out.
    """
    if learner.replicas is not None or len(owners) != learner.n_owners:
        raise DataValidationError(
            "simulate_async_dp needs a single-run learner with one entry per owner"
        )
    if [o.n_records for o in owners] != learner.n_records.tolist():
        raise DataValidationError("owners' n_records do not match the learner's")
    if style not in ("request", "broadcast"):
        raise DataValidationError(f"style must be 'request' or 'broadcast', got {style!r}")
    interval = check_positive("broadcast_interval", broadcast_interval)
    fire = rng.exponential(1.0, size=learner.n_owners)
    now = 0.0
    picked, times, thetas = [], [], []
    for _ in range(learner.horizon):
        if style == "broadcast":
            now = (
                math.ceil(now / interval + 1e-12) * interval
            )  # next broadcast after the last update
            late = fire < now  # memoryless clocks: restart those that fired while nobody listened
            fire[late] = now + rng.exponential(1.0, size=int(late.sum()))
        i = int(np.argmin(fire))
        now = float(fire[i])
        fire[i] += rng.exponential(1.0)
        theta_hat = learner.query(i)
        learner.update(i, theta_hat, owners[i].answer(theta_hat))
        picked.append(i)
        times.append(now)
        thetas.append(learner.theta_learner.copy())
    return AsyncDPRun(owners=np.asarray(picked), times=np.asarray(times), thetas=np.asarray(thetas))
