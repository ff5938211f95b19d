"""The SQL dialect of a database: one PostgreSQL node, or Citus. Chosen once per connection.

A :class:`Dialect` carries what differs, as data instead of ``if on_citus`` branches at each use:

- its statement set: the files whose blocks replace the one-node blocks of the same name
  (``ragstore/sql/hybrid_citus.sql`` for ``hybrid.sql``, ``search_citus.sql`` for ``search.sql``):
  :meth:`Dialect.block` and :meth:`Dialect.part`;
- its capabilities: whether a statement makes its HNSW settings itself with ``set_config(..., true)``
  (one node) or they are ``SET LOCAL`` first and propagated to the workers (Citus:
  :meth:`Dialect.hnsw_settings`); whether the hybrid statement may check the family's row in its own
  snapshot (the guard of a search on a remembered family: one node); whether the exact scan streams
  heap-page ranges (a ``ctid`` means nothing across shards); whether ragstore's tables are laid out over
  nodes (a new family table is distributed, a followed table must not be; ``ragstore migrate`` lays them
  out); whether families have their view ``ragstore.vectors_<family>``; whether a chunk delete takes the
  shared lock of the words' document counts (one node: Citus's writers keep no counts);
- the statements a transaction that reads the registry and then writes a family table's shards (or the
  reverse) runs first: :meth:`Dialect.registry_then_shards` (block ``sequential`` of ``citus.sql`` on
  Citus, nothing on one node);
- the write path's capabilities (:mod:`ragstore.ingest.writer`): whether a merge orders its locks (the
  family's term-df lock first, the stored chunks' vectors merged before the chunk merge), whether a load
  into an empty family may COPY straight into the tables (and stream), whether a run may write on a
  second connection, whether a churned family's HNSW index is rebuilt, and whether the session's staging
  tables may be joined to a family's table in an UPDATE or DELETE (Citus refuses: its ``ingest_citus.sql``
  blocks take the ids as an array instead).

:func:`dialect_of` asks the database once per connection whether it has the citus extension
(:func:`ragstore.db.citus.on_citus` reads the same answer).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from psycopg import sql

from ragstore.db.connection import Conn, db_errors
from ragstore.db.sqlfiles import query

__all__ = ["BY_CITUS", "CITUS", "IS_CITUS", "POSTGRES", "Dialect", "dialect_of"]


@dataclass(frozen=True, eq=False)
class Dialect:
    """A statement set and capabilities (module docstring). There are two, :data:`POSTGRES` and :data:`CITUS`:
    a dialect is itself (equal and hashed by identity, so that the statements cached per dialect look it up
    at no cost)."""

    name: str
    overrides: tuple[tuple[str, str], ...]
    settings_in_statement: bool
    guard: bool
    page_ranges: bool
    lays_out: bool = False
    family_views: bool = True
    term_df_lock: bool = True
    # Blocks of ragstore/sql/citus.sql run by registry_then_shards.
    registry_then_shards_blocks: tuple[str, ...] = ()
    ordered_merge: bool = True
    direct_copy: bool = True
    second_writer: bool = True
    rebuild_index: bool = True
    stage_joins: bool = True

    def _source(self, file: str) -> str:
        return dict(self.overrides).get(file, file)

    def block(self, file: str, name: str) -> str:
        """Block ``name`` of ``file`` in this dialect: its own file's block of that name, else ``file``'s."""
        source = self._source(file)
        if source != file:
            try:
                return query(source, name)
            except KeyError:
                pass
        return query(file, name)

    def part(self, file: str, name: str) -> str:
        """Block ``name`` of this dialect's form of ``file``, or nothing where that form has none (a part
        of a statement only one dialect needs)."""
        try:
            return query(self._source(file), name)
        except KeyError:
            return ""

    def registry_then_shards(self, conn: Conn) -> None:
        """Before statements that read or write the registry (a reference table on Citus) and change a
        family table in one transaction: on Citus, run the multi-shard ones shard by shard (``SET LOCAL``;
        ``ragstore/sql/citus.sql`` says why); nothing on one node."""
        for block in self.registry_then_shards_blocks:
            conn.execute(query("citus", block))

    def hnsw_settings(self, *, ef_search: int, iterative: bool) -> list[sql.Composed | sql.SQL]:
        """What runs before an HNSW statement, in its transaction: nothing on one node (the statement sets
        them), the ``SET LOCAL`` that reach the workers on Citus."""
        if self.settings_in_statement:
            return []
        return [
            sql.SQL("SET LOCAL citus.propagate_set_commands = 'local'"),
            sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(str(int(ef_search)))),
            sql.SQL("SET LOCAL hnsw.iterative_scan = {}").format(sql.Literal("relaxed_order" if iterative else "off")),
        ]


POSTGRES = Dialect("postgres", (), settings_in_statement=True, guard=True, page_ranges=True)
CITUS = Dialect(
    "citus",
    (("hybrid", "hybrid_citus"), ("search", "search_citus"), ("ingest", "ingest_citus")),
    settings_in_statement=False,
    guard=False,
    page_ranges=False,
    lays_out=True,
    family_views=False,
    term_df_lock=False,
    registry_then_shards_blocks=("sequential",),
    # Citus spreads a batch's shards over its workers' cores already; the one-node lock order and bulk
    # paths are not its own (a temporary table lives on the coordinator only).
    ordered_merge=False,
    direct_copy=False,
    second_writer=False,
    rebuild_index=False,
    stage_joins=False,
)


#: The dialect of a database, by its answer to :data:`IS_CITUS` (whether it has the citus extension): the
#: one mapping every asker uses (:func:`dialect_of`, the search plan's ``learn_dialect``, the async driver).
BY_CITUS: dict[bool, Dialect] = {False: POSTGRES, True: CITUS}
#: The question (block ``is_citus`` of citus.sql), read once.
IS_CITUS = query("citus", "is_citus")

_KNOWN: weakref.WeakKeyDictionary[Conn, Dialect] = weakref.WeakKeyDictionary()


def dialect_of(conn: Conn) -> Dialect:
    """The dialect of ``conn``'s database, asked once per connection (block ``is_citus`` of citus.sql)."""
    known = _KNOWN.get(conn)
    if known is None:
        with db_errors():
            row = conn.execute(IS_CITUS).fetchone()
        known = _KNOWN[conn] = BY_CITUS[bool(row and row[0])]
    return known
