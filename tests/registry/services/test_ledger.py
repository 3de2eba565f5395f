"""Tests of pubsubml.registry.services.ledger: releases, registered chunks, charging, reading."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from pubsubml.errors import (
    DuplicateReleaseError,
    InvalidPrivacyParameterError,
    PrivacyBudgetExceededError,
)
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.schemas import ScopeRegister
from pubsubml.registry.services.ledger import (
    build_ledger,
    charge,
    count_releases,
    ledger_for_charging,
    ledger_row,
    list_scopes,
    read_ledger,
    register_scopes,
    release_counts,
    release_of_card,
)
from pubsubml.registry.tables import SiteRow
from registry.conftest import statements

DELTA = 1e-5
GAUSS = DPEvent(mechanism="gaussian", noise_multiplier=5.0)
WIDE = DPEvent(mechanism="gaussian", noise_multiplier=3.0)


def _site(db: Database, name: str = "a", epsilon: float = 10.0) -> Principal:
    with db.write() as s:
        row = SiteRow(
            name=name, roles="both", epsilon_budget=epsilon, delta_budget=DELTA, token_hash=name
        )
        s.add(row)
        s.flush()
        return Principal(kind="site", site_id=row.id, name=name, roles="both")


def _release(rid: str, *events: DPEvent, scope: tuple[str, ...] | None = None) -> Release:
    created = datetime(2025, 1, 1, tzinfo=UTC)
    return Release(
        release_id=rid, description=f"d-{rid}", events=events, scope=scope, created_at=created
    )


def _store(db: Database, site: Principal, release: Release) -> None:
    assert site.site_id is not None
    eps = compute_epsilon(list(release.events), DELTA)
    with db.write() as s:
        s.add(ledger_row(site.site_id, release, epsilon=eps, delta=DELTA, model_id=None))  # type: ignore[arg-type]


def _register(db: Database, site: Principal, labels: list[str]) -> Any:
    with db.write() as s:
        return register_scopes(s, site, site.name, ScopeRegister(scopes=labels))


def _charge(db: Database, site: Principal, release: Release) -> int:
    with db.read() as s:
        row = s.get(SiteRow, site.site_id)
        assert row is not None
        return charge(s, row, release)


def test_release_of_card(artifacts: Any, support: Any) -> None:
    plain = artifacts("a", seed=700).card
    release = release_of_card(plain)
    assert release.release_id == plain.model_id and release.scope is None
    assert release.events == tuple(plain.privacy.events) and release.created_at == plain.created_at
    assert plain.task in release.description and plain.format in release.description
    art = artifacts("a", seed=701)
    scoped = artifacts.resign(
        art.card, art.weights, "a", privacy=support.privacy_record(data_scope=["w2", "w1"])
    ).card
    assert release_of_card(scoped).scope == tuple(scoped.privacy.data_scope or ())


def test_registered_chunks_keep_their_first_time_and_order(db: Database) -> None:
    site = _site(db)
    first = _register(db, site, ["q2", "q1", "q2"])
    assert first.new == ["q2", "q1"] and first.site == "a"
    assert [s.label for s in first.scopes] == ["q1", "q2"]  # same time: by label
    second = _register(db, site, ["q1", "q3"])
    assert second.new == ["q3"]
    assert [s.label for s in second.scopes] == ["q1", "q2", "q3"]
    assert second.scopes[:2] == first.scopes
    with db.read() as s:
        assert list_scopes(s, ADMIN, "a").model_dump() == {**second.model_dump(), "new": []}


def test_the_pld_accountant_decides_when_rdp_says_over_budget(db: Database) -> None:
    pld = compute_epsilon([GAUSS], DELTA, backend="pld")
    rdp = compute_epsilon([GAUSS], DELTA, backend="rdp")
    assert pld < rdp
    between = _site(db, "between", epsilon=(pld + rdp) / 2)
    assert _charge(db, between, _release("r1", GAUSS)) == 0
    below = _site(db, "below", epsilon=pld * 0.99)
    with pytest.raises(PrivacyBudgetExceededError):
        _charge(db, below, _release("r1", GAUSS))


def test_charge_counts_earlier_releases_and_writes_nothing(db: Database) -> None:
    site = _site(db)
    _store(db, site, _release("r1", GAUSS))
    assert _charge(db, site, _release("r2", GAUSS)) == 1
    assert site.site_id is not None
    with db.read() as s:
        assert count_releases(s, site.site_id) == 1
        assert release_counts(s, [site.site_id, site.site_id, 10_000]) == {
            site.site_id: 1,
            10_000: 0,
        }
        assert release_counts(s, []) == {}
    tight = _site(db, "tight", epsilon=compute_epsilon([GAUSS], DELTA) * 1.2)
    _store(db, tight, _release("r1", GAUSS))
    with pytest.raises(PrivacyBudgetExceededError):
        _charge(db, tight, _release("r2", GAUSS))  # two releases on the whole data set


def test_a_release_may_name_only_registered_chunks(db: Database) -> None:
    site = _site(db)
    scoped = _release("r1", GAUSS, scope=("jan",))
    with pytest.raises(InvalidPrivacyParameterError, match="not registered"):
        _charge(db, site, scoped)
    _register(db, site, ["jan"])
    assert _charge(db, site, scoped) == 0


def test_stored_releases_rebuild_the_same_ledger(db: Database) -> None:
    site = _site(db)
    _register(db, site, ["jan", "feb"])
    releases = [
        _release("r1", GAUSS, scope=("jan",)),
        _release("r2", GAUSS, WIDE, scope=("feb", "jan")),
        _release("r3", WIDE),
    ]
    for release in releases:
        _store(db, site, release)
    with db.read() as s:
        row = s.get(SiteRow, site.site_id)
        assert row is not None
        ledger = build_ledger(s, row, backend="rdp")
    assert ledger.releases == releases and ledger.backend == "rdp"
    assert set(ledger.scopes) == {"jan", "feb"}
    assert (ledger.site, ledger.epsilon_budget, ledger.delta) == ("a", 10.0, DELTA)


def test_read_ledger_composes_like_the_privacy_ledger(db: Database) -> None:
    site = _site(db)
    _register(db, site, ["jan", "feb"])
    releases = [
        _release("r1", GAUSS, scope=("jan",)),
        _release("r2", WIDE, scope=("feb",)),
        _release("r3", GAUSS),
    ]
    reference = PrivacyLedger(site="a", epsilon_budget=10.0, delta=DELTA)
    reference.register_scopes(["jan", "feb"])
    for release in releases:
        _store(db, site, release)
        reference.charge(release)
    with db.read() as s:
        public = read_ledger(s, site, "a")
    assert public.spent_epsilon == pytest.approx(reference.spent_epsilon())
    assert public.remaining_epsilon == pytest.approx(10.0 - reference.spent_epsilon())
    assert [r.release_id for r in public.releases] == ["r1", "r2", "r3"]
    assert public.releases[1].scope == ["feb"] and public.releases[2].scope is None
    assert public.releases[1].epsilon == pytest.approx(compute_epsilon([WIDE], DELTA))
    assert [s.label for s in public.scopes] == ["feb", "jan"]


def test_remaining_epsilon_never_goes_below_zero(db: Database) -> None:
    site = _site(db, epsilon=0.1)
    _store(db, site, _release("r1", WIDE))  # stored past the budget (e.g. a lowered budget)
    with db.read() as s:
        public = read_ledger(s, ADMIN, "a")
    assert public.spent_epsilon > 0.1 and public.remaining_epsilon == 0.0


def test_stored_releases_are_read_by_their_content_not_their_id(db: Database) -> None:
    """Two sites' releases with the same id, text and time but other events stay apart, and
    a release stored after a charge counts in the next one (nothing read earlier goes stale)."""
    a, b = _site(db, "a"), _site(db, "b", epsilon=compute_epsilon([WIDE], DELTA) * 1.2)
    _store(db, a, _release("r1", GAUSS))
    _store(db, b, _release("r1", WIDE))
    ledgers = {}
    for site in (a, b):
        with db.read() as s:
            row = s.get(SiteRow, site.site_id)
            assert row is not None
            ledgers[site.name] = build_ledger(s, row)
    assert ledgers["a"].releases[0].events == (GAUSS,)
    assert ledgers["b"].releases[0].events == (WIDE,)
    small = _release("r2", DPEvent(mechanism="gaussian", noise_multiplier=50.0))
    assert _charge(db, b, small) == 1
    _store(db, b, _release("r3", WIDE))
    with pytest.raises(PrivacyBudgetExceededError):
        _charge(db, b, small)


@pytest.mark.parametrize("backend", ["rdp", "pld"])
def test_grouped_releases_compose_to_the_same_epsilon_to_the_last_digit(
    db: Database, backend: str
) -> None:
    """Whole-data and chunk releases of three configurations, interleaved: the ledger charging
    uses (stored releases grouped by events and scope) gives exactly the ε of the releases one
    by one, and counts them all."""
    site = _site(db, epsilon=1e6)
    _register(db, site, ["jan", "feb", "mar"])
    sub = DPEvent(mechanism="subsampled_gaussian", noise_multiplier=1.1, sample_rate=0.01, count=7)
    configs = [(GAUSS,), (WIDE, sub), (sub,)]
    scopes: list[tuple[str, ...] | None] = [None, ("jan",), ("feb", "jan"), ("mar",)]
    rng = np.random.default_rng(3)
    stored = []
    for i in range(40):
        rel = _release(
            f"r{i}",
            *configs[int(rng.integers(3))],
            scope=scopes[int(rng.integers(len(scopes)))],
        )
        _store(db, site, rel)
        stored.append(rel)
    reference = PrivacyLedger(
        site="a", epsilon_budget=1e6, delta=DELTA, backend=backend, releases=stored
    )
    reference.register_scopes(["jan", "feb", "mar"])
    new = _release("new", WIDE, scope=("feb",))
    with db.read() as s:
        row = s.get(SiteRow, site.site_id)
        assert row is not None
        ledger, total = ledger_for_charging(s, row, new, backend=backend)
        assert total == 40 == _charge(db, site, new)
        assert len(ledger.releases) < 40
        with pytest.raises(DuplicateReleaseError):
            ledger_for_charging(s, row, _release("r7", GAUSS))
    assert ledger.epsilon_if_charged(new) == reference.epsilon_if_charged(new)
    assert ledger.spent_epsilon() == reference.spent_epsilon()


def test_a_charge_reads_the_registered_chunks_only_for_a_scoped_release(db: Database) -> None:
    site = _site(db)
    _register(db, site, ["jan"])
    _store(db, site, _release("r1", GAUSS, scope=("jan",)))
    with statements(db, "FROM site_scopes") as reads:
        assert _charge(db, site, _release("r2", GAUSS)) == 1  # the whole data set
        assert reads == []
        assert _charge(db, site, _release("r3", GAUSS, scope=("jan",))) == 1
        assert len(reads) == 1
        with pytest.raises(InvalidPrivacyParameterError, match="not registered"):
            _charge(db, site, _release("r4", GAUSS, scope=("feb",)))
