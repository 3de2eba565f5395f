"""Alembic environment of the registry database.

Alembic loads this file as the module ``env_py``; the caller (:mod:`pubsubml.registry.migrate`)
passes an open connection in ``config.attributes["connection"]``, so the URL (including a
PostgreSQL ``search_path`` option) is never parsed twice.  Importing the file elsewhere (e.g. when
doctests are collected) does nothing.
"""

from __future__ import annotations

from alembic import context

from pubsubml.registry.tables import Base


def run_migrations() -> None:
    """Run the migrations online, on the connection the caller provided."""
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError(
            "run the registry migrations with `pubsubml registry migrate`, not the alembic command"
        )
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if __name__ == "env_py":
    run_migrations()
