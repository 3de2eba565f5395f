"""Tests of pubsubml.registry.services.publish_commit: the commit, alone and in groups."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from pubsubml.errors import (
    ConflictError,
    PrivacyBudgetExceededError,
)
from pubsubml.registry.schemas import SubscriptionCreate
from pubsubml.registry.services import publish_commit as publish_commit_module
from pubsubml.registry.services.feed_reader import read_deliveries
from pubsubml.registry.services.feed_writer import FeedWriter
from pubsubml.registry.services.ledger import count_releases
from pubsubml.registry.services.publish_checks import Publication
from pubsubml.registry.services.publish_commit import commit_group
from pubsubml.registry.services.subscriptions import create_subscription
from pubsubml.registry.tables import EventRow, LedgerEntryRow, ModelRow
from registry.conftest import statements
from registry.services.conftest import Env


def test_a_concurrent_publish_that_used_the_budget_first_wins(env: Env) -> None:
    env.add_site("poor", epsilon=1.0)  # room for one Gaussian release (ε ≈ 0.73), not two
    first = env.prepare(env.artifacts("poor", seed=208), "poor")
    second = env.prepare(env.artifacts("poor", seed=209), "poor")
    assert isinstance(first, Publication) and isinstance(second, Publication)
    assert first.ledger_size == second.ledger_size == 0  # both checked against an empty ledger
    env.commit(first, "poor")
    before = env.snapshot()
    with pytest.raises(PrivacyBudgetExceededError):
        env.commit(second, "poor")
    assert env.snapshot() == before
    assert env.store.tmp_files() == []
    with env.db.read() as s:
        assert count_releases(s, env.sites["poor"].site_id) == 1


def test_committing_the_same_model_twice_keeps_one_file(env: Env) -> None:
    art = env.artifacts("a", seed=210)
    first, second = env.prepare(art, "a"), env.prepare(art, "a")
    assert isinstance(first, Publication) and isinstance(second, Publication)
    assert env.commit(first, "a").created is True
    again = env.commit(second, "a")
    assert again.created is False and again.model_id == art.card.model_id
    assert len(env.store.keys()) == 1 and env.store.tmp_files() == []
    with env.db.read() as s:
        assert count_releases(s, env.sites["a"].site_id) == 1


# ---- commit_group ----------------------------------------------------------------------------
def _subscribe_b(env: Env) -> str:
    """Site b subscribes to channel ``age``; the subscription's id."""
    with env.db.write() as s:
        body = SubscriptionCreate(channel="age", task="classification")
        return create_subscription(s, env.sites["b"], body).id


def _group(env: Env, pubs: list[Publication]) -> list[bool | BaseException]:
    return commit_group(env.db, env.store, env.lock, pubs)


def test_a_group_commits_together_and_a_failing_member_rolls_back_alone(both_env: Env) -> None:
    env = both_env
    sub = _subscribe_b(env)
    env.add_site("poor", epsilon=1.0)  # room for one Gaussian release, not two
    arts = [
        env.artifacts("a", seed=401),
        env.artifacts("poor", seed=402),
        env.artifacts("poor", seed=403),  # over budget once the previous one is in
        env.artifacts("c", seed=404),
    ]
    pubs = [env.prepare(art, art.card.publisher) for art in arts]
    assert all(isinstance(p, Publication) for p in pubs)

    results = _group(env, pubs)  # type: ignore[arg-type]

    assert results[0] is True and results[1] is True and results[3] is True
    assert isinstance(results[2], PrivacyBudgetExceededError)
    committed = {arts[i].card.model_id for i in (0, 1, 3)}
    with env.db.read() as s:
        assert set(s.execute(select(ModelRow.id)).scalars()) == committed
        assert set(s.execute(select(LedgerEntryRow.model_id)).scalars()) == committed
        assert {m for _, m, _ in read_deliveries(s, sub, after=0, limit=10)} == committed
        events = s.execute(select(EventRow.model_id).where(EventRow.model_id.is_not(None)))
        assert set(events.scalars()) == committed
    assert len(env.store.keys()) == 3 and env.store.tmp_files() == []


def test_a_conflicting_member_rolls_back_alone(both_env: Env) -> None:
    env = both_env
    art = env.artifacts("a", seed=405)
    stolen = env.artifacts.resign(art.card, art.weights, "b", publisher="b")
    other = env.artifacts("c", seed=406)
    pubs = [env.prepare(a, a.card.publisher) for a in (art, stolen, other)]

    results = _group(env, pubs)  # type: ignore[arg-type]

    assert results[0] is True and results[2] is True
    assert isinstance(results[1], ConflictError)
    with env.db.read() as s:
        assert set(s.execute(select(ModelRow.id)).scalars()) == {
            art.card.model_id,
            other.card.model_id,
        }
    assert len(env.store.keys()) == 2


