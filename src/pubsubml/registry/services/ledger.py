"""Per-site privacy ledgers kept by the registry.

Each site declares a personalized budget (ε^p, δ^p) (pubsub-ml.txt §3.2, Algorithm 1; Theorem 3:
privacy is per site).  Every published model is a release charged to its publisher's
:class:`~pubsubml.privacy.ledger.PrivacyLedger`, composed by the accountant (never by adding ε),
in the same transaction that makes the model visible.

A release may name only data chunks its site registered beforehand (``site_scopes``): parallel
composition over chunks is sound only if they are disjoint, which is the site's own declaration,
recorded with its time and shown with the ledger.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from sqlalchemy import bindparam, case, func, select
from sqlalchemy.orm import Session

from pubsubml.artifacts.card import ModelCard
from pubsubml.errors import (
    DuplicateReleaseError,
    PermissionDeniedError,
    PrivacyBudgetExceededError,
)
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.registry.auth import Principal
from pubsubml.registry.schemas import (
    LedgerPublic,
    ReleasePublic,
    ScopeList,
    ScopePublic,
    ScopeRegister,
)
from pubsubml.registry.services.sites import get_site_row
from pubsubml.registry.tables import LedgerEntryRow, SiteRow, SiteScopeRow, utcnow

__all__ = [
    "SiteBudget",
    "build_ledger",
    "charge",
    "count_releases",
    "ledger_for_charging",
    "ledger_row",
    "list_scopes",
    "read_ledger",
    "register_scopes",
    "release_counts",
    "release_of_card",
]


class SiteBudget(Protocol):
    """What a charge reads of a site: its id, name and declared (ε, δ) budget (a
    :class:`~pubsubml.registry.tables.SiteRow`, or those columns read without the ORM)."""

    @property
    def id(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def epsilon_budget(self) -> float: ...

    @property
    def delta_budget(self) -> float: ...


def release_of_card(card: ModelCard) -> Release:
    """The ledger release of a published model: its DP events on its data scope."""
    scope = card.privacy.data_scope
    return Release(
        release_id=card.model_id,
        description=f"model {card.model_id} ({card.task}, {card.format})",
        events=tuple(card.privacy.events),
        scope=None if scope is None else tuple(scope),
        created_at=card.created_at,
    )


@functools.lru_cache(maxsize=4096)
def _events(events_json: str) -> tuple[DPEvent, ...]:
    """The DP events of a stored release, parsed once per distinct text: a site's releases
    repeat a few configurations, so charging a site with thousands of releases parses a handful
    (a publish no longer grows slower by a parse for every model its site published before)."""
    return tuple(DPEvent.model_validate(e) for e in json.loads(events_json))


def _parse_release(
    release_id: str,
    description: str,
    events_json: str,
    scope_json: str | None,
    created_at: datetime,
) -> Release:
    """The release stored in a ledger row's columns (validated when it was charged)."""
    return Release.model_construct(
        release_id=release_id,
        description=description,
        events=_events(events_json),
        scope=None if scope_json is None else tuple(json.loads(scope_json)),
        created_at=created_at,
    )


_RELEASE_COLUMNS = (
    LedgerEntryRow.release_id,
    LedgerEntryRow.description,
    LedgerEntryRow.events_json,
    LedgerEntryRow.scope_json,
    LedgerEntryRow.created_at,
)


def _release_of_row(row: LedgerEntryRow) -> Release:
    return _parse_release(
        row.release_id, row.description, row.events_json, row.scope_json, row.created_at
    )


def _rows(session: Session, site_id: int) -> list[LedgerEntryRow]:
    stmt = (
        select(LedgerEntryRow).where(LedgerEntryRow.site_id == site_id).order_by(LedgerEntryRow.id)
    )
    return list(session.execute(stmt).scalars())


def _releases(session: Session, site_id: int) -> list[Release]:
    """The site's releases in charge order, read as plain columns (no ORM objects)."""
    session.flush()  # rows of this transaction's earlier savepoints count too
    stmt = (
        select(*_RELEASE_COLUMNS)
        .where(LedgerEntryRow.site_id == site_id)
        .order_by(LedgerEntryRow.id)
    )
    return [_parse_release(*row) for row in session.connection().execute(stmt)]


def count_releases(session: Session, site_id: int) -> int:
    """Number of releases charged to a site."""
    stmt = select(func.count()).select_from(LedgerEntryRow).where(LedgerEntryRow.site_id == site_id)
    return int(session.execute(stmt).scalar_one())


