"""The (ε, δ) accountants' shared composition: arguments checked, events grouped, ε cached.

:class:`ApproximateDPAccountant` is the base of the accountants that report ε at a δ in (0, 1)
(:class:`~pubsubml.privacy.accountants.pld.PLDPrivacyAccountant`,
:class:`~pubsubml.privacy.accountants.rdp.RDPPrivacyAccountant`): a subclass gives the ε of
grouped events of one neighbouring relation (:meth:`ApproximateDPAccountant.grouped_epsilon`);
this class checks δ, groups the events, converts a composition of both neighbouring relations
(:func:`~pubsubml.privacy.accountants.composition.replace_one_epsilon`) and caches every ε per
(accountant, events, δ).

References
----------
pubsub-ml.txt §3.1 (Definition 1, (ε, δ)-DP; Theorem 2, post-processing: ε is fixed by the
mechanisms that touched the data, never by what is done with their output).
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Sequence

from pubsubml.privacy.accountants.accountant import PrivacyAccountant
from pubsubml.privacy.accountants.composition import group_events, is_mixed, replace_one_epsilon
from pubsubml.privacy.accountants.parameters import check_delta
from pubsubml.privacy.events import DPEvent

__all__ = ["ApproximateDPAccountant"]


class ApproximateDPAccountant(PrivacyAccountant):
    """An accountant of (ε, δ)-DP at δ in (0, 1); subclasses give :meth:`grouped_epsilon`.

    Notes
    -----
    The bound holds for the events' neighbouring relation
    (:func:`~pubsubml.privacy.accountants.composition.neighbouring_of`): add/remove one record
    (pubsub-ml.txt §3.1, Definition 1) when every event is ``"add_remove"``, replace one record
    when every event is ``"replace_one"``.  Events of both relations are composed for
    replace-one neighbours, the weaker notion, after converting the add/remove events
    (replacing is removing then adding): a Gaussian or Laplace event keeps its mechanism with
    half its noise multiplier (the sensitivity at most doubles); the other add/remove events
    are composed at a share δ_A of δ and their (ε_A, δ_A) becomes (2ε_A, (1 + e^ε_A)·δ_A), with
    (1 + e^ε_A)·δ_A ≤ δ/2.  The reverse conversion does not exist (a replace-one guarantee
    says nothing about adding a record), so a mixed composition is never reported as
    add/remove.
    """

    @classmethod
    def epsilon_of(cls, events: Sequence[DPEvent], delta: float) -> float:
        """ε at δ ∈ (0, 1) of the sequential composition of ``events`` (0.0 for none).

        Raises
        ------
        InvalidPrivacyParameterError
            On δ outside (0, 1) or a non-DPEvent.
        """
        check_delta(delta)
        grouped = group_events(events)
        if is_mixed(grouped):
            return replace_one_epsilon(grouped, float(delta), functools.partial(_cached, cls))
        return _cached(cls, grouped, float(delta))

    @classmethod
    @abc.abstractmethod
    def grouped_epsilon(cls, events: tuple[DPEvent, ...], delta: float) -> float:
        """ε at a valid δ of non-empty grouped events that share one neighbouring relation."""


@functools.lru_cache(maxsize=4096)
def _cached(
    accountant: type[ApproximateDPAccountant], events: tuple[DPEvent, ...], delta: float
) -> float:
    """ε of grouped events by ``accountant``, cached: a ledger recomposes the same groups."""
    if not events:
        return 0.0
    return accountant.grouped_epsilon(events, delta)
