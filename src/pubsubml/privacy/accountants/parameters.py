"""The parameters of (ε, δ)-DP: the consortium's default δ and the checks of ε and δ.

References
----------
pubsub-ml.txt §3.1 (Definition 1, (ε, δ)-DP).
"""

from __future__ import annotations

import math

import numpy as np

from pubsubml.errors import InvalidPrivacyParameterError

__all__ = ["DEFAULT_DELTA", "check_delta", "check_epsilon"]

#: The consortium's default δ of (ε, δ)-DP (pubsub-ml.txt §3.1, Definition 1): the default of every
#: approximate-DP learner (``DPMLPClassifier``, ``DPSGDLogisticRegression``, …) and of the DP
#: federated baselines, so that methods compared with their defaults run at the same δ.  It must
#: stay below 1/n for every protected data set (:func:`check_delta`): 1e-5 holds up to 99,999
#: records per site (or clients, for client-level DP).
DEFAULT_DELTA: float = 1e-5


def check_epsilon(epsilon: float) -> None:
    """Raise unless ``0 < epsilon < inf``.

    Raises
    ------
    InvalidPrivacyParameterError
        If ε is not a finite number above 0 (pubsub-ml.txt §3.1, Definition 1).

    Examples
    --------
    >>> check_epsilon(1.0)
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float | np.integer | np.floating):
        raise InvalidPrivacyParameterError(f"epsilon must be a number, got {epsilon!r}")
    if not 0.0 < epsilon < math.inf:
        raise InvalidPrivacyParameterError(f"epsilon must be finite and > 0, got {epsilon}")


def check_delta(delta: float, n_samples: int | None = None) -> None:
    """Raise unless ``0 < delta < 1`` and, when ``n_samples`` is given, ``delta < 1 / n_samples``.

    Parameters
    ----------
    delta : float
        The δ of (ε, δ)-DP.
    n_samples : int, optional
        Number of records protected.  δ ≥ 1/n permits releasing one record in the clear.

    Raises
    ------
    InvalidPrivacyParameterError
        On δ outside (0, 1), δ ≥ 1/n, or n < 1 (pubsub-ml.txt §3.1, Definition 1).

    Examples
    --------
    >>> check_delta(1e-5, n_samples=500)
    """
    if isinstance(delta, bool) or not isinstance(delta, int | float):
        raise InvalidPrivacyParameterError(f"delta must be a number, got {delta!r}")
    if not 0.0 < delta < 1.0:
        raise InvalidPrivacyParameterError(f"delta must be in (0, 1), got {delta}")
    if n_samples is not None:
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
            raise InvalidPrivacyParameterError(f"n_samples must be an int >= 1, got {n_samples!r}")
        if delta >= 1.0 / n_samples:
            raise InvalidPrivacyParameterError(
                f"delta={delta} must be < 1/n = {1.0 / n_samples:.3g} for n={n_samples} records"
            )
