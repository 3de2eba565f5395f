"""The pure accountant: basic composition of pure ε-DP events, at δ = 0.

A model trained by pure ε-DP mechanisms (diffprivlib's models: Laplace noise, or mechanisms known
by (ε_i, 0)) has ε = Σ count·ε_i, the sum of its mechanisms' ε (basic composition), with no δ.
No tighter (ε, δ) accountant applies at δ = 0.

References
----------
pubsub-ml.txt §3.1 (Definition 1 at δ = 0); Dwork & Roth, "The algorithmic foundations of
differential privacy", 2014 (basic composition).
"""

from __future__ import annotations

from collections.abc import Sequence

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.accountants.accountant import PrivacyAccountant
from pubsubml.privacy.accountants.composition import is_mixed
from pubsubml.privacy.events import DPEvent

__all__ = ["PurePrivacyAccountant"]


def _basic_term(event: DPEvent, runs: float) -> float:
    """ε of ``runs`` runs of a pure ε-DP event: ``runs``·ε_i for an ``approx_dp`` event with
    δ_i = 0, ``runs``/b for a Laplace event (b = noise multiplier, scale over L1 sensitivity).

    Raises
    ------
    InvalidPrivacyParameterError
        The event is not pure ε-DP.
    """
    if event.mechanism == "approx_dp" and event.delta == 0.0 and event.epsilon is not None:
        return runs * event.epsilon
    if event.mechanism == "laplace" and event.noise_multiplier is not None:
        return runs / event.noise_multiplier
    raise InvalidPrivacyParameterError(
        f"a {event.mechanism} event with δ = {event.delta} is not pure ε-DP; account it at δ > 0"
    )


class PurePrivacyAccountant(PrivacyAccountant):
    """Basic composition of pure ε-DP events at δ = 0 (diffprivlib's models).

    Notes
    -----
    ε = Σ count·ε_i for ``approx_dp`` events with δ_i = 0 and Σ count/b for ``laplace`` events.
    When the events hold both neighbouring relations, the add/remove events count twice (group
    privacy of two neighbouring steps) and ε holds for replace-one neighbours, as with the
    (ε, δ) accountants.

    Examples
    --------
    >>> e = DPEvent(mechanism="approx_dp", epsilon=0.5, delta=0.0)
    >>> PurePrivacyAccountant.epsilon_of([e, e], 0.0)
    1.0
    """

    @classmethod
    def mechanism(cls) -> str:
        return "pure"

    @classmethod
    def epsilon_of(cls, events: Sequence[DPEvent], delta: float) -> float:
        """ε of the basic composition of pure ε-DP ``events`` (0.0 for none), at δ = 0.

        Raises
        ------
        InvalidPrivacyParameterError
            δ ≠ 0, or an event that is not pure ε-DP.
        """
        if delta != 0.0:
            raise InvalidPrivacyParameterError(f"pure ε-DP accounting is at δ = 0, got δ = {delta}")
        total = 0.0
        mixed = is_mixed(events)
        for e in events:
            factor = 2.0 if mixed and e.neighbouring == "add_remove" else 1.0
            total += _basic_term(e, factor * e.count)
        return total
