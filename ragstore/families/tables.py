"""A family's objects in the database: its table, indexes and view created and handed to the owner role, and
its HNSW index dropped, built again and its table clustered around a bulk load.

A role that owns the family table (or acts as ``ragstore_owner``) runs the DDL itself; the app goes through
the SECURITY DEFINER functions of ragstore/sql/functions/ (``family_build_hnsw``, ``family_bulk_cluster``,
``family_bulk_drop_hnsw``), which do the same as the owner. Every statement is a block of
ragstore/sql/families.sql or roles.sql; what Citus does differently is its :class:`~ragstore.db.dialect.Dialect`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from ragstore.db import citus
from ragstore.db.connection import Conn, db_errors
from ragstore.db.dialect import dialect_of
from ragstore.db.sqlfiles import query
from ragstore.families import build_memory

if TYPE_CHECKING:
    from ragstore.families import Family


def create_table(conn: Conn, family: Family) -> None:
    """Create the family's table, its package btree, its metadata GIN index and its HNSW index (inside the
    caller's transaction)."""
    ids = family.index_identifiers()
    for block in ("create_table", "create_package_index", "create_metadata_index", "create_hnsw_index"):
        conn.execute(sql.SQL(query("families", block)).format(**ids))
    if dialect_of(conn).lays_out:
        # On Citus the table is distributed on chunk_id, co-located with ragstore.chunks (its shards and
        # their indexes are created on the workers, in this transaction).
        citus.distribute_family(conn, family.table)
    give_table_to_owner(conn, family)
    create_view(conn, family)


def create_view(conn: Conn, family: Family) -> None:
    """Create, or re-point at the family's current table, its view ``ragstore.vectors_<name>`` (``create_view``
    in ragstore/sql/families.sql), owned by ``ragstore_owner`` and readable by the app and reader roles, inside
    the caller's transaction: the stable name hand-written SQL uses, whatever model migrations did. Not on
    Citus (docs/guide/citus.md): there, read the table name from ``ragstore.families``."""
    if not dialect_of(conn).family_views:
        return
    ids = family.identifiers()
    conn.execute(sql.SQL(query("families", "create_view")).format(**ids))
    row = conn.execute(query("roles", "owner_transfer"), {"table": family.view}).fetchone()
    if row is not None and row[0] and row[1]:
        conn.execute(sql.SQL(query("roles", "give_view_to_owner")).format(**ids))
    exists = conn.execute(query("roles", "group_roles_exist")).fetchone()
    if exists and exists[0]:
        conn.execute(sql.SQL(query("roles", "grant_view")).format(**ids))


def give_table_to_owner(conn: Conn, family: Family) -> None:
    """Make ``ragstore_owner`` the owner of the family's new table and grant the app and reader their rights.

    A table belongs to whoever created it (a superuser, a deployer): given to ``ragstore_owner`` here, every
    member of the owner role can maintain it, and the bulk-load functions (SECURITY DEFINER, owned by
    ``ragstore_owner``) can drop and build its index. Skipped when the roles do not exist or the creator
    may not act as ``ragstore_owner``. Runs inside the caller's transaction.
    """
    ids = {"table": sql.Identifier(family.table)}
    row = conn.execute(query("roles", "owner_transfer"), {"table": family.table}).fetchone()
    if row is None or not row[1]:
        return
    if row[0]:
        conn.execute(sql.SQL(query("roles", "give_table_to_owner")).format(**ids))
    exists = conn.execute(query("roles", "group_roles_exist")).fetchone()
    if exists and exists[0]:
        conn.execute(sql.SQL(query("roles", "grant_table_to_app")).format(**ids))
        conn.execute(sql.SQL(query("roles", "grant_table_to_reader")).format(**ids))


def _lock_index_ddl(conn: Conn, family: Family) -> None:
    """Serialise drops and builds of one family's HNSW index (two bulk loads must not collide)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('ragstore.hnsw.' || %s, 0))", (family.table,))


def may_own(conn: Conn, family: Family) -> bool:
    """Whether this session has the privileges of the family table's owner (else: the definer functions)."""
    row = conn.execute(query("roles", "may_own_table"), {"table": family.table}).fetchone()
    return bool(row and row[0])


