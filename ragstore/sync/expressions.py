"""The SQL a followed table's owner writes: the ``--where`` predicate and a ``--package`` expression.

They are the only SQL texts ragstore takes from a user, and only from the owner of the table (``sync add``
and ``sync alter`` need it). Each is refused unless it is one expression over the table: no ``;``, no
comment, and the database must accept it in a temporary view over the table (``WHERE (predicate)``, or
``SELECT (package)::text``), which also names the table's columns it reads: those columns are followed
(a change of one queues the row). A ``--package`` that is a column's name is that column.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg import sql

from ragstore.db.sqlfiles import query
from ragstore.errors import InvalidInput

Conn = psycopg.Connection[Any]


def check_expression(text: str, option: str) -> str:
    """``text`` stripped; InvalidInput naming ``option`` when blank or not one expression."""
    stripped = text.strip()
    if not stripped:
        raise InvalidInput(f"{option} is blank")
    if ";" in stripped or "--" in stripped or "/*" in stripped or "\x00" in stripped:
        raise InvalidInput(f"{option} {text!r}: one SQL expression, without ';' or comments")
    return stripped


def expression_columns(
    conn: Conn, schema: str, table: str, oid: int, expression: str, *, option: str, kind: str
) -> list[str]:
    """The columns of ``schema.table`` that ``expression`` reads, found by the database through a temporary
    view (``kind`` ``where``: a predicate; ``value``: a value made text); InvalidInput with the database's
    first line when it is not an expression over the table. Runs in a transaction of its own."""
    view = f"ragstore_sync_check_{uuid.uuid4().hex[:12]}"
    statement = sql.SQL(query("sync", f"{kind}_view")).format(
        view=sql.Identifier(view),
        schema=sql.Identifier(schema),
        table=sql.Identifier(table),
        expression=sql.SQL(expression),
    )
    try:
        with conn.transaction():
            conn.execute(statement, prepare=True)  # a prepared statement is one statement, whatever the text
            rows = conn.execute(query("sync", "view_columns"), {"view": f"pg_temp.{view}", "oid": oid}).fetchall()
            conn.execute(sql.SQL("DROP VIEW pg_temp.{}").format(sql.Identifier(view)))
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidInput(f"{option} {expression!r}: {first}") from exc
    return sorted(str(r[0]) for r in rows)


def package_sql(package: str | None, columns: set[str]) -> sql.Composable:
    """The SQL of a source's package_path value: its column (an identifier), its expression, or NULL."""
    if package is None:
        return sql.SQL("NULL")
    if package in columns:
        return sql.SQL("t.{}").format(sql.Identifier(package))
    return sql.SQL(package.replace("%", "%%"))


def predicate_sql(predicate: str | None) -> sql.Composable:
    return sql.SQL((predicate or "true").replace("%", "%%"))
