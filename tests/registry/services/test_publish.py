"""Tests of pubsubml.registry.services.publish: card parsing, the checks, and the commit."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.validation import validate_untrusted
from pubsubml.errors import (
    ConflictError,
    DataValidationError,
    NotFoundError,
    PermissionDeniedError,
    PrivacyBudgetExceededError,
    SignatureError,
    UntrustedArtifactError,
)
from pubsubml.privacy.accountants import compute_epsilon
from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.database import Database
from pubsubml.registry.schemas import ModelPublic, SiteCreate, SubscriptionCreate
from pubsubml.registry.services import publish as publish_module
from pubsubml.registry.services.features import add_features
from pubsubml.registry.services.feed import FeedWriter, read_deliveries
from pubsubml.registry.services.ledger import count_releases
from pubsubml.registry.services.models import get_model
from pubsubml.registry.services.publish import (
    Publication,
    commit_group,
    commit_publication,
    parse_card,
    prepare_publication,
    publish_model,
)
from pubsubml.registry.services.sites import create_site
from pubsubml.registry.services.subscriptions import create_subscription
from pubsubml.registry.store import ArtifactStore
from pubsubml.registry.tables import EventRow, LedgerEntryRow, ModelRow, SiteRow
from pubsubml.registry.upload_lock import UploadLock
from registry.conftest import statements

MAX_BYTES = 1 << 20


class LocalValidator:
    """Runs the validation workers' checks in this process, counting the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def validate(
        self, card: ModelCard, weights: bytes, *, site_delta: float, max_weights_bytes: int
    ) -> float:
        self.calls += 1
        return validate_untrusted(
            card, weights, site_delta=site_delta, max_weights_bytes=max_weights_bytes
        )


@dataclass
class Env:
    db: Database
    store: ArtifactStore
    lock: UploadLock
    sites: dict[str, Principal]
    validator: LocalValidator
    artifacts: Any
    support: Any

    def add_site(self, name: str, roles: str = "both", epsilon: float = 50.0) -> Principal:
        key = None if roles == "subscriber" else self.artifacts.public_key(name)
        body = SiteCreate(
            name=name, roles=roles, public_key=key, epsilon_budget=epsilon, delta_budget=1e-5
        )  # type: ignore[arg-type]
        with self.db.write() as s:
            create_site(s, ADMIN, body)
            site_id = s.execute(select(SiteRow.id).where(SiteRow.name == name)).scalar_one()
        self.sites[name] = Principal(kind="site", site_id=site_id, name=name, roles=roles)  # type: ignore[arg-type]
        return self.sites[name]

    def prepare(
        self, art: Any, site: str | Principal, visible_to: list[str] | None = None
    ) -> Publication | ModelPublic:
        principal = self.sites[site] if isinstance(site, str) else site
        with self.db.read() as s:
            return prepare_publication(
                s,
                principal,
                art.card.to_json(),
                art.weights,
                validator=self.validator,  # type: ignore[arg-type]
                visible_to=visible_to,
                max_weights_bytes=MAX_BYTES,
            )

    def commit(self, pub: Publication, site: str) -> ModelPublic:
        return commit_publication(self.db, self.store, self.lock, self.sites[site], pub)

    def snapshot(self) -> dict[str, Any]:
        return dict(self.support.snapshot(self.db, self.store.root))


def _make_env(url: str, tmp_path: Path, artifacts: Any, support: Any) -> Env:
    db = Database(url)
    store = tmp_path / "store"
    e = Env(
        db, ArtifactStore(store), UploadLock(db, store), {}, LocalValidator(), artifacts, support
    )
    with db.write() as s:
        add_features(s, ADMIN, support.DICTIONARY.features)
    for name in ("a", "b", "c"):
        e.add_site(name)
    return e


@pytest.fixture
def env(sqlite_template: Path, tmp_path: Path, artifacts: Any, support: Any) -> Iterator[Env]:
    path = tmp_path / "registry.db"
    shutil.copy(sqlite_template, path)
    e = _make_env(f"sqlite:///{path}", tmp_path, artifacts, support)
    yield e
    e.db.dispose()


@pytest.fixture
def both_env(backend: Any, tmp_path: Path, artifacts: Any, support: Any) -> Iterator[Env]:
    """:func:`env` on each storage backend (SQLite file, PostgreSQL schema)."""
    e = _make_env(backend.url, tmp_path, artifacts, support)
    yield e
    e.db.dispose()


# ---- parse_card ---------------------------------------------------------------------------
def test_parse_card_accepts_text_and_bytes(artifacts: Any) -> None:
    card = artifacts("a", seed=200).card
    assert parse_card(card.to_json()) == card
    assert parse_card(card.to_json().encode()) == card


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (b"{not json", "card: Invalid JSON"),
        (b"[1]", "card: Input should be an object"),
        (b"{}", "model_id: Field required"),
    ],
)
def test_parse_card_names_the_problem(text: bytes, fragment: str) -> None:
    with pytest.raises(DataValidationError, match=r"^malformed model card: ") as info:
        parse_card(text)
    assert fragment in str(info.value)


def test_parse_card_lists_at_most_five_problems_and_names_nested_fields(artifacts: Any) -> None:
    with pytest.raises(DataValidationError) as info:
        parse_card("{}")
    assert str(info.value).count("Field required") == 5
    data = json.loads(artifacts("a", seed=200).card.to_json())
    data["privacy"]["epsilon"] = "a lot"
    with pytest.raises(DataValidationError, match=r"privacy\.epsilon: "):
        parse_card(json.dumps(data))


def test_parse_card_refuses_an_oversized_card() -> None:
    with pytest.raises(UntrustedArtifactError, match="limit"):
        parse_card(" " * (2 << 20))


