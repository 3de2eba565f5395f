"""Subscriptions: a site, a channel F1 ∨ … ∨ Fk, a task and a label set (pubsub-ml.txt §3.2).

Creating a subscription delivers, in the same transaction, every matching model published
before it (in publication order), so a site that joins late sees the whole history; later
models are delivered by the publish transaction.  Both hold the feed lock, so every model reaches
every matching subscription exactly once (:mod:`pubsubml.registry.services.feed`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pubsubml.errors import NotFoundError, PermissionDeniedError, SchemaMismatchError
from pubsubml.registry.auth import Principal
from pubsubml.registry.schemas import SubscriptionCreate, SubscriptionPublic
from pubsubml.registry.services.features import known_features
from pubsubml.registry.services.feed import FeedWriter, SubscriptionMatch
from pubsubml.registry.services.sites import get_site_row
from pubsubml.registry.tables import (
    ModelFeatureRow,
    ModelRow,
    ModelVisibilityRow,
    SiteRow,
    SubscriptionRow,
    utcnow,
)
from pubsubml.schema import Channel

__all__ = ["create_subscription", "get_subscription", "list_subscriptions"]


def _public(row: SubscriptionRow, site: str) -> SubscriptionPublic:
    classes = None if row.classes_json is None else json.loads(row.classes_json)
    return SubscriptionPublic(
        id=row.id,
        site=site,
        channel=row.channel,
        task=row.task,  # type: ignore[arg-type]
        classes=classes,
        created_at=row.created_at,
    )


def _backfill(session: Session, writer: FeedWriter, match: SubscriptionMatch) -> int:
    models = session.execute(
        select(ModelRow.id, ModelRow.publisher_id, ModelRow.public, ModelRow.card_json)
        .where(ModelRow.task == match.task, ModelRow.publisher_id != match.site_id)
        .order_by(ModelRow.position)
    ).all()
    if not models:
        return 0
    ids = [m.id for m in models]
    features: dict[str, list[str]] = {}
    for mid, name in session.execute(
        select(ModelFeatureRow.model_id, ModelFeatureRow.feature_name).where(
            ModelFeatureRow.model_id.in_(ids)
        )
    ).all():
        features.setdefault(mid, []).append(name)
    listed = set(
        session.execute(
            select(ModelVisibilityRow.model_id).where(ModelVisibilityRow.site_id == match.site_id)
        ).scalars()
    )
    n = 0
    for m in models:
        classes: list[Any] | None = json.loads(m.card_json).get("classes")
        if match.accepts(
            publisher_id=m.publisher_id,
            task=match.task,
            classes=classes,
            features=features.get(m.id, ()),
            public=m.public,
            visible_to=frozenset({match.site_id}) if m.id in listed else frozenset(),
        ):
            writer.deliver(match.subscription_id, m.id)
            n += 1
    return n


def create_subscription(
    session: Session, principal: Principal, body: SubscriptionCreate
) -> SubscriptionPublic:
    """Subscribe a site to a channel and deliver the matching models already published.

    Raises
    ------
    ChannelSyntaxError
        The channel text does not parse.
    SchemaMismatchError
        The channel names features outside the dictionary.
    PermissionDeniedError
        A site subscribes for another site, or lacks the subscriber role.
    NotFoundError
        Unknown site.
    """
    channel = Channel.parse(body.channel)
    site_name = body.site or principal.name
    if principal.is_admin and body.site is None:
        raise PermissionDeniedError("the administrator must name the subscribing site")
    principal.require_site(site_name, "subscribe")
    site = get_site_row(session, site_name)
    if site.roles not in ("subscriber", "both"):
        raise PermissionDeniedError(f"site {site.name!r} does not have the subscriber role")
    unknown = sorted(channel.features - known_features(session, channel.features))
    if unknown:
        raise SchemaMismatchError(
            f"the channel names features {unknown[:10]} that are not in the feature dictionary"
        )
    writer = FeedWriter(session)
    row = SubscriptionRow(
        id=uuid.uuid4().hex,
        site_id=site.id,
        channel=str(channel),
        task=body.task,
        classes_json=None if body.classes is None else json.dumps(body.classes),
        created_at=utcnow(),
    )
    session.add(row)
    session.flush()
    delivered = _backfill(session, writer, SubscriptionMatch.from_row(row))
    writer.event(
        "subscription.created",
        {
            "subscription_id": row.id,
            "channel": row.channel,
            "task": row.task,
            "backfilled": delivered,
        },
        site_id=site.id,
    )
    writer.close()
    return _public(row, site.name)


def get_subscription(
    session: Session, principal: Principal, subscription_id: str
) -> SubscriptionPublic:
    """A subscription of the caller (any, for the administrator).

    Raises
    ------
    NotFoundError
        Unknown id, or another site's subscription (indistinguishable).
    """
    stmt = (
        select(SubscriptionRow, SiteRow.name)
        .join(SiteRow, SiteRow.id == SubscriptionRow.site_id)
        .where(SubscriptionRow.id == str(subscription_id)[:64])
    )
    found = session.execute(stmt).first()
    if found is None or not (principal.is_admin or found[0].site_id == principal.site_id):
        raise NotFoundError(f"subscription {str(subscription_id)[:80]!r} not found")
    return _public(found[0], found[1])


def list_subscriptions(session: Session, principal: Principal) -> list[SubscriptionPublic]:
    """The caller's subscriptions (every subscription, for the administrator)."""
    stmt = select(SubscriptionRow, SiteRow.name).join(
        SiteRow, SiteRow.id == SubscriptionRow.site_id
    )
    if not principal.is_admin:
        stmt = stmt.where(SubscriptionRow.site_id == principal.site_id)
    rows = session.execute(stmt.order_by(SubscriptionRow.created_at, SubscriptionRow.id)).all()
    return [_public(r, n) for r, n in rows]
