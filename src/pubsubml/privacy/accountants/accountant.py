"""The accountant interface: what every privacy accountant records and reports.

An accountant tracks the DP events of one computation (:meth:`PrivacyAccountant.step` for DP-SGD
steps, :meth:`PrivacyAccountant.record` for any other release) and reports ε at a δ
(:meth:`PrivacyAccountant.get_epsilon`).  Each backend is one subclass that owns its math
(:meth:`PrivacyAccountant.epsilon_of`) and names itself (:meth:`PrivacyAccountant.mechanism`);
the registry (:mod:`pubsubml.privacy.accountants.registry`) creates them by that name, as
Opacus' ``IAccountant`` and ``create_accountant`` do.

Every event composes sequentially (the events ran on the same data); parallel composition over
disjoint data chunks is the business of :class:`~pubsubml.privacy.ledger.PrivacyLedger`.

References
----------
pubsub-ml.txt §3.1 (Definition 1, (ε, δ)-DP; Theorem 2, post-processing: ε is fixed by the
mechanisms that touched the data, never by what is done with their output).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from pubsubml.errors import InvalidPrivacyParameterError
from pubsubml.privacy.events import DPEvent

__all__ = ["PrivacyAccountant"]


class PrivacyAccountant(abc.ABC):
    """Tracks the DP events of one computation and reports ε (Opacus' ``IAccountant``).

    Create one by name with :func:`~pubsubml.privacy.accountants.registry.create_accountant`
    (``"pld"``, ``"rdp"``, ``"pure"``); a new backend is a subclass that implements
    :meth:`mechanism` and :meth:`epsilon_of`, registered with
    :func:`~pubsubml.privacy.accountants.registry.register_accountant`.

    Attributes
    ----------
    events : list of DPEvent
        What ran, in order.  Consecutive :meth:`step` calls with the same σ and q are merged into
        one event with the summed count.

    Notes
    -----
    The reported ε covers what was recorded, nothing else: call :meth:`step` for every DP-SGD step
    that ran (with Poisson sampling at rate q, which the subsampled-Gaussian analysis assumes) and
    :meth:`record` every other release that read the same data.  Releases computed only from the
    outputs need no record (pubsub-ml.txt §3.1, Theorem 2).

    Examples
    --------
    >>> from pubsubml.privacy.accountants.registry import create_accountant
    >>> acc = create_accountant("pld")
    >>> acc.step(noise_multiplier=1.0, sample_rate=0.01, steps=50)
    >>> acc.step(noise_multiplier=1.0, sample_rate=0.01, steps=50)
    >>> acc.events[0].count
    100
    """

    def __init__(self) -> None:
        self.events: list[DPEvent] = []

    @classmethod
    @abc.abstractmethod
    def mechanism(cls) -> str:
        """The name the accountant is registered and serialized under (``"pld"``, …)."""

    @classmethod
    @abc.abstractmethod
    def epsilon_of(cls, events: Sequence[DPEvent], delta: float) -> float:
        """ε at δ of the sequential composition of ``events`` (0.0 when there are none).

        Returns
        -------
        float
            ε ≥ 0; ``math.inf`` when no finite ε exists at this δ.

        Raises
        ------
        InvalidPrivacyParameterError
            On a δ the accountant does not handle or an event it cannot account.
        """

    @property
    def backend(self) -> str:
        """The accountant's name (:meth:`mechanism`)."""
        return self.mechanism()

    def record(self, event: DPEvent) -> None:
        """Append any DP event (a release, a diffprivlib model's (ε, δ), a DP-SGD run)."""
        if not isinstance(event, DPEvent):
            raise InvalidPrivacyParameterError(f"expected a DPEvent, got {type(event).__name__}")
        self.events.append(event)

    def step(self, *, noise_multiplier: float, sample_rate: float, steps: int = 1) -> None:
        """Record ``steps`` DP-SGD steps: Poisson sampling at rate q, then Gaussian noise σ·C.

        Raises
        ------
        InvalidPrivacyParameterError
            On σ ≤ 0, q ∉ (0, 1] or steps < 1; nothing is recorded.
        """
        event = DPEvent(
            mechanism="subsampled_gaussian",
            noise_multiplier=noise_multiplier,
            sample_rate=sample_rate,
            count=steps,
        )
        last = self.events[-1] if self.events else None
        if last is not None and last.model_copy(update={"count": steps}) == event:
            self.events[-1] = last.model_copy(update={"count": last.count + steps})
        else:
            self.events.append(event)

    def get_epsilon(self, delta: float) -> float:
        """ε at δ of everything recorded so far (0.0 when nothing ran)."""
        return self.epsilon_of(self.events, delta)

    def state_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot: ``{"backend": ..., "events": [...]}``."""
        return {"backend": self.backend, "events": [e.model_dump(mode="json") for e in self.events]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot made by :meth:`state_dict` of an accountant of the same backend.

        Raises
        ------
        InvalidPrivacyParameterError
            On a malformed state or another backend; the accountant is left unchanged.
        """
        if not isinstance(state, Mapping) or set(state) != {"backend", "events"}:
            raise InvalidPrivacyParameterError("state must be a mapping with keys backend, events")
        if state["backend"] != self.backend:
            raise InvalidPrivacyParameterError(
                f"state of a {state['backend']!r} accountant cannot load into {self.backend!r}"
            )
        raw = state["events"]
        if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
            raise InvalidPrivacyParameterError("state['events'] must be a list of events")
        try:
            events = [e if isinstance(e, DPEvent) else DPEvent.model_validate(e) for e in raw]
        except ValidationError as exc:
            raise InvalidPrivacyParameterError(f"malformed event in state: {exc}") from exc
        self.events = events
