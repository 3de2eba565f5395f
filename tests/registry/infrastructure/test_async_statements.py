"""Tests of pubsubml.registry.infrastructure.async_statements on a real PostgreSQL server: the rows of the
synchronous path, one retry on a dropped connection, a cancelled statement's connection closed,
refusals off the bound loop."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from sqlalchemy import bindparam, create_engine, func, select, text

from pubsubml.registry.infrastructure.async_statements import AsyncStatements
from pubsubml.registry.infrastructure.database import Database
from pubsubml.registry.tables import FeatureRow
from registry.conftest import terminate_backend

pytestmark = pytest.mark.postgres

NAMES = (
    select(FeatureRow.__table__.c.name)
    .where(FeatureRow.__table__.c.name > bindparam("after"))
    .order_by(FeatureRow.__table__.c.name)
)
PID = select(func.pg_backend_pid().label("pid")).where(bindparam("x") == bindparam("x"))


@pytest.fixture
def database(pg_factory: Any) -> Any:
    db = Database(pg_factory())
    FeatureRow.__table__.create(db.engine)
    with db.write() as s:
        for name in ("age", "bmi", "sex"):
            s.add(FeatureRow(name=name, definition="{}"))
    yield db
    db.dispose()


async def _on_a_loop(db: Database, body: Any, size: int = 2) -> Any:
    pool = AsyncStatements(db.engine, size=size)
    pool.bind(asyncio.get_running_loop())
    try:
        return await body(pool)
    finally:
        await pool.aclose()


def test_the_rows_are_those_of_the_synchronous_read(database: Database) -> None:
    async def body(pool: AsyncStatements) -> Any:
        read = pool.compile(NAMES)
        return await pool.fetch(read, {"after": "b"}), pool.open_connections

    rows, opened = asyncio.run(_on_a_loop(database, body))

    with database.read() as s:
        expected = [tuple(r) for r in s.execute(NAMES, {"after": "b"}).all()]
    assert [tuple(r) for r in rows] == expected == [("bmi",), ("sex",)]
    assert opened == 1


def test_wrong_parameters_and_a_foreign_loop_are_refused(database: Database) -> None:
    pool = AsyncStatements(database.engine)
    read = pool.compile(NAMES)
    with pytest.raises(ValueError, match="do not match"):
        read.parameters({"after": "a", "extra": 1})
    with pytest.raises(ValueError, match="do not match"):
        read.parameters({})
    assert pool.for_running_loop() is None  # no loop running here

    async def unbound() -> None:
        assert pool.for_running_loop() is None  # a loop, but not the bound one
        await pool.fetch(read, {"after": "a"})

    with pytest.raises(RuntimeError, match="only on the loop"):
        asyncio.run(unbound())
    with pytest.raises(ValueError, match="psycopg"):
        AsyncStatements(create_engine("sqlite://"))
    with pytest.raises(ValueError, match="size"):
        AsyncStatements(database.engine, size=0)


def test_a_dropped_connection_is_replaced_and_the_statement_runs_once_more(
    database: Database,
) -> None:
    async def body(pool: AsyncStatements) -> tuple[int, int, int]:
        pid = pool.compile(PID)
        first = (await pool.fetch(pid, {"x": 1}))[0][0]
        terminate_backend(database, first)
        second = (await pool.fetch(pid, {"x": 1}))[0][0]
        return first, second, pool.open_connections

    first, second, opened = asyncio.run(_on_a_loop(database, body))

    assert second != first and opened == 1


def test_a_failing_or_cancelled_statement_leaves_a_usable_connection(database: Database) -> None:
    async def body(pool: AsyncStatements) -> list[Any]:
        seen: list[Any] = []
        bad = pool.compile(select(text("no_such_column")).where(bindparam("x") == 1))
        with pytest.raises(psycopg.errors.UndefinedColumn):
            await pool.fetch(bad, {"x": 1})
        seen.append(pool.open_connections)  # an error in autocommit leaves it usable
        sleep = pool.compile(select(func.pg_sleep(bindparam("s"))))
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.fetch(sleep, {"s": 30}), 0.2)
        # psycopg cancels the statement on the server: the connection is idle again at once
        seen.append((await pool.fetch(pool.compile(NAMES), {"after": ""}))[0][0])
        seen.append((pool.open_connections, time.monotonic() - t0 < 10))
        return seen

    assert asyncio.run(_on_a_loop(database, body, size=1)) == [1, "age", (1, True)]