_RELEASE_COUNTS = (
    select(LedgerEntryRow.site_id, func.count())
    .where(LedgerEntryRow.site_id.in_(bindparam("site_ids", expanding=True)))
    .group_by(LedgerEntryRow.site_id)
)


def release_counts(session: Session, site_ids: Iterable[int]) -> dict[int, int]:
    """Number of releases charged to each of ``site_ids``, in one statement (0 for none)."""
    wanted = sorted(set(site_ids))
    counts = dict.fromkeys(wanted, 0)
    if wanted:
        rows = session.connection().execute(_RELEASE_COUNTS, {"site_ids": wanted})
        counts.update({int(s): int(n) for s, n in rows})
    return counts


def _scopes(session: Session, site_id: int) -> dict[str, datetime]:
    stmt = (
        select(SiteScopeRow)
        .where(SiteScopeRow.site_id == site_id)
        .order_by(SiteScopeRow.created_at, SiteScopeRow.label)
    )
    return {r.label: r.created_at for r in session.execute(stmt).scalars()}


def build_ledger(session: Session, site: SiteRow, *, backend: str = "pld") -> PrivacyLedger:
    """The site's ledger as stored (registered chunks, releases in charge order)."""
    return PrivacyLedger(
        site=site.name,
        epsilon_budget=site.epsilon_budget,
        delta=site.delta_budget,
        backend=backend,
        releases=_releases(session, site.id),
        scopes=_scopes(session, site.id),
    )


def _scope_list(session: Session, site: SiteRow, new: list[str]) -> ScopeList:
    return ScopeList(
        site=site.name,
        scopes=[ScopePublic(label=k, created_at=v) for k, v in _scopes(session, site.id).items()],
        new=new,
    )


def register_scopes(
    session: Session, principal: Principal, site_name: str, body: ScopeRegister
) -> ScopeList:
    """Record the site's declaration that ``body.scopes`` are disjoint data chunks.

    Only the site itself declares its chunks (the administrator cannot: disjointness is a
    statement about the site's own data).  Labels already registered keep their first time.

    Raises
    ------
    NotFoundError
        No such site.
    PermissionDeniedError
        Another site, or the administrator.
    """
    site = get_site_row(session, site_name)
    if principal.is_admin or principal.name != site.name:
        raise PermissionDeniedError(
            f"{principal.name!r} may not register data chunks for site {site.name!r}: only the "
            "site declares its own chunks"
        )
    known = _scopes(session, site.id)
    new = [label for label in dict.fromkeys(body.scopes) if label not in known]
    now = utcnow()
    session.add_all(SiteScopeRow(site_id=site.id, label=label, created_at=now) for label in new)
    session.flush()
    return _scope_list(session, site, new)


def list_scopes(session: Session, principal: Principal, site_name: str) -> ScopeList:
    """A site's registered chunks (the site itself or the administrator)."""
    site = get_site_row(session, site_name)
    principal.require_site(site.name, "read the registered data chunks")
    return _scope_list(session, site, [])


_GROUPED_RELEASES = (
    select(
        LedgerEntryRow.events_json,
        LedgerEntryRow.scope_json,
        func.count(),
        func.sum(case((LedgerEntryRow.release_id == bindparam("release_id"), 1), else_=0)),
    )
    .where(LedgerEntryRow.site_id == bindparam("site_id"))
    .group_by(LedgerEntryRow.events_json, LedgerEntryRow.scope_json)
    .order_by(func.min(LedgerEntryRow.id))
)


def _grouped_releases(
    session: Session, site_id: int, release_id: str
) -> tuple[list[Release], int, bool]:
    """The site's releases grouped by (events, scope), for composing them; their number; and
    whether ``release_id`` is among them.

    A group of ``n`` releases with the same events and scope stands as one release whose events
    count ``n`` times as often.  The accountant merges events that differ only in their count
    (:func:`~pubsubml.privacy.accountants.composition.group_events`, in order of first occurrence), and groups
    come in the order of their first release, so every chunk composes exactly the events, in
    the order, that the releases one by one give: the same ε, to the last digit.  The database
    does the grouping, so a site's thousands of releases cost a few rows here.
    """
    session.flush()  # rows of this transaction's earlier savepoints count too
    groups, total, seen = [], 0, False
    rows = session.connection().execute(
        _GROUPED_RELEASES, {"site_id": site_id, "release_id": release_id}
    )
    for i, (events_json, scope_json, n, same_id) in enumerate(rows):
        events = _events(events_json)
        if n > 1:
            events = tuple(e.model_copy(update={"count": e.count * n}) for e in events)
        groups.append(
            Release.model_construct(
                release_id=f"\x00group {i}",  # no release id has a NUL
                events=events,
                scope=None if scope_json is None else tuple(json.loads(scope_json)),
            )
        )
        total += int(n)
        seen = seen or bool(same_id)
    return groups, total, seen