def test_a_failed_transaction_commits_no_member_and_leaves_no_file(
    both_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = both_env
    pubs = [env.prepare(env.artifacts(s, seed=k), s) for s, k in (("a", 407), ("b", 409))]
    with env.lock.shared():  # its files exist from the first publish on
        pass
    before = env.snapshot()

    def broken(self: Any) -> None:
        raise RuntimeError("the database went away at commit time")

    monkeypatch.setattr(FeedWriter, "close", broken)
    results = _group(env, pubs)  # type: ignore[arg-type]

    assert all(isinstance(r, RuntimeError) for r in results), results
    assert env.snapshot() == before
    assert not env.store.keys() and not env.store.tmp_files()


def test_the_same_model_twice_in_one_group_is_published_once(both_env: Env) -> None:
    env = both_env
    art = env.artifacts("a", seed=408)
    first, second = env.prepare(art, "a"), env.prepare(art, "a")

    assert _group(env, [first, second]) == [True, False]  # type: ignore[list-item]
    assert len(env.store.keys()) == 1
    with env.db.read() as s:
        assert count_releases(s, env.sites["a"].site_id) == 1


def test_a_group_costs_the_same_statements_whatever_its_size(both_env: Env) -> None:
    env = both_env
    for name in ("d", "e", "f"):
        env.add_site(name)
    _subscribe_b(env)
    counts = []
    for sites, seed in (("ac", 420), ("acdef", 430)):
        pubs = [env.prepare(env.artifacts(x, seed=seed + k), x) for k, x in enumerate(sites)]
        with statements(env.db) as seen:
            assert _group(env, pubs) == [True] * len(sites)  # type: ignore[arg-type]
        counts.append(len(seen))
    # one statement per table for the whole group, not per publication
    assert counts[0] == counts[1], counts


def test_a_group_numbers_its_rows_as_one_publish_after_the_other(both_env: Env) -> None:
    env = both_env
    sub = _subscribe_b(env)
    arts = [env.artifacts(x, seed=440 + k) for k, x in enumerate("aca")]
    pubs = [env.prepare(a, a.card.publisher) for a in arts]
    with env.db.read() as s:
        start = int(s.execute(select(func.max(EventRow.position))).scalar_one())

    assert _group(env, pubs) == [True, True, True]  # type: ignore[arg-type]

    with env.db.read() as s:
        positions = dict(s.execute(select(ModelRow.id, ModelRow.position)).all())
        events = dict(
            s.execute(
                select(EventRow.model_id, EventRow.position).where(EventRow.model_id.is_not(None))
            ).all()
        )
        deliveries = read_deliveries(s, sub, after=0, limit=10)
    ids = [a.card.model_id for a in arts]
    # "a" and "c" reach b's subscription: model, delivery, model, delivery, then the last model
    # of "a" (its second release, charged again in the group) and its delivery.
    assert [positions[m] for m in ids] == [start + 1, start + 3, start + 5]
    assert events == positions
    assert [(c, m) for c, m, _ in deliveries] == [
        (start + 2, ids[0]),
        (start + 4, ids[1]),
        (start + 6, ids[2]),
    ]
    with env.db.read() as s:
        assert count_releases(s, env.sites["a"].site_id) == 2


def test_a_failing_group_statement_commits_each_member_alone(
    both_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = both_env
    sub = _subscribe_b(env)
    env.add_site("poor", epsilon=1.0)
    arts = [env.artifacts(x, seed=450 + k) for k, x in enumerate(["a", "poor", "poor", "c"])]
    pubs = [env.prepare(a, a.card.publisher) for a in arts]
    real = publish_commit_module._insert
    calls: list[int] = []

    def fails_for_many(session: Any, writer: Any, items: Any, subscriptions: Any) -> None:
        calls.append(len(items))
        real(session, writer, items, subscriptions)
        if len(items) > 1:  # after its rows are written: the savepoint must undo them
            raise RuntimeError("a statement of the group failed")

    monkeypatch.setattr(publish_commit_module, "_insert", fails_for_many)
    results = _group(env, pubs)  # type: ignore[arg-type]

    # a and poor together (written before poor's second release is charged again), then alone;
    # poor's second release fails its charge before any row is written
    assert calls == [2, 1, 1, 1]
    assert results[0] is True and results[1] is True and results[3] is True
    assert isinstance(results[2], PrivacyBudgetExceededError)
    committed = [arts[i].card.model_id for i in (0, 1, 3)]
    with env.db.read() as s:
        assert set(s.execute(select(ModelRow.id)).scalars()) == set(committed)
        assert sorted(s.execute(select(LedgerEntryRow.model_id)).scalars()) == sorted(committed)
        positions = sorted(s.execute(select(ModelRow.position)).scalars())
        cursors = [c for c, _, _ in read_deliveries(s, sub, after=0, limit=10)]
    assert len(set(positions + cursors)) == 6  # no position handed out twice
    assert len(env.store.keys()) == 3
