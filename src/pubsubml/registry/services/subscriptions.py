"""Subscriptions: a site, a channel F1 ∨ … ∨ Fk, a task and a label set (pubsub-ml.txt §3.2).

Creating a subscription delivers, in the same transaction, every matching model published
before it (in publication order), so a site that joins late sees the whole history; later
models are delivered by the publish transaction.  Both hold the feed lock while they append, so
every model reaches every matching subscription exactly once
(:mod:`pubsubml.registry.services.feed_writer`).  The history is read and matched before the lock is
taken, and only the models committed meanwhile are read under it: positions are committed in
increasing order, so those are the ones above the highest position read.
"""

from __future__ import annotations

import json
import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from pubsubml.errors import NotFoundError, PermissionDeniedError, SchemaMismatchError
from pubsubml.registry.auth import Principal
from pubsubml.registry.schemas import SubscriptionCreate, SubscriptionPublic
from pubsubml.registry.services.features import known_features
from pubsubml.registry.services.feed_writer import FeedWriter
from pubsubml.registry.services.sites import get_site_row
from pubsubml.registry.services.subscription_match import SubscriptionMatch
from pubsubml.registry.tables import (
    ModelFeatureRow,
    ModelRow,
    ModelVisibilityRow,
    SiteRow,
    SubscriptionRow,
    utcnow,
)
from pubsubml.schema import Channel

__all__ = [
    "create_subscription",
    "get_subscription",
    "list_subscriptions",
    "matching_history",
]


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


def matching_history(
    session: Session, match: SubscriptionMatch, *, after: int = 0
) -> tuple[list[str], int]:
    """The published models ``match`` accepts with a position above ``after``, in order.

    Three statements, whatever the size of the history: the task's models from other sites (the
    cards only when the subscription has a label set), their input features among the channel's
    (none for ``*``), and the ones listed as visible to the subscriber.  Every feature of every
    term is among the channel's, so those are all :meth:`SubscriptionMatch.accepts` needs.

    Returns
    -------
    model_ids : list of str
        In position order.
    seen : int
        The highest position of the task's models from other sites that were read (``after``
        when none): committed positions only grow, so a later call with ``after=seen`` reads
        exactly the models committed since.
    """
    m = ModelRow.__table__.c
    mf, mv = ModelFeatureRow.__table__, ModelVisibilityRow.__table__
    scope = (m.task == match.task, m.publisher_id != match.site_id, m.position > after)
    labels = match.classes is not None
    columns = [m.id, m.publisher_id, m.public, m.position, *([m.card_json] if labels else [])]
    models = session.execute(select(*columns).where(*scope).order_by(m.position)).all()
    if not models:
        return [], after
    wanted = sorted(match.channel.features)
    features: dict[str, list[str]] = {}
    if wanted:
        for model_id, name in session.execute(
            select(mf.c.model_id, mf.c.feature_name)
            .select_from(mf.join(ModelRow.__table__, m.id == mf.c.model_id))
            .where(*scope, mf.c.feature_name.in_(wanted))
        ):
            features.setdefault(model_id, []).append(name)
    listed = set(
        session.execute(
            select(mv.c.model_id)
            .select_from(mv.join(ModelRow.__table__, m.id == mv.c.model_id))
            .where(*scope, mv.c.site_id == match.site_id)
        ).scalars()
    )
    mine = frozenset({match.site_id})
    accepted = [
        row.id
        for row in models
        if match.accepts(
            publisher_id=row.publisher_id,
            task=match.task,
            classes=json.loads(row.card_json).get("classes") if labels else None,
            features=features.get(row.id, ()),
            public=row.public,
            visible_to=mine if row.id in listed else frozenset(),
        )
    ]
    return accepted, int(models[-1].position)


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
    # The history is read and matched before the feed lock, which every publish of every replica
    # waits for; holding it, only the models committed since are read (usually none).
    match = SubscriptionMatch.from_row(row)
    history, seen = matching_history(session, match)
    writer = FeedWriter(session)
    history += matching_history(session, match, after=seen)[0]
    delivered = len(writer.deliver_many(row.id, history))
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
