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
from dataclasses import dataclass
from typing import Any

from psycopg import pq, sql
from psycopg.types.json import Jsonb

from ragstore.common.strictjson import text_problem
from ragstore.db.connection import Conn, db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import Conflict, InvalidInput, NotFound
from ragstore.families import Family, check_name, get_family

OPTION = "filter_keys"
# A key is any JSON object key PostgreSQL can store; this bound keeps statement texts and error lines short.
MAX_KEY_LENGTH = 256


def declared(family: Family) -> tuple[str, ...]:
    """The keys declared on ``family`` (sorted)."""
    raw = family.options.get(OPTION)
    if not isinstance(raw, list):
        return ()
    return tuple(sorted(k for k in raw if isinstance(k, str)))


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


def index_name(table: str, key: str) -> str:
    """The name of ``key``'s index on the family table ``table``: the table's name (cut to 36 characters)
    and a digest of both, at most 56 characters (PostgreSQL's limit is 63)."""
    digest = hashlib.sha256(f"{table}\0{key}".encode()).hexdigest()[:16]
    return f"{table[:36]}_fk_{digest}"


@dataclass(frozen=True)
class FilterKey:
    """A declared key, its index, and whether that index is built and valid."""

    key: str
    index: str
    valid: bool
    bytes: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "index": self.index, "valid": self.valid, "bytes": self.bytes}


def _ddl(block: str, table: str, key: str, *, concurrently: bool) -> sql.Composed:
    return sql.SQL(query("families", block)).format(
        concurrently=sql.SQL("CONCURRENTLY" if concurrently else ""),
        index=sql.Identifier(index_name(table, key)),
        table=sql.Identifier(table),
        key=sql.Literal(key),
    )


def create_indexes(conn: Conn, family: Family, keys: tuple[str, ...] | None = None) -> None:
    """Build the indexes of ``keys`` (by default every declared key) on ``family``'s table, in the caller's
    transaction (for a table nobody reads yet: the one a model migration creates)."""
    for key in declared(family) if keys is None else keys:
        conn.execute(_ddl("filter_key_index", family.table, key, concurrently=False))


def list_keys(conn: Conn, name: str) -> list[FilterKey]:
    """The keys declared on family ``name``, each with its index's state (NotFound: no such family)."""
    family = get_family(conn, name)
    out = []
    with db_errors():
        for key in declared(family):
            index = index_name(family.table, key)
            row = conn.execute(query("families", "filter_key_index_state"), {"index": index}).fetchone()
            out.append(FilterKey(key, index, bool(row and row[0]), None if row is None else int(row[1])))
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


def _update(conn: Conn, name: str, table: str, change: Any) -> Family:
    """Lock family ``name``'s registry row, check it still serves ``table`` and is not migrating, and store
    ``change(keys)`` as its declared keys."""
    with conn.transaction(), db_errors():
        row = conn.execute(query("families", "lock_family_options"), {"name": name}).fetchone()
        if row is None:
            raise NotFound(f"no family named {name!r} (see `ragstore family list`)")
        state, serving, options = row
        if state != "ready" or serving != table:
            raise Conflict(f"family {name!r} is being migrated to another model: finish or abort that first")
        options = dict(options or {})
        keys = sorted(change(set(declared_from(options))))
        if keys:
            options[OPTION] = keys
        else:
            options.pop(OPTION, None)
        conn.execute(query("families", "set_family_options"), {"name": name, "options": Jsonb(options)})
    return get_family(conn, name)


def declared_from(options: dict[str, Any]) -> tuple[str, ...]:
    raw = options.get(OPTION)
    return tuple(k for k in raw if isinstance(k, str)) if isinstance(raw, list) else ()


def _ready(conn: Conn, name: str) -> Family:
    check_name(name)
    family = get_family(conn, name)
    if family.state != "ready":
        raise Conflict(f"family {name!r} is being migrated to another model: finish or abort that first")
    return family


def add_key(conn: Conn, name: str, key: str) -> Family:
    """Declare ``key`` on family ``name``: build its index concurrently (the family stays in use), refresh
    the table's statistics (the planner's estimate of a filter on the key reads the index's expression
    statistics), then record the key. Declaring a declared key again rebuilds a missing or invalid index.
    Raises InvalidInput (the key), NotFound, Conflict (a model migration is under way)."""
    check_key(key)
    family = _ready(conn, name)
    index = index_name(family.table, key)
    with _autocommit(conn), db_errors():
        row = conn.execute(query("families", "filter_key_index_state"), {"index": index}).fetchone()
        if row is not None and not row[0]:  # left invalid by an interrupted build
            conn.execute(_ddl("drop_filter_key_index", family.table, key, concurrently=True))
        conn.execute(_ddl("filter_key_index", family.table, key, concurrently=True))
        conn.execute(sql.SQL(query("families", "analyze_table")).format(table=sql.Identifier(family.table)))
    return _update(conn, name, family.table, lambda keys: keys | {key})


def remove_key(conn: Conn, name: str, key: str) -> Family:
    """Forget ``key`` on family ``name`` and drop its index (filters on it go back to the GIN index).
    Raises InvalidInput (the key is not declared), NotFound, Conflict (a model migration is under way)."""
    family = _ready(conn, name)
    if key not in declared(family):
        raise InvalidInput(f"family {name!r} has no declared filter key {key!r} (see `ragstore family show {name}`)")
    family = _update(conn, name, family.table, lambda keys: keys - {key})
    with _autocommit(conn), db_errors():
        conn.execute(_ddl("drop_filter_key_index", family.table, key, concurrently=True))
    return family
