"""The privacy record of a published model: the DP events that ran and the ε they give.

"Privacy is accounted, never assumed" (DESIGN.md): a card does not just state (ε, δ), it lists the
DP events behind the model (pubsub-ml.txt §3.1, Definition 1; Theorem 3: each publisher's
(ε^p, δ^p) guarantee holds for everything it publishes).  Anyone can recompute ε from them with
the accountant the record names
(:func:`~pubsubml.privacy.accountants.release.release_epsilon`), and
:func:`check_privacy_record` refuses a card that understates it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from pubsubml.errors import PubsubmlError, UntrustedArtifactError
from pubsubml.privacy.events import DPEvent, Mechanism, NoiseKind

__all__ = [
    "Accountant",
    "PrivacyRecord",
    "check_privacy_record",
    "summarize_events",
]

Accountant = Literal["pld", "rdp", "pure"]
MAX_EVENTS = 1024
MAX_SCOPE = 256
MAX_SCOPE_TEXT = 128
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_INFINITY = "Infinity"


def summarize_events(events: Sequence[DPEvent]) -> dict[str, Any]:
    """Convenience fields of a :class:`PrivacyRecord`, derived from its events.

    ``mechanism``, ``noise_multiplier`` and ``sample_rate`` are set when every event shares them;
    ``steps`` is the total count of ``subsampled_gaussian`` events (DP-SGD steps), else ``None``.
    """
    mechanisms = {e.mechanism for e in events}
    noises = {e.noise_multiplier for e in events}
    rates = {e.sample_rate for e in events if e.mechanism == "subsampled_gaussian"}
    steps = sum(e.count for e in events if e.mechanism == "subsampled_gaussian")
    return {
        "mechanism": next(iter(mechanisms)) if len(mechanisms) == 1 else None,
        "noise_multiplier": next(iter(noises)) if len(noises) == 1 else None,
        "sample_rate": next(iter(rates)) if len(rates) == 1 else None,
        "steps": steps or None,
    }


class PrivacyRecord(BaseModel):
    """What ran on the publisher's private data, and the (ε, δ) an accountant derives from it.

    Parameters
    ----------
    events : list of DPEvent
        Every DP release behind the model (empty for a non-private model).
    mechanism, noise_multiplier, sample_rate, steps
        Convenience fields; they must equal :func:`summarize_events` of ``events``.
    epsilon : float
        ε computed by ``accountant`` from ``events`` at ``delta``; ``inf`` for a non-private model
        (serialized as the JSON string ``"Infinity"``).
    delta : float
        δ in [0, 1).
    accountant : {"pld", "rdp", "pure"} or None
        The accountant that computed ε (``"pure"``: basic composition of pure ε-DP events, at
        δ = 0); ``None`` exactly when there are no events.
    data_scope : list of str, optional
        Which data the events spent budget on (e.g. ``["2024-q1"]``), for parallel composition.
    noise : {"secure", "seeded"}, optional
        Where the mechanisms' randomness came from (:mod:`pubsubml.privacy.noise`): a secure
        source nobody can regenerate, or a seed (a simulation: whoever knows the seed can
        subtract the noise, so a default registry refuses such a card).  Absent on cards made
        before the field existed (and then left out of the JSON, so their signatures verify)
        and on non-private records.

    Raises
    ------
    pydantic.ValidationError
        Inconsistent or out-of-range fields, with the reason.

    References
    ----------
    pubsub-ml.txt §3.1 (Definition 1, (ε, δ)-DP), §5 Theorem 3 (each publisher's guarantee).

    Examples
    --------
    >>> PrivacyRecord.from_events([], epsilon=float("inf"), delta=0.0).is_private
    False
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    events: list[DPEvent] = Field(max_length=MAX_EVENTS)
    mechanism: Mechanism | None = None
    noise_multiplier: float | None = None
    sample_rate: float | None = None
    steps: int | None = None
    epsilon: float
    delta: float
    accountant: Accountant | None = None
    data_scope: list[str] | None = Field(default=None, max_length=MAX_SCOPE)
    noise: NoiseKind | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def noise_is_secure(self) -> bool:
        """True when the record says its noise came from a secure source."""
        return self.noise == "secure"

    @classmethod
    def from_events(
        cls,
        events: Sequence[DPEvent],
        *,
        epsilon: float,
        delta: float,
        accountant: Accountant | None = None,
        data_scope: Sequence[str] | None = None,
        noise: NoiseKind | None = None,
    ) -> PrivacyRecord:
        """Build a record, filling the convenience fields from ``events``."""
        return cls(
            events=list(events),
            epsilon=float(epsilon),
            delta=float(delta),
            accountant=accountant,
            data_scope=None if data_scope is None else list(data_scope),
            noise=noise,
            **summarize_events(events),
        )

    @field_validator("epsilon", mode="before")
    @classmethod
    def _parse_infinity(cls, v: Any) -> Any:
        return math.inf if v == _INFINITY else v

    @field_serializer("epsilon", when_used="json")
    def _dump_infinity(self, v: float) -> float | str:
        return _INFINITY if math.isinf(v) else v

    @field_validator("data_scope")
    @classmethod
    def _scope(cls, v: list[str] | None) -> list[str] | None:
        for s in v or []:
            if not 0 < len(s) <= MAX_SCOPE_TEXT or _CONTROL_RE.search(s):
                raise ValueError(
                    f"data_scope entry {s[:40]!r} must have 1 to {MAX_SCOPE_TEXT} characters and "
                    "no control characters"
                )
        return v

    @model_validator(mode="after")
    def _consistent(self) -> PrivacyRecord:
        if math.isnan(self.epsilon) or not self.epsilon > 0:
            raise ValueError(f"epsilon must be > 0, got {self.epsilon}")
        if not 0.0 <= self.delta < 1.0:
            raise ValueError(f"delta must be in [0, 1), got {self.delta}")
        if not self.events:
            if self.noise is not None:
                raise ValueError("a record without DP events has no noise to describe")
            if not math.isinf(self.epsilon) or self.accountant is not None:
                raise ValueError(
                    "a record without DP events is a non-private model: epsilon must be "
                    "'Infinity' and accountant null"
                )
        else:
            if math.isinf(self.epsilon):
                raise ValueError("a record with DP events needs a finite epsilon")
            if self.accountant is None:
                raise ValueError("a record with DP events must name the accountant that computed ε")
            if (self.accountant == "pure") != (self.delta == 0.0):
                raise ValueError(
                    "the 'pure' accountant applies exactly at delta = 0; 'pld' and 'rdp' need "
                    f"delta > 0 (got accountant {self.accountant!r}, delta {self.delta})"
                )
        expected = summarize_events(self.events)
        actual = {k: getattr(self, k) for k in expected}
        if actual != expected:
            raise ValueError(f"convenience fields {actual} disagree with the events: {expected}")
        return self

    @property
    def is_private(self) -> bool:
        """True when the model was trained with DP (ε finite)."""
        return bool(self.events)


def check_privacy_record(record: PrivacyRecord, *, rtol: float = 1e-6) -> float:
    """Recompute ε from the record's DP events and check the card does not understate it.

    The accountant caches its results per (events, δ, backend): publishers sharing one training
    configuration cost one accountant call.

    Returns
    -------
    float
        The recomputed ε (``inf`` for a non-private model).

    Raises
    ------
    UntrustedArtifactError
        The claimed ε is below the accountant's, or the events cannot be accounted at δ.
    """
    if not record.events:
        return float("inf")
    assert record.accountant is not None  # guaranteed by PrivacyRecord validation
    from pubsubml.privacy.accountants.release import release_epsilon  # loads dp-accounting

    try:
        epsilon = release_epsilon(record.events, record.delta, record.accountant)
    except (PubsubmlError, ValueError) as exc:
        raise UntrustedArtifactError(f"the privacy record cannot be accounted: {exc}") from None
    if record.epsilon < epsilon * (1.0 - rtol):
        raise UntrustedArtifactError(
            f"the card claims ε = {record.epsilon:.6g} but its DP events give ε = {epsilon:.6g} "
            f"at δ = {record.delta:g} ({record.accountant} accountant)"
        )
    return epsilon
