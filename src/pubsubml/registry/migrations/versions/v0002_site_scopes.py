"""Registered data scopes: the disjoint chunks a site declares before a release may name them.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``site_scopes``; labels already named by charged releases are registered as of
    their first release, so an existing ledger stays consistent."""
    op.create_table(
        "site_scopes",
        sa.Column("site_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["site_id"], ["sites.id"], name=op.f("fk_site_scopes_site_id_sites")),
        sa.PrimaryKeyConstraint("site_id", "label", name=op.f("pk_site_scopes")),
    )
    _TS = sa.DateTime(timezone=True)
    ledger = sa.table(
        "ledger_entries",
        sa.column("id", sa.Integer()),
        sa.column("site_id", sa.Integer()),
        sa.column("scope_json", sa.Text()),
        sa.column("created_at", _TS),
    )
    rows = op.get_bind().execute(
        sa.select(ledger.c.site_id, ledger.c.scope_json, ledger.c.created_at)
        .where(ledger.c.scope_json.is_not(None))
        .order_by(ledger.c.id)
    )
    seen: dict[tuple[int, str], object] = {}
    for site_id, scope_json, created_at in rows:
        for label in json.loads(scope_json):
            seen.setdefault((site_id, label), created_at)
    if seen:
        scopes = sa.table(
            "site_scopes",
            sa.column("site_id", sa.Integer()),
            sa.column("label", sa.String()),
            sa.column("created_at", _TS),
        )
        op.bulk_insert(
            scopes,
            [{"site_id": s, "label": lab, "created_at": t} for (s, lab), t in seen.items()],
        )


def downgrade() -> None:
    """Drop ``site_scopes``."""
    op.drop_table("site_scopes")