def ledger_for_charging(
    session: Session, site: SiteBudget, release: Release, *, backend: str = "pld"
) -> tuple[PrivacyLedger, int]:
    """A ledger that composes like the site's stored one, to try ``release`` on; and the number
    of releases stored.

    Its releases are the stored ones grouped by events and scope (see :func:`_grouped_releases`:
    the same ε as the releases one by one, from a few rows however many models the site
    published), so ``epsilon_if_charged(release)`` is what the site would have spent.  Its
    registered chunks are read only when ``release`` names some (they check the labels; ε does
    not depend on them).

    Raises
    ------
    DuplicateReleaseError
        ``release`` is already charged to the site.
    """
    groups, total, seen = _grouped_releases(session, site.id, release.release_id)
    if seen:
        raise DuplicateReleaseError(
            f"release {release.release_id!r} is already charged to the ledger of {site.name!r}"
        )
    ledger = PrivacyLedger(
        site=site.name,
        epsilon_budget=site.epsilon_budget,
        delta=site.delta_budget,
        backend=backend,
        releases=groups,
        # The registered chunks only check the labels a release names; ε never reads them.
        scopes={} if release.scope is None else _scopes(session, site.id),
    )
    return ledger, total


def charge(session: Session, site: SiteBudget, release: Release) -> int:
    """Check that ``release`` fits the site's budget; returns the number of earlier releases.

    The RDP accountant answers first: its ε is an upper bound of the true ε, so a release it
    accepts is within budget, and it costs a fraction of the PLD accountant.  Only when RDP says
    "over budget" does the tight PLD accountant decide (DESIGN.md: PLD tight, RDP the fast
    conservative check).  Nothing is written.  The stored releases are composed grouped
    (:func:`ledger_for_charging`), so a charge costs the same after a site's ten thousandth
    model as after its first.

    Raises
    ------
    PrivacyBudgetExceededError
        The PLD accountant puts the site over its budget with this release.
    InvalidPrivacyParameterError
        The release names a data chunk the site has not registered.
    DuplicateReleaseError
        The release is already charged.
    """
    ledger, total = ledger_for_charging(session, site, release, backend="rdp")
    try:
        ledger.charge(release)
    except PrivacyBudgetExceededError:
        ledger.model_copy(update={"backend": "pld"}).charge(release)
    return total


def ledger_row(
    site_id: int, release: Release, *, epsilon: float, delta: float, model_id: str
) -> LedgerEntryRow:
    """The row recording ``release`` (ε and δ of the release alone, for display)."""
    return LedgerEntryRow(
        site_id=site_id,
        release_id=release.release_id,
        description=release.description,
        events_json=json.dumps([e.model_dump(mode="json") for e in release.events]),
        scope_json=None if release.scope is None else json.dumps(list(release.scope)),
        epsilon=epsilon,
        delta=delta,
        model_id=model_id,
        created_at=release.created_at,
    )


def read_ledger(session: Session, principal: Principal, site_name: str) -> LedgerPublic:
    """A site's budget, releases and spent ε (the site itself or the administrator only).

    Raises
    ------
    NotFoundError
        No such site.
    PermissionDeniedError
        Another site asks.
    """
    site = get_site_row(session, site_name)
    principal.require_site(site.name, "read the privacy ledger")
    rows = _rows(session, site.id)
    ledger = PrivacyLedger(
        site=site.name,
        epsilon_budget=site.epsilon_budget,
        delta=site.delta_budget,
        releases=[_release_of_row(r) for r in rows],
    )
    spent = ledger.spent_epsilon()
    return LedgerPublic(
        site=site.name,
        epsilon_budget=site.epsilon_budget,
        delta_budget=site.delta_budget,
        spent_epsilon=spent,
        remaining_epsilon=max(0.0, site.epsilon_budget - spent),
        neighbouring=ledger.neighbouring(),
        scopes=[ScopePublic(label=k, created_at=v) for k, v in _scopes(session, site.id).items()],
        releases=[
            ReleasePublic(
                release_id=r.release_id,
                description=r.description,
                events=list(rel.events),
                scope=None if rel.scope is None else list(rel.scope),
                epsilon=r.epsilon,
                delta=r.delta,
                model_id=r.model_id,
                created_at=r.created_at,
            )
            for r, rel in zip(rows, ledger.releases, strict=True)
        ],
    )