# ---- prepare_publication -------------------------------------------------------------------
def test_prepare_checks_everything_and_writes_nothing(env: Env) -> None:
    art = env.artifacts("a", seed=201)
    before = env.snapshot()
    pub = env.prepare(art, "a", visible_to=["c", "b", "b"])
    assert isinstance(pub, Publication)
    assert env.snapshot() == before and env.validator.calls == 1
    expected = compute_epsilon(list(art.card.privacy.events), art.card.privacy.delta)
    assert pub.epsilon == pytest.approx(expected)
    assert (
        pub.card == art.card and pub.weights == art.weights and pub.card_json == art.card.to_json()
    )
    assert pub.site_id == env.sites["a"].site_id and pub.ledger_size == 0
    assert pub.visible_to == [env.sites["b"].site_id, env.sites["c"].site_id]
    assert pub.release.release_id == art.card.model_id


def test_prepare_counts_earlier_releases(env: Env) -> None:
    first = env.prepare(env.artifacts("a", seed=202), "a")
    assert isinstance(first, Publication)
    env.commit(first, "a")
    second = env.prepare(env.artifacts("a", seed=203), "a")
    assert isinstance(second, Publication) and second.ledger_size == 1


def test_an_already_published_model_is_returned_without_validation(env: Env) -> None:
    art = env.artifacts("a", seed=204)
    pub = env.prepare(art, "a")
    assert isinstance(pub, Publication)
    env.commit(pub, "a")
    calls = env.validator.calls
    again = env.prepare(art, "a")
    assert isinstance(again, ModelPublic)
    assert again.created is False and again.model_id == art.card.model_id
    assert env.validator.calls == calls


def test_only_publishing_sites_publish(env: Env) -> None:
    reader = env.add_site("reader", roles="subscriber")
    art = env.artifacts("reader", seed=205)
    for principal in (ADMIN, reader):
        with pytest.raises(PermissionDeniedError, match="may not publish"):
            env.prepare(art, principal)
    assert env.validator.calls == 0


def test_a_site_without_a_registered_key_cannot_publish(env: Env) -> None:
    with env.db.write() as s:
        s.execute(update(SiteRow).where(SiteRow.name == "a").values(public_key=None, key_id=None))
    with pytest.raises(SignatureError, match="no registered public key"):
        env.prepare(env.artifacts("a", seed=206), "a")


def test_a_site_that_is_not_registered_cannot_publish(env: Env) -> None:
    ghost = Principal(kind="site", site_id=10_000, name="ghost", roles="both")  # type: ignore[arg-type]
    with pytest.raises(NotFoundError, match="ghost"):
        env.prepare(env.artifacts("ghost", seed=207), ghost)
    assert env.validator.calls == 0


# ---- commit_publication --------------------------------------------------------------------
def test_commit_inserts_model_event_ledger_entry_and_deliveries(env: Env) -> None:
    subs = {}
    for name in ("b", "c"):
        body = SubscriptionCreate(channel="age", task="classification")
        with env.db.write() as s:
            subs[name] = create_subscription(s, env.sites[name], body).id
    art = env.artifacts("a", seed=207)
    pub = env.prepare(art, "a", visible_to=["b"])
    assert isinstance(pub, Publication)
    model = env.commit(pub, "a")
    assert model.created is True and model.visible_to == ["b"] and model.epsilon == pub.epsilon
    with env.db.read() as s:
        row = s.get(ModelRow, art.card.model_id)
        assert row is not None and env.store.read(row.storage_key) == art.weights
        event = s.execute(select(EventRow).where(EventRow.model_id == row.id)).scalar_one()
        assert (event.kind, event.position) == ("model.published", row.position)
        entry = s.execute(select(LedgerEntryRow)).scalar_one()
        assert (entry.release_id, entry.model_id) == (row.id, row.id)
        assert entry.epsilon == pub.epsilon
        ((cursor, model_id, card_json),) = read_deliveries(s, subs["b"], after=0, limit=10)
        assert model_id == row.id and cursor > row.position and card_json == art.card.to_json()
        assert read_deliveries(s, subs["c"], after=0, limit=10) == []


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


@pytest.mark.parametrize("visible_to", [None, ["c", "a", "c"]])
def test_publish_model_is_idempotent_and_validates_once(
    env: Env, visible_to: list[str] | None
) -> None:
    art = env.artifacts("b", seed=211)

    def publish() -> ModelPublic:
        return publish_model(
            env.db,
            env.store,
            env.sites["b"],
            art.card.to_json(),
            art.weights,
            lock=env.lock,
            validator=env.validator,  # type: ignore[arg-type]
            visible_to=visible_to,
            max_weights_bytes=MAX_BYTES,
        )

    first, second = publish(), publish()  # the answer built from the new row, then one read
    assert (first.created, second.created) == (True, False)
    assert second.model_dump(exclude={"created"}) == first.model_dump(exclude={"created"})
    with env.db.read() as s:
        stored = get_model(s, env.sites["b"], first.model_id)
    assert stored.model_dump(exclude={"created"}) == first.model_dump(exclude={"created"})
    assert first.visible_to == (None if visible_to is None else ["a", "c"])
    assert env.validator.calls == 1


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
    real = publish_module._insert
    calls: list[int] = []

    def fails_for_many(session: Any, writer: Any, items: Any, subscriptions: Any) -> None:
        calls.append(len(items))
        real(session, writer, items, subscriptions)
        if len(items) > 1:  # after its rows are written: the savepoint must undo them
            raise RuntimeError("a statement of the group failed")

    monkeypatch.setattr(publish_module, "_insert", fails_for_many)
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
