"""Tests of pubsubml.registry.ui.pages: filters, the ε shown on cards and ledgers (checked against
the accountant called directly), and what each page reads for each principal."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pubsubml.errors import DataValidationError, NotFoundError, PermissionDeniedError
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.privacy.events import DPEvent
from pubsubml.privacy.ledger import PrivacyLedger, Release
from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.schemas import LedgerPublic, ReleasePublic
from pubsubml.registry.ui.pages import (
    ModelFilters,
    cumulative_spent,
    graph_page,
    ledger_page,
    model_page,
    models_page,
    recompute_epsilon,
    sites_page,
    subscriptions_page,
)

T0 = datetime(2025, 3, 1, tzinfo=UTC)
GAUSS = DPEvent(mechanism="gaussian", noise_multiplier=5.0)
DELTA = 1e-5


def _site(dashboard: Any, name: str) -> Principal:
    with dashboard.registry.db.read() as session:
        from pubsubml.registry.services.sites import get_site_row

        row = get_site_row(session, name)
        return Principal(kind="site", site_id=row.id, name=row.name, roles=row.roles)


def _read(dashboard: Any, build: Any) -> Any:
    with dashboard.registry.db.read() as session:
        return build(session)


# ---- filters ------------------------------------------------------------------------------
def test_filters_parse_every_field() -> None:
    params = [
        ("feature", "age, sex"),
        ("feature", "wbc,age"),
        ("task", "classification"),
        ("publisher", "hospital-1"),
        ("max_epsilon", "2.5"),
        ("after", "7"),
    ]

    filters = ModelFilters.parse(params)

    assert filters.features == ("age", "sex", "wbc")
    assert (filters.task, filters.publisher) == ("classification", "hospital-1")
    assert (filters.max_epsilon, filters.after) == (2.5, 7)
    assert filters.raw["feature"] == "age, sex, wbc,age"


def test_empty_filters_mean_any() -> None:
    filters = ModelFilters.parse([("feature", ""), ("task", ""), ("publisher", " "), ("after", "")])

    assert filters == ModelFilters()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("task", "clustering", "invalid task"),
        ("feature", "1age", "invalid feature"),
        ("feature", "a b", "invalid feature"),
        ("feature", ",".join(f"f{i}" for i in range(40)), "invalid feature"),
        ("publisher", "-bad", "invalid site name"),
        ("publisher", "x" * 65, "invalid site name"),
        ("max_epsilon", "abc", "must be a number"),
        ("max_epsilon", "-1", "at least 0"),
        ("max_epsilon", "nan", "at least 0"),
        ("max_epsilon", "inf", "at least 0"),
        ("after", "-1", "integer"),
        ("after", "1.5", "integer"),
        ("after", str(2**63), "integer"),
        ("after", "١٢", "integer"),
    ],
)
def test_bad_filter_values_are_refused(key: str, value: str, message: str) -> None:
    with pytest.raises(DataValidationError, match=message):
        ModelFilters.parse([(key, value)])


# ---- ε of cards and ledgers ---------------------------------------------------------------
def test_recompute_epsilon_is_the_accountants(artifacts: Any, support: Any) -> None:
    events = [DPEvent(mechanism="gaussian", noise_multiplier=5.0, count=2)]
    card = artifacts("a", features=("age",), privacy=support.privacy_record(events)).card

    assert recompute_epsilon(card) == compute_epsilon(events, support.DELTA)


def test_recompute_epsilon_of_pure_events_is_basic_composition(
    artifacts: Any, support: Any
) -> None:
    laplace = DPEvent(mechanism="laplace", noise_multiplier=4.0, count=2)
    record = support.privacy_record([laplace], delta=0.0, epsilon=0.5, accountant="pure")
    card = artifacts("a", features=("age",), privacy=record).card

    assert recompute_epsilon(card) == pytest.approx(2 / 4.0)


def _ledger(releases: list[tuple[datetime, tuple[str, ...] | None]]) -> LedgerPublic:
    """A ledger of GAUSS releases, its spent ε composed by the ledger as the service does."""
    public = [
        ReleasePublic(
            release_id=f"r{i}",
            description="",
            events=[GAUSS],
            scope=None if scope is None else list(scope),
            epsilon=0.0,
            delta=DELTA,
            model_id=None,
            created_at=when,
        )
        for i, (when, scope) in enumerate(releases)
    ]
    ledger = PrivacyLedger(
        site="a",
        epsilon_budget=10.0,
        delta=DELTA,
        releases=[
            Release(
                release_id=r.release_id,
                events=tuple(r.events),
                scope=None if r.scope is None else tuple(r.scope),
            )
            for r in public
        ],
    )
    spent = ledger.spent_epsilon()
    return LedgerPublic(
        site="a",
        epsilon_budget=10.0,
        delta_budget=DELTA,
        spent_epsilon=spent,
        remaining_epsilon=10.0 - spent,
        releases=public,
    )


def test_cumulative_spent_composes_prefixes_with_the_accountant() -> None:
    ledger = _ledger([(T0 + timedelta(hours=i), None) for i in range(3)])

    steps = cumulative_spent(ledger)

    assert [s.release for s in steps] == [1, 2, 3]
    expected = [compute_epsilon([GAUSS] * k, DELTA) for k in range(1, 4)]
    assert [s.epsilon for s in steps] == pytest.approx(expected)
    assert expected[-1] < 3 * expected[0]  # composed, not summed


def test_cumulative_spent_ends_at_the_ledgers_spent_epsilon() -> None:
    ledger = _ledger([(T0, None), (T0, None)])

    steps = cumulative_spent(ledger)

    assert steps[-1].epsilon == ledger.spent_epsilon
    shown = ledger.model_copy(update={"spent_epsilon": 1.5})  # what the service returned
    assert cumulative_spent(shown)[-1].epsilon == 1.5


def test_cumulative_spent_uses_parallel_composition_over_chunks() -> None:
    ledger = _ledger([(T0, ("c1",)), (T0, ("c2",)), (T0, ("c1",))])

    steps = cumulative_spent(ledger)

    one, two = compute_epsilon([GAUSS], DELTA), compute_epsilon([GAUSS] * 2, DELTA)
    assert [s.epsilon for s in steps] == pytest.approx([one, one, two])


def test_cumulative_spent_labels_releases_and_samples_long_ledgers() -> None:
    times = [T0 + timedelta(hours=h) for h in (0, 3, 1, 2, 4)]
    ledger = _ledger([(t, None) for t in times])

    steps = cumulative_spent(ledger, max_points=2)

    assert [s.release for s in steps] == [2, 5]
    assert steps[0].epsilon == pytest.approx(compute_epsilon([GAUSS] * 2, DELTA))
    assert steps[-1].epsilon == ledger.spent_epsilon
    assert steps[0].label == "r1, 2025-03-01 03:00:00 UTC"
    assert cumulative_spent(_ledger([])) == []


# ---- pages per principal ------------------------------------------------------------------
def test_sites_page_shows_spent_epsilon_only_where_the_ledger_is_readable(dashboard: Any) -> None:
    as_a = _read(dashboard, lambda s: sites_page(s, _site(dashboard, "a")))
    as_admin = _read(dashboard, lambda s: sites_page(s, ADMIN))

    readable = {r["site"].name: r["ledger"] is not None for r in as_a["rows"]}
    assert readable == {"a": True, "b": False, "c": False}
    assert all(r["ledger"] is not None and r["bar"] for r in as_admin["rows"])
    a_row = next(r for r in as_admin["rows"] if r["site"].name == "a")
    assert len(a_row["ledger"].releases) == 2 and a_row["ledger"].spent_epsilon > 0


def test_ledger_page_is_the_sites_and_the_administrators(dashboard: Any) -> None:
    page = _read(dashboard, lambda s: ledger_page(s, _site(dashboard, "a"), "a"))

    steps = cumulative_spent(page["ledger"])
    assert [s.release for s in steps] == [1, 2]
    assert steps[-1].epsilon == page["ledger"].spent_epsilon
    assert "<polyline" in page["plot"] and page["plot"].count('<circle class="release"') == 2
    with pytest.raises(PermissionDeniedError):
        _read(dashboard, lambda s: ledger_page(s, _site(dashboard, "b"), "a"))
    with pytest.raises(NotFoundError):
        _read(dashboard, lambda s: ledger_page(s, ADMIN, "nobody"))


def test_models_page_lists_what_the_principal_may_see(dashboard: Any) -> None:
    def ids(principal: Principal, **filters: Any) -> set[str]:
        page = _read(dashboard, lambda s: models_page(s, principal, ModelFilters(**filters)))
        return {m.model_id for m in page["models"]}

    m = dashboard.models
    assert ids(_site(dashboard, "c")) == {m["public"], m["regression"]}
    assert ids(_site(dashboard, "b")) == set(m.values()) == ids(ADMIN)
    assert ids(_site(dashboard, "b"), features=("wbc",)) == {m["private"]}
    assert ids(ADMIN, task="regression") == {m["regression"]}
    assert ids(ADMIN, publisher="a", max_epsilon=100.0) == {m["public"], m["private"]}
    assert ids(ADMIN, max_epsilon=1e-3) == set()


def test_model_page_hides_models_the_principal_may_not_see(dashboard: Any) -> None:
    private = dashboard.models["private"]

    page = _read(dashboard, lambda s: model_page(s, _site(dashboard, "b"), private))

    assert page["recomputed"] == pytest.approx(page["model"].epsilon, rel=1e-6)
    assert page["recompute_problem"] is None
    assert page["neighbouring"] == "add_remove"
    with pytest.raises(NotFoundError):
        _read(dashboard, lambda s: model_page(s, _site(dashboard, "c"), private))


def test_subscriptions_page_shows_channel_terms_and_deliveries(dashboard: Any) -> None:
    as_c = _read(dashboard, lambda s: subscriptions_page(s, _site(dashboard, "c")))
    as_a = _read(dashboard, lambda s: subscriptions_page(s, _site(dashboard, "a")))
    as_admin = _read(dashboard, lambda s: subscriptions_page(s, ADMIN))

    (row,) = as_c["rows"]
    assert row["terms"] == (("age", "sex"), ("wbc",))
    assert [m for _, m in row["delivered"]] == [dashboard.models["public"]]
    assert as_a["rows"] == []
    assert [r["subscription"].id for r in as_admin["rows"]] == [dashboard.subscription]


def test_graph_page_uses_each_subscribers_latest_score(fresh_dashboard: Any) -> None:
    dashboard = fresh_dashboard
    registry, public = dashboard.registry, dashboard.models["public"]
    answer = registry.client.post(
        "/v1/contributions",
        json={"subscriber": "c", "scores": {public: 0.2, dashboard.models["regression"]: 0.5}},
        headers=registry.auth("c"),
    )
    assert answer.status_code == 201, answer.text

    page = _read(dashboard, lambda s: graph_page(s, ADMIN))

    assert page["edges"] == [("c", "b", 0.5), ("c", "a", 0.2)]
    assert dict(page["ranking"]) == pytest.approx({"b": 0.5 / 0.7, "a": 0.2 / 0.7, "c": 0.0})
    assert 'data-site="b"' in page["svg"]
    assert math.isclose(sum(v for _, v in page["ranking"]), 1.0)
