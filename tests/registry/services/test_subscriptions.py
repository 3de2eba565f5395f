"""Tests of pubsubml.registry.services.subscriptions: creation with backfill, reading, listing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, insert, select

from pubsubml.artifacts.card import ModelCard
from pubsubml.artifacts.validation import validate_untrusted
from pubsubml.errors import NotFoundError, PermissionDeniedError
from pubsubml.registry.auth import ADMIN, Principal
from pubsubml.registry.infrastructure.artifact_store import ArtifactStore
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.infrastructure.upload_lock import UploadLock
from pubsubml.registry.schemas import ModelPublic, SiteCreate, SubscriptionCreate
from pubsubml.registry.services.features import add_features
from pubsubml.registry.services.feed_reader import read_deliveries
from pubsubml.registry.services.feed_writer import FeedWriter
from pubsubml.registry.services.publish import publish_model
from pubsubml.registry.services.sites import create_site
from pubsubml.registry.services.subscriptions import (
    create_subscription,
    get_subscription,
    list_subscriptions,
)
from pubsubml.registry.tables import (
    EventRow,
    ModelFeatureRow,
    ModelRow,
    ModelVisibilityRow,
    SiteRow,
)
from registry.conftest import model_row


class LocalValidator:
    """Runs the validation workers' checks in this process."""

    def validate(
        self, card: ModelCard, weights: bytes, *, site_delta: float, max_weights_bytes: int
    ) -> float:
        return validate_untrusted(
            card, weights, site_delta=site_delta, max_weights_bytes=max_weights_bytes
        )


@dataclass
class Env:
    db: Database
    store: ArtifactStore
    sites: dict[str, Principal]
    artifacts: Any

    def publish(self, site: str, **kwargs: Any) -> ModelPublic:
        art = self.artifacts(site, **kwargs)
        return publish_model(
            self.db,
            self.store,
            self.sites[site],
            art.card.to_json(),
            art.weights,
            lock=UploadLock(self.db, self.store.root),
            validator=LocalValidator(),  # type: ignore[arg-type]
            max_weights_bytes=1 << 20,
        )

    def subscribe(self, who: str | Principal, **body: Any) -> Any:
        principal = self.sites[who] if isinstance(who, str) else who
        with self.db.write() as s:
            return create_subscription(s, principal, SubscriptionCreate(**body))


@pytest.fixture
def env(sqlite_template: Path, tmp_path: Path, artifacts: Any, support: Any) -> Iterator[Env]:
    path = tmp_path / "registry.db"
    shutil.copy(sqlite_template, path)
    db = Database(f"sqlite:///{path}")
    sites = {}
    with db.write() as s:
        add_features(s, ADMIN, support.DICTIONARY.features)
        for name in ("a", "b", "c"):
            body = SiteCreate(
                name=name,
                public_key=artifacts.public_key(name),
                epsilon_budget=50.0,
                delta_budget=1e-5,
            )
            create_site(s, ADMIN, body)
            site_id = s.execute(select(SiteRow.id).where(SiteRow.name == name)).scalar_one()
            sites[name] = Principal(kind="site", site_id=site_id, name=name, roles="both")
    yield Env(db, ArtifactStore(tmp_path / "store"), sites, artifacts)
    db.dispose()


def test_a_new_subscription_receives_the_matching_history_in_order(env: Env) -> None:
    m1 = env.publish("a", seed=400, features=("age", "sex"))
    env.publish("c", seed=401, features=("wbc",))  # outside the channel
    m3 = env.publish("c", seed=402, features=("age",))
    env.publish("b", seed=403, features=("age",))  # the subscriber's own
    env.publish("a", seed=404, features=("age",), classes=None)  # regression
    m6 = env.publish("a", seed=405, features=("age", "bmi"), classes=(0, 1, 2))
    created = env.subscribe("b", channel="age", task="classification")
    with env.db.read() as s:
        items = read_deliveries(s, created.id, after=0, limit=100)
        newest = s.execute(select(func.max(ModelRow.position))).scalar_one()
        event = s.execute(select(EventRow).order_by(EventRow.position.desc())).scalars().first()
    assert [m for _, m, _ in items] == [m1.model_id, m3.model_id, m6.model_id]
    cursors = [c for c, _, _ in items]
    assert cursors == sorted(cursors) and cursors[0] > newest
    assert event is not None and event.kind == "subscription.created"
    assert event.site_id == env.sites["b"].site_id and event.position > cursors[-1]
    assert json.loads(event.payload) == {
        "subscription_id": created.id,
        "channel": "age",
        "task": "classification",
        "backfilled": 3,
    }


def test_the_label_set_limits_the_backfill(env: Env) -> None:
    binary = env.publish("a", seed=406)
    env.publish("a", seed=407, classes=(0, 1, 2))
    created = env.subscribe("b", channel="age", task="classification", classes=[0, 1])
    with env.db.read() as s:
        items = read_deliveries(s, created.id, after=0, limit=100)
    assert [m for _, m, _ in items] == [binary.model_id]


def test_the_channel_is_stored_canonical_with_its_labels(env: Env) -> None:
    created = env.subscribe(
        "b", channel="sex ∧ age ∨ wbc", task="classification", classes=["no", "yes"]
    )
    assert (created.site, created.channel, created.classes) == (
        "b",
        "age & sex | wbc",
        ["no", "yes"],
    )
    with env.db.read() as s:
        assert get_subscription(s, env.sites["b"], created.id) == created