def build_settings(conn: Conn, family: Family, *, work: str = "hnsw") -> dict[str, str]:
    """``maintenance_work_mem`` and ``max_parallel_maintenance_workers`` for building the family's HNSW index
    (``work`` "hnsw": its rows, as the planner counts them or counted) or clustering its table ("cluster":
    its bytes), by the rule of :mod:`ragstore.families.build_memory`."""
    row = conn.execute(query("families", "build_size"), {"table": family.table}).fetchone()
    rows, table_bytes = (row[0], row[1]) if row else (None, 0)
    if work == "cluster":
        need = int(table_bytes or 0)
    else:
        if rows is None:
            counted = conn.execute(sql.SQL(query("families", "count_rows")).format(**family.identifiers())).fetchone()
            rows = counted[0] if counted else 0
        need = build_memory.hnsw_need(int(rows), family.storage, family.vector_type, family.dim)
    workers = build_memory.parallel_workers()
    return {
        "memory": build_memory.setting(build_memory.maintenance_bytes(need, workers=workers)),
        "workers": str(workers),
    }


def size_build(conn: Conn, family: Family, *, work: str = "hnsw", local: bool = True) -> dict[str, str]:
    """Set :func:`build_settings` for this transaction (``local``) or this session (then reset them with
    :func:`reset_build`); returns them."""
    chosen = build_settings(conn, family, work=work)
    conn.execute(query("families", "set_build_settings"), {**chosen, "is_local": local})
    return chosen


def reset_build(conn: Conn) -> None:
    """The server's build settings again for this session (after :func:`size_build` with ``local=False``)."""
    conn.execute(query("families", "reset_build_settings"))


def ensure_hnsw_index(conn: Conn, family: Family) -> None:
    """Build the HNSW index when missing (after a bulk load), with build memory and workers sized for its rows
    for this transaction (:func:`size_build`).

    A role that does not own the table (the app) goes through ``ragstore.family_build_hnsw``, which builds
    the same index as its owner (SECURITY DEFINER, the family found by name in the registry) with the
    caller's settings.
    """
    with conn.transaction(), db_errors():
        _lock_index_ddl(conn, family)
        size_build(conn, family)
        if not may_own(conn, family):
            dialect_of(conn).registry_then_shards(conn)
            conn.execute(query("roles", "build_hnsw"), {"family": family.name})
            return
        conn.execute(sql.SQL(query("families", "create_hnsw_index")).format(**family.index_identifiers()))


def cluster_by_package(conn: Conn, family: Family) -> None:
    """Rewrite the family table in package_path order and refresh its statistics.

    Done after a bulk load into an empty family, before the HNSW build: rows of one package then sit on
    contiguous pages, so a package-filtered exact search reads a few pages instead of one per row
    (0.73 ms against 3.7 ms at 1% of 100k×384: docs/decisions.md, "Clustering by package"). Rows written
    later append at the end.
    """
    with conn.transaction(), db_errors():
        _lock_index_ddl(conn, family)
        size_build(conn, family, work="cluster")
        if not may_own(conn, family):  # the app: ragstore.family_bulk_cluster clusters and analyzes
            dialect_of(conn).registry_then_shards(conn)
            conn.execute(query("roles", "bulk_cluster"), {"family": family.name})
            return
        conn.execute(sql.SQL(query("families", "cluster_by_package")).format(**family.identifiers()))
    with conn.transaction(), db_errors():
        conn.execute(sql.SQL(query("families", "analyze_table")).format(**family.identifiers()))


def drop_hnsw_index(conn: Conn, family: Family) -> bool:
    """Drop the family's HNSW index for a bulk load; True when it is gone.

    A role that does not own the table (the app) goes through ``ragstore.family_bulk_drop_hnsw``, which
    drops it only while the family's table is empty (returns False otherwise).
    """
    with conn.transaction(), db_errors():
        _lock_index_ddl(conn, family)
        if not may_own(conn, family):
            dialect_of(conn).registry_then_shards(conn)
            row = conn.execute(query("roles", "bulk_drop_hnsw"), {"family": family.name}).fetchone()
            return bool(row and row[0])
        conn.execute(sql.SQL(query("families", "drop_hnsw_index")).format(**family.identifiers()))
    return True
