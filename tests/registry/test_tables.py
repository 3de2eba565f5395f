"""Tests of pubsubml.registry.tables: UTC timestamps, constraints, and the migrated schema."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Table, UniqueConstraint, inspect, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.tables import (
    Base,
    DeliveryRow,
    FeatureRow,
    LedgerEntryRow,
    ModelRow,
    SiteRow,
    SubscriptionRow,
    UTCDateTime,
    utcnow,
)
from registry.conftest import model_row

PLUS_TWO = timezone(timedelta(hours=2))


def test_utcnow_is_aware_utc() -> None:
    now = utcnow()
    assert now.tzinfo is UTC and abs(now - datetime.now(UTC)) < timedelta(minutes=1)


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect()])
def test_utc_datetime_binds_and_reads_utc(dialect: Any) -> None:
    column = UTCDateTime()
    naive = datetime(2025, 3, 1, 12, 30)
    shifted = datetime(2025, 3, 1, 12, 30, tzinfo=PLUS_TWO)
    assert column.process_bind_param(naive, dialect) == naive.replace(tzinfo=UTC)
    bound = column.process_bind_param(shifted, dialect)
    assert bound is not None and bound.tzinfo == UTC and bound.hour == 10 and bound == shifted
    assert column.process_bind_param(None, dialect) is None
    read = column.process_result_value(naive, dialect)
    assert read is not None and read.tzinfo == UTC and read.hour == 12
    from_pg = column.process_result_value(shifted, dialect)
    assert from_pg is not None and from_pg.tzinfo == UTC and from_pg.hour == 10
    assert column.process_result_value(None, dialect) is None


def test_timestamps_round_trip_and_sort_across_offsets(db: Database) -> None:
    times = {
        "later": datetime(2025, 1, 1, 11, 0, tzinfo=UTC),
        "earlier": datetime(2025, 1, 1, 12, 0, tzinfo=PLUS_TWO),  # 10:00 UTC
        "latest": datetime(2025, 1, 1, 11, 30),  # naive: taken as UTC
    }
    with db.write() as s:
        s.add_all(FeatureRow(name=n, definition="{}", created_at=t) for n, t in times.items())
    with db.read() as s:
        rows = list(s.execute(select(FeatureRow).order_by(FeatureRow.created_at)).scalars())
    assert [r.name for r in rows] == ["earlier", "later", "latest"]
    assert all(r.created_at.tzinfo == UTC for r in rows)
    assert rows[0].created_at == times["earlier"] and rows[0].created_at.hour == 10


def test_defaults_fill_creation_times(db: Database) -> None:
    with db.write() as s:
        s.add(FeatureRow(name="age", definition="{}"))
    with db.read() as s:
        row = s.execute(select(FeatureRow)).scalar_one()
    assert row.created_at.tzinfo == UTC and utcnow() - row.created_at < timedelta(minutes=1)


def test_constraints_use_the_naming_convention() -> None:
    sites: Table = Base.metadata.tables["sites"]
    names = {c.name for c in sites.constraints}
    assert {"pk_sites", "uq_sites_name", "uq_sites_token_hash"} <= names
    models: Table = Base.metadata.tables["models"]
    assert "fk_models_publisher_id_sites" in {c.name for c in models.foreign_key_constraints}
    assert "ix_models_publisher_id" in {i.name for i in models.indexes}


def _site(name: str, token_hash: str | None = None) -> SiteRow:
    return SiteRow(
        name=name,
        roles="both",
        epsilon_budget=1.0,
        delta_budget=1e-5,
        token_hash=token_hash or name * 8,
    )


def _model(model_id: str, publisher_id: int, position: int, digest: str) -> ModelRow:
    return model_row(model_id, publisher_id, position, format="onnx", weights_sha256=digest)


def _fails(db: Database, *rows: Any) -> bool:
    try:
        with db.write() as s:
            for row in rows:
                s.add(row)
                s.flush()
    except IntegrityError:
        return True
    return False


def test_uniqueness_constraints_hold(db: Database) -> None:
    with db.write() as s:
        s.add(_site("a"))
        s.flush()
        s.add(_model("1" * 32, 1, 1, "d" * 64))
        s.add(SubscriptionRow(id="s", site_id=1, channel="age", task="classification"))
        s.flush()
        s.add(DeliveryRow(subscription_id="s", cursor=2, model_id="1" * 32))
        s.add(LedgerEntryRow(**_entry("r1")))
    assert _fails(db, _site("a"))  # site name
    assert _fails(db, _site("b", token_hash="a" * 8))
    assert _fails(db, _model("2" * 32, 1, 2, "d" * 64))  # weights digest
    assert _fails(db, _model("2" * 32, 1, 1, "e" * 64))  # feed position
    assert _fails(db, DeliveryRow(subscription_id="s", cursor=3, model_id="1" * 32))
    assert _fails(db, LedgerEntryRow(**_entry("r1")))
    assert not _fails(db, LedgerEntryRow(**_entry("r2")))


def _entry(release_id: str) -> dict[str, Any]:
    return {
        "site_id": 1,
        "release_id": release_id,
        "description": "",
        "events_json": "[]",
        "scope_json": None,
        "epsilon": 1.0,
        "delta": 1e-5,
    }


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def migrated(
    request: pytest.FixtureRequest, sqlite_template: Path, tmp_path: Path
) -> Iterator[Database]:
    """A database as the migrations left it, on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{shutil.copy(sqlite_template, tmp_path / 'migrated.db')}"
    else:
        url = request.getfixturevalue("pg_migrated")
    database = Database(url)
    yield database
    database.dispose()


def test_the_migrations_create_exactly_these_tables(migrated: Database) -> None:
    insp = inspect(migrated.engine)
    assert set(insp.get_table_names()) - {"alembic_version"} == set(Base.metadata.tables)
    names = list(Base.metadata.tables)
    reflected = {
        "columns": insp.get_multi_columns(filter_names=names),
        "pk": insp.get_multi_pk_constraint(filter_names=names),
        "unique": insp.get_multi_unique_constraints(filter_names=names),
        "fk": insp.get_multi_foreign_keys(filter_names=names),
        "indexes": insp.get_multi_indexes(filter_names=names),
    }
    by_table = {
        kind: {key[1]: value for key, value in found.items()} for kind, found in reflected.items()
    }
    for table in Base.metadata.sorted_tables:
        name = table.name
        columns = {c["name"]: c["nullable"] for c in by_table["columns"][name]}
        assert columns == {c.name: c.nullable for c in table.columns}, name
        assert by_table["pk"][name]["name"] == table.primary_key.name, name
        unique = sorted((u["name"], tuple(u["column_names"])) for u in by_table["unique"][name])
        assert unique == sorted(
            (c.name, tuple(col.name for col in c.columns))
            for c in table.constraints
            if isinstance(c, UniqueConstraint)
        ), name
        foreign = sorted(
            (f["name"], tuple(f["constrained_columns"]), f["referred_table"])
            for f in by_table["fk"][name]
        )
        assert foreign == sorted(
            (f.name, tuple(f.column_keys), f.referred_table.name)
            for f in table.foreign_key_constraints
        ), name
        indexes = sorted(
            (i["name"], tuple(i["column_names"]))
            for i in by_table["indexes"][name]
            if not i.get("duplicates_constraint")  # PostgreSQL backs unique constraints so
        )
        assert indexes == sorted(
            (i.name, tuple(c.name for c in i.columns)) for i in table.indexes
        ), name
