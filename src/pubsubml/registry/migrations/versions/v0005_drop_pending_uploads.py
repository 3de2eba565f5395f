"""Drop ``pending_uploads``: publishes now hold the upload lock instead of a pending row.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Drop ``pending_uploads`` (see :mod:`pubsubml.registry.infrastructure.upload_lock`)."""
    op.drop_table("pending_uploads")


def downgrade() -> None:
    """Recreate ``pending_uploads``, empty."""
    op.create_table(
        "pending_uploads",
        sa.Column("storage_key", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("storage_key", name=op.f("pk_pending_uploads")),
    )
