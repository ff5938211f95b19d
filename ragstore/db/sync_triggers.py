"""The triggers ``ragstore sync add`` installs on a followed table (block ``create_*_trigger`` of
``ragstore/sql/sync.sql``), named and dropped here, below both callers: ``sync add|alter|remove``
(``ragstore/sync/sources.py``) and ``family drop`` (``ragstore/families``), which sync itself reads."""

from __future__ import annotations

from psycopg import sql

from ragstore.db.connection import Conn
from ragstore.db.sqlfiles import query

TRIGGERS = ("insert", "update", "delete", "truncate")


def trigger_name(source_id: int, kind: str) -> sql.Identifier:
    return sql.Identifier(f"ragstore_sync_{source_id}_{kind}")


def drop_triggers(conn: Conn, source_id: int, schema: str, table: str) -> None:
    """Drop the triggers of source ``source_id`` on ``schema.table`` (in the caller's transaction); a table
    already gone has none."""
    if conn.execute(query("sync", "table_of"), {"schema": schema, "table": table}).fetchone() is None:
        return
    names = {"schema": sql.Identifier(schema), "table": sql.Identifier(table)}
    for kind in TRIGGERS:
        conn.execute(sql.SQL(query("sync", "drop_trigger")).format(trigger=trigger_name(source_id, kind), **names))


def drop_family_triggers(conn: Conn, family: str) -> None:
    """In ``family drop``'s transaction: the triggers of every table ``family`` follows (its sources and
    queue go with the family, ON DELETE CASCADE)."""
    for row in conn.execute(query("sync", "sources"), {"families": [family]}).fetchall():
        drop_triggers(conn, int(row[0]), str(row[3]), str(row[4]))
