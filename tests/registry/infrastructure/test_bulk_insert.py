"""Tests of pubsubml.registry.infrastructure.bulk_insert: many rows with one statement, in order, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from pubsubml.registry.infrastructure.bulk_insert import insert_columns, insert_rows
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.tables import LedgerEntryRow, ModelFeatureRow, ModelRow, SiteRow
from registry.conftest import Backend, model_row, statements


def _site(db: Database) -> int:
    with db.write() as session:
        site = SiteRow(
            name="a",
            roles="both",
            epsilon_budget=1.0,
            delta_budget=1e-5,
            token_hash="t" * 64,
        )
        session.add(site)
        session.flush()
        session.add(model_row("m1", site.id, 1))
        return site.id


def _entry(site_id: int, i: int, created_at: datetime, scope: str | None) -> dict[str, Any]:
    return {
        "site_id": site_id,
        "release_id": f"r{i}",
        "description": f"release {i}",
        "events_json": "[]",
        "scope_json": scope,
        "epsilon": 0.25 * i,
        "delta": 1e-6,
        "model_id": "m1" if i == 0 else None,
        "created_at": created_at,
    }


def test_rows_go_in_in_order_through_the_column_types(backend: Backend) -> None:
    db = Database(backend.url)
    try:
        site_id = _site(db)
        naive = datetime(2026, 1, 1, 12, 0)  # taken as UTC
        plus_two = datetime(2026, 1, 1, 15, 0, tzinfo=timezone(timedelta(hours=2)))
        rows = [
            _entry(site_id, i, naive if i % 2 else plus_two, None if i % 3 else '["q1"]')
            for i in range(7)
        ]
        with db.write() as session, statements(db, "ledger_entries") as sent:
            insert_rows(session.connection(), LedgerEntryRow.__table__, rows)
        if backend.name == "postgresql":
            assert len(sent) == 1  # one statement, whatever the number of rows
        with db.read() as session:
            stored = session.execute(
                select(
                    LedgerEntryRow.release_id,
                    LedgerEntryRow.scope_json,
                    LedgerEntryRow.epsilon,
                    LedgerEntryRow.model_id,
                    LedgerEntryRow.created_at,
                ).order_by(LedgerEntryRow.id)  # serial ids follow the order given
            ).all()
        assert [tuple(r) for r in stored] == [
            (
                f"r{i}",
                None if i % 3 else '["q1"]',
                0.25 * i,
                "m1" if i == 0 else None,
                datetime(2026, 1, 1, 12 if i % 2 else 13, 0, tzinfo=UTC),
            )
            for i in range(7)
        ]
    finally:
        db.dispose()


def test_columns_a_failing_row_and_refusals(backend: Backend) -> None:
    db = Database(backend.url)
    try:
        site_id = _site(db)
        table = ModelFeatureRow.__table__
        with db.write() as session:
            insert_columns(session.connection(), table, {"model_id": [], "feature_name": []})
            insert_columns(
                session.connection(), table, {"model_id": ["m1"] * 3, "feature_name": list("cab")}
            )
        with pytest.raises(IntegrityError), db.write() as session:  # the whole statement fails
            insert_rows(
                session.connection(),
                table,
                [
                    {"model_id": "m1", "feature_name": "d"},
                    {"model_id": "nope", "feature_name": "e"},
                ],
            )
        with pytest.raises(ValueError, match="different lengths"), db.write() as session:
            insert_columns(session.connection(), table, {"model_id": ["m1"], "feature_name": []})
        with pytest.raises(ValueError, match="no column"), db.write() as session:
            insert_columns(session.connection(), table, {"model": ["m1"]})
        with pytest.raises(ValueError, match="different columns"), db.write() as session:
            insert_rows(
                session.connection(),
                table,
                [{"model_id": "m1", "feature_name": "f"}, {"feature_name": "g", "model_id": "m1"}],
            )
        with pytest.raises(TypeError, match="Table"), db.write() as session:
            insert_rows(session.connection(), select(ModelRow.id).subquery(), [{"id": "x"}])
        with db.read() as session:
            names = session.execute(select(ModelFeatureRow.feature_name)).scalars().all()
        assert sorted(names) == ["a", "b", "c"]  # nothing of the refused inserts
        assert site_id > 0
    finally:
        db.dispose()
