"""Site tokens: creation time, optional expiry, revocation, and who last changed them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

_TS = sa.DateTime(timezone=True)
_COLUMNS = ("token_created_at", "token_expires_at", "token_revoked_at", "token_changed_by")


def upgrade() -> None:
    """Add the token columns; existing tokens count as created with their site."""
    op.add_column("sites", sa.Column("token_created_at", _TS, nullable=True))
    op.add_column("sites", sa.Column("token_expires_at", _TS, nullable=True))
    op.add_column("sites", sa.Column("token_revoked_at", _TS, nullable=True))
    op.add_column("sites", sa.Column("token_changed_by", sa.String(length=64), nullable=True))
    op.execute("UPDATE sites SET token_created_at = created_at, token_changed_by = 'admin'")


def downgrade() -> None:
    """Drop the token columns."""
    with op.batch_alter_table("sites") as batch:
        for name in _COLUMNS:
            batch.drop_column(name)
