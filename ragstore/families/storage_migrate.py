"""``ragstore family migrate NAME --storage S``: switch a family's index storage without downtime.

Nothing is re-embedded and the table is not rewritten (every storage indexes the same full-precision
column, ragstore.families.storage). The steps:

1. the index in the new storage is built beside the serving one, ``CREATE INDEX CONCURRENTLY`` under the
   name ``<table>_embedding_hnsw_next`` (reads and writes go on; a leftover of an interrupted run, valid or
   not, is dropped first);
2. ONE transaction locks the registry row, records the storage (and rerank factor), renames the serving
   index to ``..._prev`` and the new one to the family's index name: a search planned after the commit
   orders by the new expression and reads the new index;
3. the old index is dropped ``CONCURRENTLY``.

A process that remembered the family from before the swap orders by the old expression: until it reads the
family again (its cache, a hybrid search's guard) its searches are answered by an exact scan, correct but
slower, once the old index is gone. Only a role that owns the family table may migrate (the app and reader
may not create its indexes). Errors: NotFound, InvalidInput (the storage, the factor), Conflict (a model
migration is under way, or another storage migration of the family).
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql
from psycopg.types.json import Jsonb

from ragstore.db.connection import Conn, db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import Conflict, InvalidInput, NotFound
from ragstore.families import Family, get_family
from ragstore.families import storage as storages
from ragstore.families.filter_keys import _autocommit
from ragstore.families.tables import may_own, reset_build, size_build


@dataclass(frozen=True)
class StorageMigration:
    family: str
    source: str
    target: str
    rerank_factor: int | None
    index_bytes_before: int | None
    index_bytes_after: int | None
    rebuilt: bool


def migrate_storage(conn: Conn, name: str, storage: str, *, rerank_factor: int | None = None) -> StorageMigration:
    """Switch family ``name`` to ``storage`` (see the module docstring). With the same storage, only the
    rerank factor changes (no index is built). Commits what the connection has open."""
    family = get_family(conn, name)
    storages.check_storage(storage, family.dim, family.vector_type)
    if rerank_factor is None and storage == "bit" == family.storage and "rerank_factor" in family.options:
        rerank_factor = family.rerank_factor  # the factor stays unless a new one is given
    options = storages.storage_options(storage, rerank_factor)
    if family.state != "ready":
        raise Conflict(f"family {name!r} is being migrated to another model: finish or abort that first")
    if not may_own(conn, family):
        raise InvalidInput(
            f"only the owner of ragstore.{family.table} may change its storage (a member of ragstore_owner)"
        )
    before = _index_bytes(conn, family.hnsw_index)
    if storage == family.storage:
        _record(conn, family, options, swap=False)
        return StorageMigration(name, storage, storage, rerank_factor, before, before, False)
    target = Family(**{**family.__dict__, "options": {**_without_storage(family.options), **options}})
    shadow, previous = f"{family.table}_embedding_hnsw_next", f"{family.table}_embedding_hnsw_prev"
    ids = target.index_identifiers()
    with _autocommit(conn), db_errors():
        if not _try_lock(conn, name):
            raise Conflict(f"family {name!r} is being migrated by another process: wait for it")
        try:
            for leftover in (shadow, previous):
                conn.execute(_index_ddl("drop_index_concurrently", leftover))
            size_build(conn, target, local=False)
            try:
                conn.execute(sql.SQL(query("families", "create_shadow_hnsw_index")).format(
                    **ids, index=sql.Identifier(shadow)
                ))  # fmt: skip
            finally:
                reset_build(conn)
            _record(conn, family, target.options, swap=True)
            conn.execute(_index_ddl("drop_index_concurrently", previous))
        except BaseException:
            conn.execute(_index_ddl("drop_index_concurrently", shadow))
            raise
        finally:
            conn.execute(query("family_migrate", "unlock"), {"name": name})
    return StorageMigration(
        name, family.storage, storage, rerank_factor, before, _index_bytes(conn, family.hnsw_index), True
    )


def _without_storage(options: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in options.items() if k not in ("storage", "rerank_factor", "recall")}


def _record(conn: Conn, family: Family, options: dict[str, object], *, swap: bool) -> None:
    """In one transaction: the registry row locked, still serving the same table, its storage options
    replaced (the last measured recall forgotten: it measured the old storage) and, with ``swap``, the
    serving index renamed to _prev and the new one to the family's index name."""
    with conn.transaction(), db_errors():
        row = conn.execute(query("families", "lock_family_options"), {"name": family.name}).fetchone()
        if row is None:
            raise NotFound(f"no family named {family.name!r} (see `ragstore family list`)")
        state, serving, current = row
        if state != "ready" or serving != family.table:
            raise Conflict(f"family {family.name!r} is being migrated to another model: finish or abort that first")
        merged = {
            **_without_storage(dict(current or {})),
            **{k: v for k, v in options.items() if k in ("storage", "rerank_factor")},
        }
        conn.execute(query("families", "set_family_options"), {"name": family.name, "options": Jsonb(merged)})
        if swap:
            serving_index = family.hnsw_index
            conn.execute(_rename(serving_index, f"{family.table}_embedding_hnsw_prev"))
            conn.execute(_rename(f"{family.table}_embedding_hnsw_next", serving_index))


def _try_lock(conn: Conn, name: str) -> bool:
    """The model migration's per-family lock: one migration of either kind at a time."""
    row = conn.execute(query("family_migrate", "try_lock"), {"name": name}).fetchone()
    return bool(row and row[0])


def _index_ddl(block: str, index: str) -> sql.Composed:
    return sql.SQL(query("families", block)).format(index=sql.Identifier(index))


def _rename(index: str, new_name: str) -> sql.Composed:
    return sql.SQL(query("families", "rename_index")).format(
        index=sql.Identifier(index), new_name=sql.Identifier(new_name)
    )


def _index_bytes(conn: Conn, index: str) -> int | None:
    with db_errors():
        row = conn.execute(query("families", "filter_key_index_state"), {"index": index}).fetchone()
    return None if row is None else int(row[1])
