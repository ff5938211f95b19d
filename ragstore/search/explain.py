"""``ragstore search --explain``: the statements a search ran, as a psql script, and ``EXPLAIN ANALYZE`` of them.

:func:`explain` runs the search's plan (:func:`ragstore.search.plan.plan_search`) with the sync driver and
records each step it yields before the step runs. Each statement is printed with its parameters inlined
as SQL literals (psycopg's client-side binding, the text psql would be sent), preceded by a comment naming
the step and listing its parameters; a step that is no SQL (embedding the query, a reranker, the numpy
exact scan) is a comment line. Pasted into psql (autocommit, as psql runs), the statements give the hits
the search gave: a statement that makes its HNSW settings does so with ``set_config(..., true)``, so they
end with it; on Citus the ``SET LOCAL`` settings and the statement are printed inside ``BEGIN`` …
``ROLLBACK`` as the driver runs them. With ``analyze``, each statement is followed by its ``EXPLAIN
(ANALYZE, BUFFERS)`` plan as comment lines (the statement is run again for it, its settings rolled back).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql

from ragstore.caches import Caches, caches_for
from ragstore.db.connection import Conn, db_errors
from ragstore.search import drive
from ragstore.search.drive import Call, Pipeline, Rows, Step, Text, WithConnection
from ragstore.search.plan import plan_search
from ragstore.search.request import SearchRequest

__all__ = ["explain", "inline"]

#: Parameters longer than this are shown cut in the comment above a statement (the statement has them whole).
_SHOWN = 80


def explain(conn: Conn, request: SearchRequest, *, analyze: bool = False, caches: Caches | None = None) -> str:
    """The psql script of the statements ``request``'s search runs on ``conn`` (module docstring)."""
    memo = caches if caches is not None else caches_for(conn)
    dialect = drive.dialect_of(conn)
    steps: list[Step] = []
    drive.run(conn, plan_search(request, memo, dialect), on_step=steps.append)
    out = [f"-- ragstore search {request.family!r}: the steps of its plan, in the order they ran"]
    for number, step in enumerate(steps, 1):
        if isinstance(step, Rows):
            out += _statement(conn, number, step.what, step.statement, step.params, list(step.settings), analyze)
        elif isinstance(step, Pipeline):
            for text, params in step.statements:
                out += _statement(conn, number, step.what, text, params, [], analyze)
        elif isinstance(step, Call | WithConnection):
            kind = "no SQL" if isinstance(step, Call) else "Python on the connection, statements not shown"
            out.append(f"-- step {number}: {step.what} ({kind})")
    return "\n".join(out) + "\n"


def inline(conn: Conn, statement: Text, params: Mapping[str, Any]) -> str:
    """``statement`` with ``params`` bound as SQL literals: the text a client without parameters sends."""
    text = statement.as_string(conn) if isinstance(statement, sql.Composable) else statement
    return psycopg.ClientCursor(conn).mogrify(text, dict(params))


def _statement(
    conn: Conn,
    number: int,
    what: str,
    statement: Text,
    params: Mapping[str, Any],
    settings: list[sql.Composed | sql.SQL],
    analyze: bool,
) -> list[str]:
    shown = ", ".join(f"{name}={_short(value)}" for name, value in params.items())
    lines = [f"-- step {number}: {what}", f"--   parameters: {shown or 'none'}"]
    text = inline(conn, statement, params).strip()
    if settings:
        lines += ["BEGIN;", *(f"{setting.as_string(conn)};" for setting in settings), f"{text};", "ROLLBACK;"]
    else:
        lines.append(f"{text};")
    if analyze:
        plan = _analyze(conn, text, settings)
        lines += ["--   EXPLAIN (ANALYZE, BUFFERS):", *(f"--   {line}" for line in plan)]
    return lines


def _analyze(conn: Conn, text: str, settings: list[sql.Composed | sql.SQL]) -> list[str]:
    """The ``EXPLAIN (ANALYZE, BUFFERS)`` lines of ``text`` (inlined), run so that nothing it sets outlives it."""
    rows: list[tuple[Any, ...]] = []
    with db_errors(), conn.transaction():
        for setting in settings:
            conn.execute(setting)
        rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + text).fetchall()  # inlined: no parameter left
        raise psycopg.Rollback()
    return [str(row[0]) for row in rows]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