def test_the_admin_subscribes_only_for_a_named_site(env: Env) -> None:
    with pytest.raises(PermissionDeniedError, match="must name"):
        env.subscribe(ADMIN, channel="age", task="classification")
    with pytest.raises(NotFoundError):
        env.subscribe(ADMIN, site="nobody", channel="age", task="classification")
    created = env.subscribe(ADMIN, site="c", channel="age", task="regression")
    assert created.site == "c"
    with env.db.read() as s:
        assert [x.id for x in list_subscriptions(s, env.sites["c"])] == [created.id]


def test_listing_and_reading_are_limited_to_the_callers_own(env: Env) -> None:
    mine = [env.subscribe("b", channel=c, task="classification") for c in ("age", "wbc")]
    theirs = env.subscribe("c", channel="sex", task="classification")
    with env.db.read() as s:
        assert [x.id for x in list_subscriptions(s, env.sites["b"])] == [x.id for x in mine]
        assert {x.id for x in list_subscriptions(s, ADMIN)} == {x.id for x in [*mine, theirs]}
        assert list_subscriptions(s, env.sites["a"]) == []
        assert get_subscription(s, ADMIN, theirs.id) == theirs
        for who, sub in ((env.sites["b"], theirs.id), (ADMIN, theirs.id + "0" * 80)):
            with pytest.raises(NotFoundError, match="not found"):
                get_subscription(s, who, sub)


# ---- large histories and the feed lock -----------------------------------------------------
def _bulk_history(db: Database, support: Any, n: int) -> tuple[Principal, int, list[str]]:
    """Sites "pub" and "sub", and ``n`` models of "pub" written straight into the database:
    every third one has the channel's feature "age", every fifth is private and listed for
    "sub".  Returns the subscriber, the publisher's id and the ids "age" must deliver to the
    subscriber, in order."""
    with db.write() as s:
        add_features(s, ADMIN, support.DICTIONARY.features)
        sites = []
        for name in ("pub", "sub"):
            row = SiteRow(name=name, roles="both", epsilon_budget=1.0, delta_budget=1e-5)
            row.token_hash = name[0] * 64
            s.add(row)
            s.flush()
            sites.append(row.id)
        pub, sub = sites
        writer = FeedWriter(s)
        first = writer.position + 1
        ids = [f"{i:032x}" for i in range(n)]
        conn = s.connection()
        conn.execute(
            insert(ModelRow),
            [
                {
                    "id": m,
                    "publisher_id": pub,
                    "task": "classification",
                    "epsilon": 1.0,
                    "delta": 1e-5,
                    "claimed_epsilon": 1.0,
                    "format": "safetensors",
                    "weights_sha256": m * 2,
                    "size_bytes": 1,
                    "storage_key": m,
                    "card_json": '{"classes": [0, 1]}',
                    "public": i % 5 != 0,
                    "position": first + i,
                }
                for i, m in enumerate(ids)
            ],
        )
        conn.execute(
            insert(ModelFeatureRow),
            [
                {"model_id": m, "feature_name": "age" if i % 3 == 0 else "wbc"}
                for i, m in enumerate(ids)
            ],
        )
        conn.execute(
            insert(ModelVisibilityRow),
            [{"model_id": m, "site_id": sub} for i, m in enumerate(ids) if i % 5 == 0],
        )
        writer.position = first + n - 1
        writer.close()
    principal = Principal(kind="site", site_id=sub, name="sub", roles="both")
    return principal, pub, [m for i, m in enumerate(ids) if i % 3 == 0]


def test_a_history_beyond_the_databases_parameter_limit_is_delivered(
    backend: Any, support: Any
) -> None:
    """More models than one statement may bind (65,535 parameters in PostgreSQL's protocol;
    32,766 in SQLite's default build): the backfill names no model ids in its statements."""
    n = 66_000
    db = Database(backend.url)
    try:
        subscriber, _, expected = _bulk_history(db, support, n)
        with db.write() as s:
            created = create_subscription(
                s, subscriber, SubscriptionCreate(channel="age", task="classification")
            )
        with db.read() as s:
            got = [m for _, m, _ in read_deliveries(s, created.id, after=0, limit=n)]
        assert got == expected
    finally:
        db.dispose()


@pytest.mark.postgres
def test_a_model_committed_while_the_history_is_read_is_delivered_once(
    pg_migrated: str, support: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history is read before the feed lock; a model another transaction commits before the
    lock is taken is read under it (the publish could not see the uncommitted subscription)."""
    from pubsubml.registry.services import subscriptions as module

    support._empty_postgres(pg_migrated)
    db = Database(pg_migrated)
    try:
        subscriber, publisher, expected = _bulk_history(db, support, 30)
        late = f"{10**6:032x}"

        class PublishFirst(FeedWriter):
            def __init__(self, session: Any) -> None:
                with db.write() as other:  # another connection: commits at once
                    writer = FeedWriter(other)
                    other.add(model_row(late, publisher, writer.next_position()))
                    other.flush()
                    other.add(ModelFeatureRow(model_id=late, feature_name="age"))
                    writer.close()
                super().__init__(session)

        monkeypatch.setattr(module, "FeedWriter", PublishFirst)
        with db.write() as s:
            created = create_subscription(
                s, subscriber, SubscriptionCreate(channel="age", task="classification")
            )
        with db.read() as s:
            got = [m for _, m, _ in read_deliveries(s, created.id, after=0, limit=100)]
        assert got == [*expected, late]
    finally:
        db.dispose()
