"""ragstore on Citus: detect the extension and lay ragstore's tables out across the cluster.

The layout (``ragstore/sql/citus.sql`` says the same for DBAs):

- ``ragstore.chunks`` and every family table ``ragstore.emb_<family>`` are distributed on ``chunk_id``
  and co-located: a chunk's text and its vectors share a shard, so the ``(family, chunk_id)`` join and
  foreign key stay on one node and ``ORDER BY embedding <=> q LIMIT k`` runs on every shard's HNSW index;
- memory (``ragstore.memory``, ``ragstore.memory_embeddings``) is distributed on ``agent``, co-located;
- the small catalogs every node reads (``ragstore.families``, ``ragstore.agent_principals``) are
  reference tables (a copy on every node);
- the rest (the embedding cache, the memory forget log, ``alembic_version``) stays on the coordinator.

:func:`distribute` is idempotent: a table already laid out is left alone.
"""

from __future__ import annotations

from typing import Any

import psycopg

from ragstore.db.sqlfiles import query

Conn = psycopg.Connection[Any]

REFERENCE_TABLES = ("families", "agent_principals")
# (table, distribution column, the table it is co-located with or "default" for a new group)
DISTRIBUTED_TABLES = (
    ("chunks", "chunk_id", "default"),
    ("memory", "agent", "default"),
    ("memory_embeddings", "agent", "ragstore.memory"),
)
FAMILY_COLUMN = "chunk_id"
FAMILY_COLOCATE = "ragstore.chunks"


def is_citus(conn: Conn) -> bool:
    """Whether the connected database has the citus extension (so ragstore lays its tables out)."""
    row = conn.execute(query("citus", "is_citus")).fetchone()
    return bool(row and row[0])


def _exists(conn: Conn, table: str) -> bool:
    row = conn.execute(query("citus", "table_exists"), {"table": table}).fetchone()
    return bool(row and row[0])


def _laid_out(conn: Conn, table: str) -> bool:
    row = conn.execute(query("citus", "is_distributed"), {"table": table}).fetchone()
    return bool(row and row[0])


def any_distributed(conn: Conn) -> bool:
    """Whether some ragstore table is already a Citus table here."""
    row = conn.execute(query("citus", "any_distributed")).fetchone()
    return bool(row and row[0])


def distribute_family(conn: Conn, table: str) -> bool:
    """Distribute one family table on chunk_id, co-located with ragstore.chunks; False if it already is."""
    if _laid_out(conn, table):
        return False
    conn.execute(
        query("citus", "distributed_table"),
        {"table": table, "column": FAMILY_COLUMN, "colocate_with": FAMILY_COLOCATE},
    )
    return True


def _distribute_table(conn: Conn, table: str, column: str, colocate: str) -> None:
    conn.execute(query("citus", "distributed_table"), {"table": table, "column": column, "colocate_with": colocate})


def distribute(conn: Conn) -> list[str]:
    """Lay out every ragstore table that is not yet a Citus table; return the tables changed, in order.

    Reference tables first (distributed tables hold foreign keys to them), then chunks, then each
    family table co-located with it, then memory.
    """
    changed: list[str] = []
    for table in REFERENCE_TABLES:
        if _exists(conn, table) and not _laid_out(conn, table):
            conn.execute(query("citus", "reference_table"), {"table": table})
            changed.append(table)
    for table, column, colocate in DISTRIBUTED_TABLES[:1]:
        if _exists(conn, table) and not _laid_out(conn, table):
            _distribute_table(conn, table, column, colocate)
            changed.append(table)
    if _exists(conn, "families"):
        for (family_table,) in conn.execute(query("citus", "family_tables")).fetchall():
            if _exists(conn, str(family_table)) and distribute_family(conn, str(family_table)):
                changed.append(str(family_table))
    for table, column, colocate in DISTRIBUTED_TABLES[1:]:
        if _exists(conn, table) and not _laid_out(conn, table):
            _distribute_table(conn, table, column, colocate)
            changed.append(table)
    return changed


def layout_sql() -> str:
    """The statements :func:`distribute` runs on a fresh schema, for DBAs applying the DDL by hand."""
    lines = ["-- Citus: run on the coordinator after the DDL above (ragstore migrate does it itself)."]
    for table in REFERENCE_TABLES:
        lines.append(f"SELECT create_reference_table('ragstore.{table}');")
    for table, column, colocate in DISTRIBUTED_TABLES:
        lines.append(f"SELECT create_distributed_table('ragstore.{table}', '{column}', colocate_with => '{colocate}');")
    lines.append(
        "-- and for each family table (ragstore family create does it itself):\n"
        f"-- SELECT create_distributed_table('ragstore.emb_<family>', '{FAMILY_COLUMN}', "
        f"colocate_with => '{FAMILY_COLOCATE}');"
    )
    return "\n".join(lines) + "\n"
