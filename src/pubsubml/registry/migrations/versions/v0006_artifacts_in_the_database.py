"""Artifacts in the database: ``artifact_objects`` and their ``artifact_chunks``.

Used by registries started with ``--store database``
(:mod:`pubsubml.registry.infrastructure.database_artifact_store`), so that replicas on different
machines share only the database.  On PostgreSQL the chunks' ``bytea`` column is stored
``EXTERNAL``: out of line without compression, since weights are incompressible and pglz would only
spend CPU on them.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``artifact_objects`` and ``artifact_chunks``."""
    op.create_table(
        "artifact_objects",
        sa.Column("storage_key", sa.String(length=32), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("storage_key", name=op.f("pk_artifact_objects")),
    )
    op.create_table(
        "artifact_chunks",
        sa.Column("storage_key", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["storage_key"],
            ["artifact_objects.storage_key"],
            name=op.f("fk_artifact_chunks_storage_key_artifact_objects"),
        ),
        sa.PrimaryKeyConstraint("storage_key", "seq", name=op.f("pk_artifact_chunks")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE artifact_chunks ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    """Drop ``artifact_chunks`` and ``artifact_objects`` (and the weights they hold)."""
    op.drop_table("artifact_chunks")
    op.drop_table("artifact_objects")
