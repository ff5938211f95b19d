"""ragstore on Citus: detect the extension and lay ragstore's tables out across the cluster.

The layout (``ragstore/sql/citus.sql`` says the same for DBAs):

- ``ragstore.chunks`` and every family table ``ragstore.emb_<family>`` are distributed on ``chunk_id``
  and co-located: a chunk's text and its vectors share a shard, so the ``(family, chunk_id)`` join and
  foreign key stay on one node and ``ORDER BY embedding <=> q LIMIT k`` runs on every shard's HNSW index;
- the registry every node reads (``ragstore.families``) and the embedding cache (which a family migration
  joins to the chunks) are reference tables (a copy on every node);
- the rest stays on the coordinator as plain tables: ``alembic_version``, the agent bindings
  (``ragstore.agent_principals``) and agent memory (``ragstore.memory``, ``ragstore.memory_embeddings``,
  ``ragstore.memory_forget_log``). The bindings stay with the memory they guard: memory's row-level
  security joins them to ``pg_roles``, which Citus, planning a reference table there, would read as
  ``pg_authid`` with the caller's rights ("permission denied for table pg_authid" for every role but a
  superuser); a database laid out by an earlier ragstore gets them back with ``undistribute_table``. Citus
  refuses to distribute memory as it is: its row-level security policies hold scalar subqueries ("Subqueries
  are not supported in policies on distributed tables") and its append-only triggers need
  ``citus.enable_unsafe_triggers``. Memory is small next to the chunks, and on the coordinator its
  policies and triggers work exactly as on one node.

:func:`distribute` is idempotent: a table already laid out is left alone.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from ragstore.db.dialect import dialect_of
from ragstore.db.sqlfiles import query

Conn = psycopg.Connection[Any]

REFERENCE_TABLES = ("families", "embedding_cache", "family_sources")
# Plain tables of the coordinator that an earlier layout made Citus tables: given back (undistribute_table).
COORDINATOR_TABLES = ("agent_principals",)
# (table, distribution column, the table it is co-located with or "default" for a new group)
DISTRIBUTED_TABLES = (("chunks", "chunk_id", "default"), ("chunk_terms", "chunk_id", "ragstore.chunks"))
FAMILY_COLUMN = "chunk_id"
FAMILY_COLOCATE = "ragstore.chunks"


def is_citus(conn: Conn) -> bool:
    """Whether the connected database has the citus extension (so ragstore lays its tables out)."""
    row = conn.execute(query("citus", "is_citus")).fetchone()
    return bool(row and row[0])


def on_citus(conn: Conn) -> bool:
    """:func:`is_citus`, asked once per connection (the answer of :func:`ragstore.db.dialect.dialect_of`)."""
    return dialect_of(conn).name == "citus"


def _exists(conn: Conn, table: str) -> bool:
    row = conn.execute(query("citus", "table_exists"), {"table": table}).fetchone()
    return bool(row and row[0])


def _laid_out(conn: Conn, table: str, *, reference: bool = False) -> bool:
    row = conn.execute(query("citus", "is_distributed"), {"table": table, "reference": reference}).fetchone()
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
    family table co-located with it.
    """
    changed: list[str] = []
    if _exists(conn, "families"):
        conn.execute(query("citus", "drop_family_views"))
    for table in COORDINATOR_TABLES:
        if _exists(conn, table) and _laid_out(conn, table, reference=True):
            conn.execute(query("citus", "undistribute_table"), {"table": table})
            changed.append(table)
    for table in REFERENCE_TABLES:
        if _exists(conn, table) and not _laid_out(conn, table, reference=True):
            if table == "families":
                for statement in query("citus", "drop_registry_triggers").split(";"):
                    conn.execute(statement)
            conn.execute(query("citus", "reference_table"), {"table": table})
            changed.append(table)
    pending: list[str] = []
    if _exists(conn, "families"):
        pending = [
            str(t)
            for (t,) in conn.execute(query("citus", "family_tables")).fetchall()
            if _exists(conn, str(t)) and not _laid_out(conn, str(t))
        ]
    # Family tables made before chunks is distributed (a single-node database moved to Citus) hold foreign
    # keys to it that Citus would refuse: dropped here, re-added once both sides are co-located.
    foreign_keys: list[tuple[str, str, str]] = []
    for table in pending:
        for name, definition in conn.execute(query("citus", "chunk_foreign_keys"), {"table": table}).fetchall():
            foreign_keys.append((table, str(name), str(definition)))
            conn.execute(
                sql.SQL("ALTER TABLE ragstore.{} DROP CONSTRAINT {}").format(
                    sql.Identifier(table), sql.Identifier(str(name))
                )
            )
    for table, column, colocate in DISTRIBUTED_TABLES:
        if _exists(conn, table) and not _laid_out(conn, table):
            if table == "chunks":
                # Citus distributes no table with triggers: the chunk-count ledger's (the full-text IDF's
                # per-family count) and the postings' go; full text and hybrid read the
                # chunks' tsv there instead (ragstore/sql/hybrid_citus.sql).
                for statement in query("citus", "drop_count_triggers").split(";"):
                    conn.execute(statement)
            _distribute_table(conn, table, column, colocate)
            changed.append(table)
    for table in pending:
        if distribute_family(conn, table):
            changed.append(table)
    for table, name, definition in foreign_keys:
        # definition is PostgreSQL's own text of the constraint (pg_get_constraintdef), not input.
        conn.execute(
            sql.SQL("ALTER TABLE ragstore.{} ADD CONSTRAINT {} ").format(sql.Identifier(table), sql.Identifier(name))
            + sql.SQL(definition)
        )
    return changed


def layout_sql() -> str:
    """The statements :func:`distribute` runs on a fresh schema, for DBAs applying the DDL by hand."""
    lines = ["-- Citus: run on the coordinator after the DDL above (ragstore migrate does it itself)."]
    for table in REFERENCE_TABLES:
        lines.append(f"SELECT create_reference_table('ragstore.{table}');")
    lines.append(query("citus", "drop_count_triggers").strip() + ";")
    for table, column, colocate in DISTRIBUTED_TABLES:
        lines.append(f"SELECT create_distributed_table('ragstore.{table}', '{column}', colocate_with => '{colocate}');")
    lines.append(
        "-- and for each family table (ragstore family create does it itself):\n"
        f"-- SELECT create_distributed_table('ragstore.emb_<family>', '{FAMILY_COLUMN}', "
        f"colocate_with => '{FAMILY_COLOCATE}');"
    )
    return "\n".join(lines) + "\n"
