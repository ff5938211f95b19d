"""The asyncio driver of search plans: runs each step of a plan on one async psycopg connection.

The same plans as :mod:`ragstore.search.drive`, the same statements, the same isolation: a statement runs
as its own transaction in autocommit, else between a savepoint and its rollback; on Citus the HNSW settings
are ``SET LOCAL`` in a transaction rolled back after. Errors are mapped and thrown into the plan by
:func:`ragstore.search.drive.advance`, as in the sync driver. What is no SQL
(:class:`~ragstore.search.drive.Call`: embedding, a reranker) runs in a worker thread; so does
:class:`~ragstore.search.drive.WithConnection` (the numpy exact scan's server-side cursor, HyDE's cache),
on a connection that ``blocking`` lends.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import pq

from ragstore.db.connection import db_errors
from ragstore.db.dialect import BY_CITUS, IS_CITUS, Dialect
from ragstore.search.drive import (
    Call,
    Done,
    InError,
    Outcome,
    Pipeline,
    Plan,
    Rows,
    Step,
    Text,
    WithConnection,
    advance,
)

__all__ = ["Blocking", "dialect_of", "run"]

AConn = psycopg.AsyncConnection[Any]
T = TypeVar("T")
#: Runs ``fn(conn)`` on a synchronous connection, off the event loop.
Blocking = Callable[[Callable[[psycopg.Connection[Any]], Any]], Awaitable[Any]]

_DIALECTS: weakref.WeakKeyDictionary[AConn, Dialect] = weakref.WeakKeyDictionary()


async def dialect_of(conn: AConn) -> Dialect:
    """The dialect of ``conn``'s database (:mod:`ragstore.db.dialect`), asked once per connection."""
    known = _DIALECTS.get(conn)
    if known is None:
        with db_errors():
            cur = await conn.execute(IS_CITUS)
            row = await cur.fetchone()
        known = _DIALECTS[conn] = BY_CITUS[bool(row and row[0])]
    return known


async def run(conn: AConn, plan: Plan[T], blocking: Blocking) -> T:
    """Drive ``plan`` on ``conn`` to its answer."""
    step = advance(plan, Outcome())
    while not isinstance(step, Done):
        try:
            outcome = Outcome(await execute(conn, step, blocking))
        except Exception as exc:  # thrown into the plan, which decides
            outcome = Outcome(error=exc)
        step = advance(plan, outcome)
    return step.value  # type: ignore[no-any-return]


async def execute(conn: AConn, step: Step, blocking: Blocking) -> Any:
    """Do one step on ``conn``."""
    if isinstance(step, Rows):
        if step.settings:
            return await _settings_first(conn, step)
        if step.isolated:
            return (await _isolated(conn, [(step.statement, step.params)], binary=step.binary))[0]
        cur = await conn.execute(step.statement, dict(step.params), binary=step.binary)
        return await cur.fetchall()
    if isinstance(step, Pipeline):
        return await _isolated(conn, step.statements, binary=False)
    if isinstance(step, Call):
        return await asyncio.to_thread(step.fn)
    if isinstance(step, WithConnection):
        return await blocking(step.fn)
    if isinstance(step, InError):
        return conn.info.transaction_status == pq.TransactionStatus.INERROR
    raise TypeError(f"not a step: {step!r}")


async def _isolated(
    conn: AConn, statements: Sequence[tuple[Text, Mapping[str, Any]]], *, binary: bool
) -> list[list[tuple[Any, ...]]]:
    """:func:`ragstore.db.connection.run_isolated` on an async connection: one round trip, nothing lasts."""
    isolated = not (conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE)
    if not isolated and len(statements) == 1:
        statement, params = statements[0]
        cur = await conn.execute(statement, dict(params), binary=binary)
        return [await cur.fetchall()]
    # As in run_isolated: an error raised inside the pipeline block is kept and the block ends normally
    # (psycopg would otherwise log "error ignored terminating" on the exit's sync).
    first: psycopg.Error | None = None
    cursors: list[psycopg.AsyncCursor[Any]] = []
    try:
        async with conn.pipeline():
            try:
                if isolated:
                    await conn.execute("SAVEPOINT ragstore_isolated")
                for statement, params in statements:
                    cursors.append(await conn.execute(statement, dict(params), binary=binary))
                if isolated:
                    await conn.execute("ROLLBACK TO SAVEPOINT ragstore_isolated")
                    await conn.execute("RELEASE SAVEPOINT ragstore_isolated")
            except psycopg.Error as exc:
                first = exc
        if first is None:
            return [await cur.fetchall() for cur in cursors]
    except psycopg.Error as exc:
        first = first or exc
    if isolated:
        try:
            await conn.execute("ROLLBACK TO SAVEPOINT ragstore_isolated")
            await conn.execute("RELEASE SAVEPOINT ragstore_isolated")
        except psycopg.Error:
            pass
    assert first is not None
    raise first  # mapped by steps.advance, as every step's error


async def _settings_first(conn: AConn, step: Rows) -> list[tuple[Any, ...]]:
    """An HNSW statement on Citus: the step's settings first (``SET LOCAL``, propagated to the workers),
    then the statement, in a transaction (or a savepoint) rolled back after (see ragstore.search.vector)."""
    rows: list[tuple[Any, ...]] = []
    async with conn.transaction():
        for setting in step.settings:
            await conn.execute(setting)
        cur = await conn.execute(step.statement, dict(step.params), binary=step.binary)
        rows = await cur.fetchall()
        raise psycopg.Rollback()
    return rows
