"""Initial registry schema: sites, features, models, subscriptions, feed, ledger, contributions.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create every table and the feed clock row."""
    op.create_table(
        "sites",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("roles", sa.String(length=16), nullable=False),
        sa.Column("public_key", sa.String(length=64), nullable=True),
        sa.Column("key_id", sa.String(length=64), nullable=True),
        sa.Column("epsilon_budget", sa.Float(), nullable=False),
        sa.Column("delta_budget", sa.Float(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sites")),
        sa.UniqueConstraint("name", name=op.f("uq_sites_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_sites_token_hash")),
    )
    op.create_table(
        "features",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_features")),
    )
    op.create_table(
        "feed_clock",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feed_clock")),
    )
    op.create_table(
        "models",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("publisher_id", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(length=16), nullable=False),
        sa.Column("epsilon", sa.Float(), nullable=False),
        sa.Column("delta", sa.Float(), nullable=False),
        sa.Column("claimed_epsilon", sa.Float(), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("weights_sha256", sa.String(length=64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("storage_key", sa.String(length=128), nullable=False),
        sa.Column("card_json", sa.Text(), nullable=False),
        sa.Column("public", sa.Boolean(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["publisher_id"], ["sites.id"], name=op.f("fk_models_publisher_id_sites")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_models")),
        sa.UniqueConstraint("position", name=op.f("uq_models_position")),
        sa.UniqueConstraint("storage_key", name=op.f("uq_models_storage_key")),
        sa.UniqueConstraint("weights_sha256", name=op.f("uq_models_weights_sha256")),
    )
    op.create_index(op.f("ix_models_publisher_id"), "models", ["publisher_id"])
    op.create_table(
        "model_features",
        sa.Column("model_id", sa.String(length=32), nullable=False),
        sa.Column("feature_name", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name=op.f("fk_model_features_model_id_models")
        ),
        sa.PrimaryKeyConstraint("model_id", "feature_name", name=op.f("pk_model_features")),
    )
    op.create_index(op.f("ix_model_features_feature_name"), "model_features", ["feature_name"])
    op.create_table(
        "model_visibility",
        sa.Column("model_id", sa.String(length=32), nullable=False),
        sa.Column("site_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name=op.f("fk_model_visibility_model_id_models")
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["sites.id"], name=op.f("fk_model_visibility_site_id_sites")
        ),
        sa.PrimaryKeyConstraint("model_id", "site_id", name=op.f("pk_model_visibility")),
    )
    op.create_index(op.f("ix_model_visibility_site_id"), "model_visibility", ["site_id"])
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("site_id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("task", sa.String(length=16), nullable=False),
        sa.Column("classes_json", sa.Text(), nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["site_id"], ["sites.id"], name=op.f("fk_subscriptions_site_id_sites")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
    )
    op.create_index(op.f("ix_subscriptions_site_id"), "subscriptions", ["site_id"])
    op.create_table(
        "deliveries",
        sa.Column("subscription_id", sa.String(length=32), nullable=False),
        sa.Column("cursor", sa.BigInteger(), nullable=False),
        sa.Column("model_id", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name=op.f("fk_deliveries_model_id_models")
        ),
        sa.ForeignKeyConstraint(
            ["subscription_id"],
            ["subscriptions.id"],
            name=op.f("fk_deliveries_subscription_id_subscriptions"),
        ),
        sa.PrimaryKeyConstraint("subscription_id", "cursor", name=op.f("pk_deliveries")),
        sa.UniqueConstraint(
            "subscription_id", "model_id", name=op.f("uq_deliveries_subscription_id")
        ),
    )
    op.create_index(op.f("ix_deliveries_model_id"), "deliveries", ["model_id"])
    op.create_table(
        "events",
        sa.Column("position", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("site_id", sa.Integer(), nullable=True),
        sa.Column("model_id", sa.String(length=32), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"], name=op.f("fk_events_model_id_models")),
        sa.ForeignKeyConstraint(["site_id"], ["sites.id"], name=op.f("fk_events_site_id_sites")),
        sa.PrimaryKeyConstraint("position", name=op.f("pk_events")),
    )
    op.create_index("ix_events_model_id", "events", ["model_id"])
    op.create_table(
        "ledger_entries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("site_id", sa.Integer(), nullable=False),
        sa.Column("release_id", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("events_json", sa.Text(), nullable=False),
        sa.Column("scope_json", sa.Text(), nullable=True),
        sa.Column("epsilon", sa.Float(), nullable=False),
        sa.Column("delta", sa.Float(), nullable=False),
        sa.Column("model_id", sa.String(length=32), nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name=op.f("fk_ledger_entries_model_id_models")
        ),
        sa.ForeignKeyConstraint(
            ["site_id"], ["sites.id"], name=op.f("fk_ledger_entries_site_id_sites")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_entries")),
        sa.UniqueConstraint("site_id", "release_id", name=op.f("uq_ledger_entries_site_id")),
    )
    op.create_index(op.f("ix_ledger_entries_site_id"), "ledger_entries", ["site_id"])
    op.create_table(
        "contributions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("report_id", sa.String(length=32), nullable=False),
        sa.Column("subscriber_id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.String(length=32), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name=op.f("fk_contributions_model_id_models")
        ),
        sa.ForeignKeyConstraint(
            ["subscriber_id"], ["sites.id"], name=op.f("fk_contributions_subscriber_id_sites")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_contributions")),
    )
    op.create_index(op.f("ix_contributions_model_id"), "contributions", ["model_id"])
    op.create_index(op.f("ix_contributions_report_id"), "contributions", ["report_id"])
    op.create_index(op.f("ix_contributions_subscriber_id"), "contributions", ["subscriber_id"])
    clock = sa.table("feed_clock", sa.column("id", sa.Integer()), sa.column("position", sa.BigInteger()))
    op.bulk_insert(clock, [{"id": 1, "position": 0}])


def downgrade() -> None:
    """Drop every table."""
    for name in (
        "contributions",
        "ledger_entries",
        "events",
        "deliveries",
        "subscriptions",
        "model_visibility",
        "model_features",
        "models",
        "feed_clock",
        "features",
        "sites",
    ):
        op.drop_table(name)
