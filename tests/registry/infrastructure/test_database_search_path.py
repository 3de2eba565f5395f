"""``Database.check_search_path``: a PostgreSQL URL whose search_path names a schema that does not
exist is refused before anything is written, with the ``CREATE SCHEMA`` statement to run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pubsubml.errors import MissingDatabaseSchemaError, RegistryError
from pubsubml.registry.infrastructure.database import Database, _search_path


def _url(user: str, search_path: str) -> str:
    return f"postgresql+psycopg://{user}@127.0.0.1:5432/test?options=-csearch_path%3D{search_path}"


@pytest.fixture
def schema(pg_user: str) -> Iterator[str]:
    """An existing schema with upper-case letters (quoted in SQL), dropped afterwards."""
    import psycopg

    name = f"Real_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(host="127.0.0.1", user=pg_user, dbname="test", autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    yield name
    with psycopg.connect(host="127.0.0.1", user=pg_user, dbname="test", autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _check(url: str) -> None:
    database = Database(url)
    try:
        database.check_search_path()
    finally:
        database.dispose()


@pytest.mark.postgres
def test_a_schema_that_does_not_exist_is_refused_with_its_create_statement(pg_user: str) -> None:
    name = f"nosuch_{uuid.uuid4().hex[:8]}"

    with pytest.raises(MissingDatabaseSchemaError) as info:
        _check(_url(pg_user, name))

    message = str(info.value)
    assert isinstance(info.value, RegistryError) and "\n" not in message
    assert f"schema {name!r}" in message and f"`CREATE SCHEMA {name};`" in message
    assert "pubsubml registry migrate --db" in message


@pytest.mark.postgres
def test_a_missing_schema_before_an_existing_one_is_refused_too(pg_user: str) -> None:
    # PostgreSQL would silently create the tables in public, the next schema of the path.
    with pytest.raises(MissingDatabaseSchemaError, match="'nosuch_first'"):
        _check(_url(pg_user, "nosuch_first%2Cpublic"))


@pytest.mark.postgres
def test_existing_schemas_pass(pg_user: str, schema: str) -> None:
    _check(_url(pg_user, "public"))
    _check(_url(pg_user, "%22%24user%22%2Cpublic"))  # PostgreSQL's default: "$user", public
    _check(_url(pg_user, f"%22{schema}%22"))


@pytest.mark.postgres
def test_the_statement_quotes_a_name_that_needs_it(pg_user: str) -> None:
    with pytest.raises(MissingDatabaseSchemaError, match='`CREATE SCHEMA "No_Such";`'):
        _check(_url(pg_user, "%22No_Such%22"))


def test_sqlite_has_no_schema_to_check() -> None:
    _check("sqlite://")


def test_the_search_path_setting_is_read_as_postgresql_reads_it() -> None:
    assert _search_path("public") == ["public"]
    assert _search_path('"$user", public') == ["$user", "public"]
    assert _search_path('Mixed, "Kept Case", "with ""quote"""') == [
        "mixed",
        "Kept Case",
        'with "quote"',
    ]
    assert _search_path("") == []
