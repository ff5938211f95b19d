"""Declared filter keys: a btree index per metadata key a family is often filtered on.

A metadata filter reads the family table's copy of the metadata through its GIN index, which PostgreSQL
reads only by a bitmap scan: the rows of one value, spread over the table, cost one heap block each. A
declared key gets a btree on ``(metadata -> 'key')`` (the key's JSON value), and every filter on it
(``{"key": scalar}``, ``$eq``, ``$in``, ``$gt``/``$gte``/``$lt``/``$lte``; see
:mod:`ragstore.search.metafilter`) is rendered with that same expression, so the planner can read its
rows through the btree. Answers are the same with or without the declaration (tested); only the plan
changes. Undeclared keys keep the GIN path.

The declared keys are kept in the family's registry row (``options.filter_keys``, a sorted list); the
index is built first (``CREATE INDEX CONCURRENTLY``: the family stays readable and writable), then the
key is recorded, so a search never renders a key whose index is not built. Removing records first, then
drops the index. A model migration creates the same indexes on its new table and keeps the keys; a family
drop removes them with the table. A key reaches SQL as a quoted literal (``psycopg.sql.Literal``), never
as text pasted in: an index expression cannot hold a parameter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import psycopg
from psycopg import pq, sql
from psycopg.types.json import Jsonb

from ragstore.common.text import text_problem
from ragstore.db.connection import Conn, db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import Conflict, InvalidInput, NotFound
from ragstore.families import COVERING_OPTION, FILTER_KEYS_OPTION, Family, check_name, get_family, listed
from ragstore.families.tables import may_own

# A covering index holds each row's vector; a btree entry holds at most 2,704 bytes, and a 512-d vector
# takes 2,052, leaving the rest for the row's ids and metadata. Wider families declare plain keys.
COVERING_MAX_DIM = 512
# The largest btree entry PostgreSQL accepts on an 8 kB page (BTMaxItemSize, btree version 4).
BTREE_MAX_ENTRY = 2704
# A key is any JSON object key PostgreSQL can store; this bound keeps statement texts and error lines short.
MAX_KEY_LENGTH = 256


def check_key(key: object) -> str:
    """``key`` when it can be declared (non-empty text PostgreSQL can store), else InvalidInput."""
    if not isinstance(key, str) or not key:
        raise InvalidInput(f"a filter key must be non-empty text, got {key!r}")
    if key.startswith("$"):
        raise InvalidInput(f"filter key {key!r} starts with $, which a metadata filter reads as an operator")
    problem = text_problem(key)
    if problem is not None:
        raise InvalidInput(f"filter key {key!r} holds {problem}")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(f"filter key {key[:40]!r}… is {len(key)} characters long; the most is {MAX_KEY_LENGTH}")
    return key


def index_name(table: str, key: str, covering: bool = False) -> str:
    """The name of ``key``'s index (plain or ``covering``) on the family table ``table``: the table's name
    (cut to 36 characters) and a digest of all three, at most 57 characters (PostgreSQL's limit is 63)."""
    digest = hashlib.sha256(f"{table}\0{key}\0{'covering' if covering else 'btree'}".encode()).hexdigest()[:16]
    return f"{table[:36]}_fk{'c' if covering else ''}_{digest}"


def covering_problem(family: Family) -> str | None:
    """Why ``family`` cannot have covering filter-key indexes (its vectors are too wide), or None."""
    if family.vector_type == "vector" and family.dim <= COVERING_MAX_DIM:
        return None
    return (
        f"a covering index holds each row's vector, and family {family.name!r} has {family.dim}-d "
        f"{family.vector_type} vectors: over the {COVERING_MAX_DIM} dimensions a btree entry can hold; "
        "declare the key without covering"
    )


def _aligned(size: int) -> int:
    return (size + 3) & ~3


def entry_problems(
    conn: Conn, family: Family, ids: list[str], packages: list[str], metadata: list[dict[str, Any]]
) -> list[tuple[int, str]]:
    """The records (by position) whose entry in one of ``family``'s covering indexes would be over
    :data:`BTREE_MAX_ENTRY`, each with a line saying so; none for a family without covering keys.

    Every row has an entry in each covering index (a row without the key too: its key is NULL), holding
    the key's value, the row's ids, digest, vector and metadata. The size is counted before compression,
    an upper bound of what the server stores (a 4-byte header and alignment for every column, the null
    bitmap's header), so a record that passes is never refused by the index, and whether a record passes
    does not depend on how well its metadata compresses. The jsonb sizes are asked of the server in one
    statement."""
    keys = sorted(family.covering)
    if not keys or not metadata:
        return []
    with db_errors(), conn.transaction():
        rows = conn.execute(
            query("ingest", "covering_entry_sizes"), {"keys": keys, "metadata": [Jsonb(m) for m in metadata]}
        ).fetchall()
    fixed = 16 + _aligned(4 + len(family.name.encode())) + _aligned(4 + 32) + _aligned(8 + 4 * family.dim)
    out = []
    for i, (meta_size, key_size) in enumerate(rows):
        ident = _aligned(4 + len(ids[i].encode())) + _aligned(4 + len(packages[i].encode()))
        size = fixed + ident + _aligned(int(key_size)) + _aligned(int(meta_size))
        if size > BTREE_MAX_ENTRY:
            out.append(
                (
                    i,
                    f"the row's entry in a covering filter-key index ({', '.join(map(repr, keys))}) would take "
                    f"{size:,} bytes (before compression), over btree's {BTREE_MAX_ENTRY:,}; nothing was written: "
                    "keep less metadata, or declare the key without --covering",
                )
            )
    return out


@dataclass(frozen=True)
class FilterKey:
    """A declared key, its index (covering or not), and whether that index is built and valid."""

    key: str
    covering: bool
    index: str
    valid: bool
    bytes: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ddl(block: str, table: str, key: str, *, covering: bool, concurrently: bool) -> sql.Composed:
    if block == "filter_key_index" and covering:
        block = "filter_key_index_covering"
    return sql.SQL(query("families", block)).format(
        concurrently=sql.SQL("CONCURRENTLY" if concurrently else ""),
        index=sql.Identifier(index_name(table, key, covering)),
        table=sql.Identifier(table),
        key=sql.Literal(key),
    )


def create_indexes(conn: Conn, family: Family) -> None:
    """Build the indexes of every key declared on ``family`` on its table, in the caller's transaction (for
    a table nobody reads yet: the one a model migration creates). ``family`` is the family on that table:
    its covering keys when the table's vectors allow them (:func:`kept_options` says what is kept)."""
    wide = covering_problem(family) is not None
    for key in family.filter_keys:
        cover = key in family.covering and not wide
        conn.execute(_ddl("filter_key_index", family.table, key, covering=cover, concurrently=False))


def kept_options(old: Family, new: Family) -> dict[str, Any]:
    """The filter-key options a family keeps when its table is replaced by ``new``'s (a model migration):
    its keys, and its covering keys while ``new``'s vectors are narrow enough for them."""
    kept: dict[str, Any] = {}
    if old.filter_keys:
        kept[FILTER_KEYS_OPTION] = list(old.filter_keys)
    cover = sorted(old.covering) if covering_problem(new) is None else []
    if cover:
        kept[COVERING_OPTION] = cover
    return kept


def list_keys(conn: Conn, name: str) -> list[FilterKey]:
    """The keys declared on family ``name``, each with its index's state (NotFound: no such family)."""
    family = get_family(conn, name)
    out = []
    with db_errors():
        for key in family.filter_keys:
            cover = key in family.covering
            index = index_name(family.table, key, cover)
            row = conn.execute(query("families", "filter_key_index_state"), {"index": index}).fetchone()
            out.append(FilterKey(key, cover, index, bool(row and row[0]), None if row is None else int(row[1])))
    return out


@contextmanager
def _autocommit(conn: Conn) -> Iterator[None]:
    """``CREATE/DROP INDEX CONCURRENTLY`` run outside any transaction: autocommit for the block."""
    if conn.info.transaction_status != pq.TransactionStatus.IDLE and not conn.autocommit:
        conn.commit()
    before = conn.autocommit
    conn.autocommit = True
    try:
        yield
    finally:
        conn.autocommit = before


def _update(conn: Conn, name: str, table: str, key: str, mode: bool | None) -> Family:
    """Lock family ``name``'s registry row, check it still serves ``table`` and is not migrating, and record
    ``key`` as declared plain (``mode`` False), covering (True) or not declared (None)."""
    with conn.transaction(), db_errors():
        row = conn.execute(query("families", "lock_family_options"), {"name": name}).fetchone()
        if row is None:
            raise NotFound(f"no family named {name!r} (see `ragstore family list`)")
        state, serving, options = row
        if state != "ready" or serving != table:
            raise Conflict(f"family {name!r} is being migrated to another model: finish or abort that first")
        options = dict(options or {})
        keys, cover = set(listed(options, FILTER_KEYS_OPTION)) - {key}, set(listed(options, COVERING_OPTION)) - {key}
        if mode is not None:
            keys.add(key)
        if mode:
            cover.add(key)
        for option, values in ((FILTER_KEYS_OPTION, keys), (COVERING_OPTION, cover)):
            if values:
                options[option] = sorted(values)
            else:
                options.pop(option, None)
        conn.execute(query("families", "set_family_options"), {"name": name, "options": Jsonb(options)})
    return get_family(conn, name)


def _ready(conn: Conn, name: str) -> Family:
    check_name(name)
    family = get_family(conn, name)
    if family.state != "ready":
        raise Conflict(f"family {name!r} is being migrated to another model: finish or abort that first")
    return family


def add_key(conn: Conn, name: str, key: str, *, covering: bool = False) -> Family:
    """Declare ``key`` on family ``name``: build its index concurrently (the family stays in use), refresh
    the table's statistics (the planner's estimate of a filter on the key reads the index's expression
    statistics; for a covering index a VACUUM too, which marks the pages all-visible so that its scans skip
    the heap), record the key, then drop its index of the other form if it had one (declaring a key again
    with or without ``covering`` switches it). Declaring a declared key again rebuilds a missing or invalid
    index. Commits a transaction the connection has open (the index is built outside any). Raises
    InvalidInput (the key; ``covering`` on a family whose vectors are too wide), NotFound, Conflict (a model
    migration is under way)."""
    check_key(key)
    family = _ready(conn, name)
    if covering:
        problem = covering_problem(family)
        if problem is not None:
            raise InvalidInput(problem)
    index = index_name(family.table, key, covering)
    with _autocommit(conn), db_errors():
        row = conn.execute(query("families", "filter_key_index_state"), {"index": index}).fetchone()
        if row is not None and not row[0]:  # left invalid by an interrupted build
            conn.execute(_ddl("drop_filter_key_index", family.table, key, covering=covering, concurrently=True))
        try:
            conn.execute(_ddl("filter_key_index", family.table, key, covering=covering, concurrently=True))
        except psycopg.Error:
            # A failed concurrent build leaves an invalid index behind, which every write would maintain.
            conn.execute(_ddl("drop_filter_key_index", family.table, key, covering=covering, concurrently=True))
            raise
        refresh = "vacuum_analyze_table" if covering else "analyze_table"
        conn.execute(sql.SQL(query("families", refresh)).format(table=sql.Identifier(family.table)))
    family = _update(conn, name, family.table, key, covering)
    with _autocommit(conn), db_errors():
        conn.execute(_ddl("drop_filter_key_index", family.table, key, covering=not covering, concurrently=True))
    return family


def after_bulk_cluster(conn: Conn, family: Family) -> bool:
    """After a bulk load's clustering, which rewrites the family table with an empty visibility map: a
    family with a covering key gets a VACUUM (ANALYZE), so that its index-only scans skip the heap from the
    first search instead of after autovacuum's visit. Run before the HNSW build (the table has no graph to
    visit then, and after the rewrite no dead row). Returns whether it ran. Skipped for a role that does
    not own the table (the app), which VACUUM would refuse with a warning: its scans then read the heap
    until autovacuum's visit."""
    if not family.covering or not may_own(conn, family):
        return False
    with _autocommit(conn), db_errors():
        conn.execute(sql.SQL(query("families", "vacuum_analyze_table")).format(table=sql.Identifier(family.table)))
    return True


def remove_key(conn: Conn, name: str, key: str) -> Family:
    """Forget ``key`` on family ``name`` and drop its index (filters on it go back to the GIN index).
    Raises InvalidInput (the key is not declared), NotFound, Conflict (a model migration is under way)."""
    family = _ready(conn, name)
    if key not in family.filter_keys:
        raise InvalidInput(f"family {name!r} has no declared filter key {key!r} (see `ragstore family show {name}`)")
    family = _update(conn, name, family.table, key, None)
    with _autocommit(conn), db_errors():
        for cover in (False, True):
            conn.execute(_ddl("drop_filter_key_index", family.table, key, covering=cover, concurrently=True))
    return family
