"""Single-statement reads on the event loop, for the registry's hottest read (PostgreSQL only).

A feed poll is one statement.  Run through the thread pool on a synchronous connection it costs
several times the statement itself: the hop to a worker thread and back, and that thread queueing
for the interpreter lock while it sends and receives.  :class:`AsyncStatements` runs such a
statement on the event loop instead, with psycopg's ``AsyncConnection`` (no new dependency) in
autocommit mode: one round trip, no thread, and the loop serves other requests while PostgreSQL
answers.  Statements are SQLAlchemy Core ``select`` s compiled once with the engine's dialect
(:class:`CompiledRead`), so the SQL text is the one the synchronous path sends.

It is bound to the event loop of the app's lifespan; any other caller gets ``None`` from
:meth:`AsyncStatements.for_running_loop` and uses the synchronous path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import pq
from sqlalchemy import Engine
from sqlalchemy.sql import Select

__all__ = ["AsyncStatements", "CompiledRead"]


class CompiledRead:
    """A Core ``select`` whose parameters are all named ``bindparam`` s, compiled once.

    Parameters
    ----------
    statement : Select
        Every value it compares with is a ``bindparam(name)`` without a value.
    engine : Engine
        Its dialect renders the SQL (``%(name)s`` placeholders for psycopg).

    Examples
    --------
    >>> from sqlalchemy import bindparam, create_engine, literal_column, select
    >>> engine = create_engine("postgresql+psycopg://u@127.0.0.1/db")
    >>> read = CompiledRead(select(literal_column("1")).where(bindparam("a") > 0), engine)
    >>> sorted(read.names), read.defaults
    (['a'], {'param_1': 0})
    >>> read.parameters({"a": 5})
    {'param_1': 0, 'a': 5}
    """

    def __init__(self, statement: Select[*tuple[Any, ...]], engine: Engine) -> None:
        compiled = statement.compile(dialect=engine.dialect)
        self.sql = str(compiled)
        self.defaults = {k: v for k, v in compiled.params.items() if v is not None}
        self.names = frozenset(k for k, v in compiled.params.items() if v is None)

    def parameters(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` with the statement's literal parameters; refuses a missing or extra name."""
        if set(values) != self.names:
            raise ValueError(f"parameters {sorted(values)} do not match {sorted(self.names)}")
        return {**self.defaults, **values}


class AsyncStatements:
    """A small pool of autocommit ``psycopg.AsyncConnection`` s bound to one event loop.

    Connections open on first use, up to ``size`` at once (later callers wait for a free one).
    A connection that fails with :class:`psycopg.OperationalError` (the server restarted or
    ended it) is closed, and the statement runs once more on a new connection, as
    :meth:`~pubsubml.registry.infrastructure.database.Database.read_statements` does.  A statement
    whose task is cancelled is cancelled on the server by psycopg; its connection goes back to the
    pool if it is idle again, else it is closed.  Only statements that read may run here.

    Parameters
    ----------
    engine : Engine
        A PostgreSQL (psycopg) engine: its URL gives the connection arguments.
    size : int, default=16
        Most connections open at once.
    """

    def __init__(self, engine: Engine, *, size: int = 16) -> None:
        if engine.dialect.name != "postgresql" or engine.dialect.driver != "psycopg":
            raise ValueError(f"AsyncStatements needs PostgreSQL through psycopg, not {engine.url}")
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        _, params = engine.dialect.create_connect_args(engine.url)
        params.pop("context", None)  # SQLAlchemy's adapters; psycopg's defaults fit plain rows
        self._connect_args = params
        self._engine = engine
        self._size = size
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._slots: asyncio.Semaphore | None = None
        self._open = 0

    def compile(self, statement: Select[*tuple[Any, ...]]) -> CompiledRead:
        """``statement`` compiled for this database (see :class:`CompiledRead`)."""
        return CompiledRead(statement, self._engine)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve statements on ``loop`` (the app's, at start-up)."""
        self._loop = loop
        self._slots = asyncio.Semaphore(self._size)

    def for_running_loop(self) -> AsyncStatements | None:
        """This pool when called on its loop, else ``None`` (the caller reads synchronously)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return self if running is self._loop else None

    @property
    def open_connections(self) -> int:
        """Connections open now (idle or running a statement)."""
        return self._open

    async def fetch(
        self, read: CompiledRead, values: Mapping[str, Any]
    ) -> Sequence[tuple[Any, ...]]:
        """The rows of ``read`` with ``values``, one round trip on a pooled connection.

        Raises
        ------
        RuntimeError
            Called outside the bound event loop.
        psycopg.Error
            The statement failed (a lost connection is retried once first).
        """
        if self._slots is None or self.for_running_loop() is None:
            raise RuntimeError("AsyncStatements.fetch runs only on the loop it was bound to")
        params = read.parameters(values)
        async with self._slots:
            try:
                return await self._run(read.sql, params)
            except psycopg.OperationalError:
                return await self._run(read.sql, params)

    async def _run(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        conn = self._idle.pop() if self._idle else await self._connect()
        try:
            cursor = await conn.execute(sql, params)
            rows = await cursor.fetchall()
        except psycopg.OperationalError:
            await self._discard(conn)
            await self.aclose()  # connections opened before the failure may be gone as well
            raise
        except BaseException:
            if conn.closed or conn.broken:
                await self._discard(conn)
            elif conn.info.transaction_status != pq.TransactionStatus.IDLE:
                await self._discard(conn)  # interrupted mid-statement: its state is unknown
            else:
                self._idle.append(conn)
            raise
        self._idle.append(conn)
        return rows

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(autocommit=True, **self._connect_args)
        self._open += 1
        return conn

    async def _discard(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._open -= 1
        try:
            await conn.close()
        except psycopg.Error:  # pragma: no cover - closing a dead connection
            pass

    async def aclose(self) -> None:
        """Close the idle connections (at shutdown, on the bound loop)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await self._discard(conn)
