"""Pending uploads: a publish records its artifact key before the file reaches the store.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``pending_uploads``."""
    op.create_table(
        "pending_uploads",
        sa.Column("storage_key", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("storage_key", name=op.f("pk_pending_uploads")),
    )


def downgrade() -> None:
    """Drop ``pending_uploads``."""
    op.drop_table("pending_uploads")
