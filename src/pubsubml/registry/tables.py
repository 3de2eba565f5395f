"""SQLAlchemy 2 tables of the registry (the Alembic migrations create exactly these).

Rows are named ``*Row`` to keep them apart from the domain objects they store (a ``ModelRow``
holds a :class:`~pubsubml.artifacts.card.ModelCard`).  Every feed-writing transaction takes the
single :class:`FeedClockRow` lock and numbers its rows from it, so positions are assigned and
committed in the same order (see :mod:`pubsubml.registry.services.feed_writer`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "ArtifactChunkRow",
    "ArtifactObjectRow",
    "Base",
    "ContributionRow",
    "DeliveryRow",
    "EventRow",
    "FeatureRow",
    "FeedClockRow",
    "LedgerEntryRow",
    "ModelFeatureRow",
    "ModelRow",
    "ModelVisibilityRow",
    "SiteRow",
    "SiteScopeRow",
    "SubscriptionRow",
    "UTCDateTime",
    "utcnow",
]

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware (UTC).

    PostgreSQL keeps the offset (``timestamptz``); SQLite stores text without one and reads back
    naive datetimes.  Binding converts to UTC first and reading attaches UTC, so every backend
    answers RFC 3339 timestamps with a timezone and compares them correctly.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base with a fixed constraint naming convention (stable migrations)."""

    metadata = MetaData(naming_convention=NAMING)


class SiteRow(Base):
    """A registered site: name, roles, Ed25519 public key, declared (ε, δ) budget, token hash."""

    __tablename__ = "sites"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    roles: Mapped[str] = mapped_column(String(16))
    public_key: Mapped[str | None] = mapped_column(String(64))
    key_id: Mapped[str | None] = mapped_column(String(64))
    epsilon_budget: Mapped[float] = mapped_column(Float)
    delta_budget: Mapped[float] = mapped_column(Float)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    token_created_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=utcnow)
    token_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    token_revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    token_changed_by: Mapped[str | None] = mapped_column(String(64))


class FeatureRow(Base):
    """One entry of the consortium's feature dictionary (pubsub-ml.txt §3.2)."""

    __tablename__ = "features"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    definition: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ModelRow(Base):
    """A published model: its immutable card and where its weights are stored."""

    __tablename__ = "models"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    publisher_id: Mapped[int] = mapped_column(ForeignKey("sites.id"), index=True)
    task: Mapped[str] = mapped_column(String(16))
    epsilon: Mapped[float] = mapped_column(Float)
    delta: Mapped[float] = mapped_column(Float)
    claimed_epsilon: Mapped[float] = mapped_column(Float)
    format: Mapped[str] = mapped_column(String(16))
    weights_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    storage_key: Mapped[str] = mapped_column(String(128), unique=True)
    card_json: Mapped[str] = mapped_column(Text)
    public: Mapped[bool] = mapped_column(Boolean)
    position: Mapped[int] = mapped_column(BigInteger, unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ModelFeatureRow(Base):
    """The input features of a model (for channel matching and the ``features`` filter)."""

    __tablename__ = "model_features"

    model_id: Mapped[str] = mapped_column(ForeignKey("models.id"), primary_key=True)
    feature_name: Mapped[str] = mapped_column(String(128), primary_key=True, index=True)


class ModelVisibilityRow(Base):
    """A site allowed to see a non-public model (asymmetric sharing)."""

    __tablename__ = "model_visibility"

    model_id: Mapped[str] = mapped_column(ForeignKey("models.id"), primary_key=True)
    site_id: Mapped[int] = mapped_column(ForeignKey("sites.id"), primary_key=True, index=True)


class SubscriptionRow(Base):
    """A site's subscription to a channel F1 ∨ … ∨ Fk for a task (and label set)."""

    __tablename__ = "subscriptions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    site_id: Mapped[int] = mapped_column(ForeignKey("sites.id"), index=True)
    channel: Mapped[str] = mapped_column(Text)
    task: Mapped[str] = mapped_column(String(16))
    classes_json: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class DeliveryRow(Base):
    """One model delivered to one subscription, at feed position ``cursor``."""

    __tablename__ = "deliveries"

    subscription_id: Mapped[str] = mapped_column(ForeignKey("subscriptions.id"), primary_key=True)
    cursor: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id"), index=True)

    __table_args__ = (UniqueConstraint("subscription_id", "model_id"),)


class EventRow(Base):
    """An entry of the append-only event feed."""

    __tablename__ = "events"

    position: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(32))
    site_id: Mapped[int | None] = mapped_column(ForeignKey("sites.id"))
    model_id: Mapped[str | None] = mapped_column(ForeignKey("models.id"))
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class FeedClockRow(Base):
    """The single row whose lock orders every feed-writing transaction."""

    __tablename__ = "feed_clock"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    position: Mapped[int] = mapped_column(BigInteger)


class LedgerEntryRow(Base):
    """A release charged to a site's privacy ledger."""

    __tablename__ = "ledger_entries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    site_id: Mapped[int] = mapped_column(ForeignKey("sites.id"), index=True)
    release_id: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text)
    events_json: Mapped[str] = mapped_column(Text)
    scope_json: Mapped[str | None] = mapped_column(Text)
    epsilon: Mapped[float] = mapped_column(Float)
    delta: Mapped[float] = mapped_column(Float)
    model_id: Mapped[str | None] = mapped_column(ForeignKey("models.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    __table_args__ = (UniqueConstraint("site_id", "release_id"),)


class SiteScopeRow(Base):
    """A data chunk a site declared disjoint from its other chunks, before naming it in a release."""

    __tablename__ = "site_scopes"

    site_id: Mapped[int] = mapped_column(ForeignKey("sites.id"), primary_key=True)
    label: Mapped[str] = mapped_column(String(128), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ContributionRow(Base):
    """A subscriber's normalized contribution score for one model (pfl-stacking.txt §3)."""

    __tablename__ = "contributions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    report_id: Mapped[str] = mapped_column(String(32), index=True)
    subscriber_id: Mapped[int] = mapped_column(ForeignKey("sites.id"), index=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id"), index=True)
    score: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ArtifactObjectRow(Base):
    """Published weights held in the database (``--store database``): size, digest, chunks.

    Written with its chunks in one transaction
    (:mod:`pubsubml.registry.infrastructure.database_artifact_store`), so an object row is never
    seen without all of its chunks.
    """

    __tablename__ = "artifact_objects"

    storage_key: Mapped[str] = mapped_column(String(32), primary_key=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    chunk_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ArtifactChunkRow(Base):
    """One chunk of an :class:`ArtifactObjectRow` (``seq`` from 0; BLOB on SQLite, bytea on
    PostgreSQL)."""

    __tablename__ = "artifact_chunks"

    storage_key: Mapped[str] = mapped_column(
        ForeignKey("artifact_objects.storage_key"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    data: Mapped[bytes] = mapped_column(LargeBinary)


Index("ix_events_model_id", EventRow.model_id)
