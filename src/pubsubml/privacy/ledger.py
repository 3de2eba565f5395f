"""The privacy ledger of a site: every release is charged here before it leaves the site.

A site declares one (ε, δ) budget.  Each :class:`Release` lists the DP events that produced it and
the data chunks it touched (``scope``).  The ledger composes releases sequentially within a chunk
through the accountant and in parallel across disjoint chunks, and refuses any release that would
exceed the budget.

Parallel composition is only as sound as the chunks' disjointness, which no accountant can check:
it is the site's declaration.  So a chunk label must be *registered* (:meth:`PrivacyLedger.
register_scopes`, recorded with its time) before a release may name it; a release on an
unregistered label is refused, and ten labels made up on the spot for ten releases on the same rows
no longer pass as parallel composition without the site having declared those chunks.

References
----------
pubsub-ml.txt §3.1 (Theorem 1, parallel composition over disjoint subsets) and §6.2 (Theorems 5–6:
a stream publisher that trains each model on its own disjoint chunk keeps its (ε, δ) over an
unbounded number of ensemble updates).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pubsubml.errors import (
    DuplicateReleaseError,
    InvalidPrivacyParameterError,
    PrivacyBudgetExceededError,
)
from pubsubml.privacy.accountants.composition import neighbouring_of
from pubsubml.privacy.accountants.parameters import check_delta, check_epsilon
from pubsubml.privacy.accountants.release import release_epsilon
from pubsubml.privacy.events import DPEvent, Neighbouring

__all__ = ["PrivacyLedger", "Release"]


def _now() -> datetime:
    return datetime.now(UTC)


class Release(BaseModel):
    """One release (a model, a DP default value, a query answer) and the data it touched.

    Parameters
    ----------
    release_id : str
        Unique within a ledger.
    description : str, default=""
    events : tuple of DPEvent
        The mechanisms that produced the release; they compose sequentially.
    scope : tuple of str, optional
        Labels of the disjoint data chunks the release read.  ``None`` means the whole data set:
        every chunk, including chunks that arrive later.
    created_at : datetime, default=now (UTC)

    Raises
    ------
    InvalidPrivacyParameterError
        On an empty id, no events, or an empty scope.

    Examples
    --------
    >>> e = DPEvent(mechanism="gaussian", noise_multiplier=5.0)
    >>> Release(release_id="m1", events=(e,), scope=("2024-01",)).scope
    ('2024-01',)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    release_id: str = Field(min_length=1)
    description: str = ""
    events: tuple[DPEvent, ...] = Field(min_length=1)
    scope: tuple[str, ...] | None = None
    created_at: datetime = Field(default_factory=_now)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidPrivacyParameterError(f"invalid Release: {exc}") from exc

    @field_validator("scope")
    @classmethod
    def _check_scope(cls, scope: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if scope is None:
            return None
        if not scope or any(not label for label in scope):
            raise ValueError("scope must be None (whole data set) or non-empty chunk labels")
        return tuple(dict.fromkeys(scope))  # drop repeated labels, keep order


class PrivacyLedger(BaseModel):
    """A site's (ε, δ) budget and the releases charged against it.

    Parameters
    ----------
    site : str
    epsilon_budget : float
        Total ε the site accepts to spend, finite and > 0.
    delta : float
        The δ at which every ε is computed, in (0, 1).
    backend : {"pld", "rdp"}, default="pld"
        Accountant used for sequential composition (see
        :func:`~pubsubml.privacy.accountants.release.release_epsilon`).
    releases : list of Release, default=[]
        Charged releases, in order.  :meth:`charge` is the only path that checks the budget; a
        ledger built directly from a list records that history as given.
    scopes : dict of str to datetime, default={}
        The disjoint data chunks the site has declared (:meth:`register_scopes`), with when.
        A release may name only registered chunks.

    Raises
    ------
    InvalidPrivacyParameterError
        On ε ≤ 0 or non-finite, δ ∉ (0, 1), or repeated release ids.

    Notes
    -----
    For every chunk label c, ε_c is the accountant composition at δ of all releases whose scope
    contains c or is ``None`` (sequential composition, never a sum of ε).  The spent ε is max_c ε_c
    (parallel composition, pubsub-ml.txt §3.1 Theorem 1); with only whole-data releases there is a
    single group.  This is sound only if chunks are truly disjoint (each record in at most one
    chunk) and a release with a scope read nothing outside it.  Because composition is not
    additive, :meth:`remaining_epsilon` is indicative; ask :meth:`epsilon_if_charged` before
    planning a release.  ε values are cached per distinct group of events, so a stream of many
    releases on disjoint chunks with the same mechanism costs one accountant call.

    Releases may use either neighbouring relation (:class:`~pubsubml.privacy.events.DPEvent`):
    once one release is replace-one (a diffprivlib model, an answer normalised by a known n),
    every ε the ledger reports holds for replace-one neighbours, the add/remove releases being
    converted (:func:`~pubsubml.privacy.accountants.release.release_epsilon`); :meth:`neighbouring` says
    which.

    Examples
    --------
    >>> ledger = PrivacyLedger(site="h1", epsilon_budget=2.0, delta=1e-5)
    >>> ledger.register_scopes([f"chunk{t}" for t in range(4)])
    ['chunk0', 'chunk1', 'chunk2', 'chunk3']
    >>> e = DPEvent(mechanism="gaussian", noise_multiplier=8.0)
    >>> for t in range(3):
    ...     _ = ledger.charge(Release(release_id=f"m{t}", events=(e,), scope=(f"chunk{t}",)))
    >>> ledger.spent_epsilon() == ledger.epsilon_if_charged(
    ...     Release(release_id="m3", events=(e,), scope=("chunk3",)))
    True
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    site: str
    epsilon_budget: float
    delta: float
    backend: Literal["pld", "rdp"] = "pld"
    releases: list[Release] = Field(default_factory=list)
    scopes: dict[str, datetime] = Field(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidPrivacyParameterError(f"invalid PrivacyLedger: {exc}") from exc

    def register_scopes(self, labels: Sequence[str]) -> list[str]:
        """Declare disjoint data chunks that releases may name; returns the labels that are new.

        Registering is the site's statement that no record belongs to two registered chunks
        (nothing here can verify it); it is recorded with its time and shown with the ledger.
        Registering a label again changes nothing.

        Raises
        ------
        InvalidPrivacyParameterError
            A label that is empty, longer than 128 characters or has control characters; nothing
            is registered then.
        """
        if isinstance(labels, str):
            raise InvalidPrivacyParameterError("labels must be a sequence of strings, not a string")
        wanted = list(dict.fromkeys(labels))
        for label in wanted:
            if not isinstance(label, str) or not 0 < len(label) <= 128 or not label.isprintable():
                raise InvalidPrivacyParameterError(
                    f"scope label {str(label)[:40]!r} must be 1 to 128 printable characters"
                )
        new = [label for label in wanted if label not in self.scopes]
        now = _now()
        self.scopes = {**self.scopes, **dict.fromkeys(new, now)}
        return new

    @model_validator(mode="after")
    def _check(self) -> PrivacyLedger:
        check_epsilon(self.epsilon_budget)
        check_delta(self.delta)
        ids = [r.release_id for r in self.releases]
        if len(set(ids)) != len(ids):
            raise ValueError("release ids must be unique")
        return self

    def _spent(self, releases: list[Release]) -> float:
        """max over chunks of the sequential composition of the releases touching each chunk."""
        whole: list[DPEvent] = []
        chunks: dict[str, list[DPEvent]] = {}
        for release in releases:
            if release.scope is None:
                whole.extend(release.events)
                for events in chunks.values():
                    events.extend(release.events)
                continue
            for label in release.scope:
                chunks.setdefault(label, list(whole)).extend(release.events)
        groups = {tuple(events) for events in chunks.values()} if chunks else {tuple(whole)}
        return max(
            (release_epsilon(group, self.delta, self.backend) for group in groups if group),
            default=0.0,
        )

    def _check_new(self, release: Release) -> None:
        if not isinstance(release, Release):
            raise InvalidPrivacyParameterError(f"expected a Release, got {type(release).__name__}")
        if any(r.release_id == release.release_id for r in self.releases):
            raise DuplicateReleaseError(
                f"release {release.release_id!r} is already charged to the ledger of {self.site!r}"
            )
        unknown = [c for c in release.scope or () if c not in self.scopes]
        if unknown:
            raise InvalidPrivacyParameterError(
                f"release {release.release_id!r} names data chunks {unknown[:5]} that site "
                f"{self.site!r} has not registered; register its disjoint chunks first "
                "(register_scopes) or release on the whole data set (scope=None)"
            )

    def spent_epsilon(self) -> float:
        """ε spent so far at the ledger's δ (0.0 before any release)."""
        return self._spent(self.releases)

    def epsilon_if_charged(self, release: Release) -> float:
        """ε the ledger would have spent after ``release``; changes nothing.

        Raises
        ------
        DuplicateReleaseError
            If a release with the same id is already charged.
        InvalidPrivacyParameterError
            If the release names a chunk that is not registered.
        """
        self._check_new(release)
        return self._spent([*self.releases, release])

    def neighbouring(self) -> Neighbouring:
        """The neighbouring relation the ledger's ε holds for (``"add_remove"`` until a
        replace-one release is charged)."""
        return neighbouring_of([e for r in self.releases for e in r.events])

    def remaining_epsilon(self) -> float:
        """``max(0, epsilon_budget - spent_epsilon())`` (indicative: ε does not add up)."""
        return max(0.0, self.epsilon_budget - self.spent_epsilon())

    def charge(self, release: Release) -> float:
        """Record ``release`` if the budget allows it and return the new spent ε.

        Raises
        ------
        PrivacyBudgetExceededError
            If the spent ε would exceed ``epsilon_budget``; the ledger is unchanged.
        DuplicateReleaseError
            If a release with the same id is already charged; the ledger is unchanged.
        """
        spent = self.epsilon_if_charged(release)
        if spent > self.epsilon_budget:
            raise PrivacyBudgetExceededError(
                f"release {release.release_id!r} would bring site {self.site!r} to ε={spent:.6g} "
                f"at δ={self.delta:g}, above its budget ε={self.epsilon_budget:g} "
                f"(spent so far ε={self.spent_epsilon():.6g}); nothing was charged"
            )
        self.releases.append(release)
        return spent

    def to_json(self) -> str:
        """The ledger as JSON (budget, δ, backend and every release with its events)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> PrivacyLedger:
        """Rebuild a ledger written by :meth:`to_json`.

        Raises
        ------
        InvalidPrivacyParameterError
            On malformed JSON or invalid contents.
        """
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise InvalidPrivacyParameterError(f"invalid PrivacyLedger JSON: {exc}") from exc
