"""The tables a family follows: ``ragstore sync add | list | remove`` (docs/guide/sync.md).

``add`` registers the table in ``ragstore.sync_sources``, installs its four triggers (insert, update of the
followed columns when one of them changed, delete, truncate; all calling ``ragstore.sync_enqueue``) and
queues every row already there, in one transaction. Every name of the source table goes into SQL as a
:class:`psycopg.sql.Identifier`; the ``--where`` predicate is the one SQL text taken from the user (the
table's owner), refused unless it is one expression over the table.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from ragstore.db import citus
from ragstore.db.connection import db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import Conflict, InvalidInput, NotFound, PermissionDenied, RagstoreError
from ragstore.families import get_family

Conn = psycopg.Connection[Any]
TRIGGERS = ("insert", "update", "delete", "truncate")


@dataclass(frozen=True)
class SyncSource:
    """One followed table (a row of ``ragstore.sync_sources``)."""

    id: int
    family: str
    prefix: str
    schema: str
    table: str
    id_column: str
    text_columns: list[str]
    metadata_columns: list[str] = field(default_factory=list)
    package: str | None = None
    predicate: str | None = None
    followed: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    def chunk_id(self, key: str) -> str:
        """The chunk a row's text is stored as: ``<prefix>/<key>`` (one chunk per row)."""
        return f"{self.prefix}/{key}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "table": self.name,
            "prefix": self.prefix,
            "id": self.id_column,
            "text": self.text_columns,
            "metadata": self.metadata_columns,
            "package": self.package,
            "where": self.predicate,
            "followed": self.followed,
        }

    def identifiers(self) -> dict[str, sql.Composable]:
        return {"schema": sql.Identifier(self.schema), "table": sql.Identifier(self.table)}


def source_from_row(row: Sequence[Any]) -> SyncSource:
    return SyncSource(
        int(row[0]), row[1], row[2], row[3], row[4], row[5], list(row[6]), list(row[7]), row[8], row[9], list(row[10])
    )


def trigger_name(source_id: int, kind: str) -> sql.Identifier:
    return sql.Identifier(f"ragstore_sync_{source_id}_{kind}")


def split_table(name: str) -> tuple[str, str]:
    """``SCHEMA.TABLE`` (or ``TABLE``, in ``public``) as (schema, table); a name with more dots must be
    written with the schema first and is split at the first dot."""
    schema, dot, table = name.partition(".")
    if not dot:
        schema, table = "public", name
    if not schema or not table:
        raise InvalidInput(f"--table {name!r}: write SCHEMA.TABLE")
    return schema, table


def check_predicate(predicate: str) -> str:
    text = predicate.strip()
    if not text:
        raise InvalidInput("--where is blank")
    if ";" in text or "--" in text or "/*" in text or "\x00" in text:
        raise InvalidInput(f"--where {predicate!r}: one SQL expression, without ';' or comments")
    return text


def _predicate_columns(conn: Conn, schema: str, table: str, oid: int, predicate: str) -> list[str]:
    """The table's columns ``predicate`` reads, found by the database (a temporary view of it); InvalidInput
    with the database's message when it is not an expression over the table."""
    view = f"ragstore_sync_check_{uuid.uuid4().hex[:12]}"
    statement = sql.SQL(query("sync", "predicate_view")).format(
        view=sql.Identifier(view),
        schema=sql.Identifier(schema),
        table=sql.Identifier(table),
        predicate=sql.SQL(predicate),
    )
    try:
        with conn.transaction():
            conn.execute(statement, prepare=True)  # a prepared statement is one statement, whatever the text
            rows = conn.execute(query("sync", "predicate_columns"), {"view": f"pg_temp.{view}", "oid": oid}).fetchall()
            conn.execute(sql.SQL("DROP VIEW pg_temp.{}").format(sql.Identifier(view)))
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidInput(f"--where {predicate!r}: {first}") from exc
    return sorted(str(r[0]) for r in rows)


def add_source(
    conn: Conn,
    family: str,
    table: str,
    *,
    id_column: str,
    text_columns: Sequence[str],
    metadata_columns: Sequence[str] = (),
    package: str | None = None,
    predicate: str | None = None,
    prefix: str | None = None,
) -> tuple[SyncSource, int]:
    """Follow ``table`` (``SCHEMA.TABLE``) into ``family``; returns the source and the rows queued (every
    row already in the table). Raises NotFound (family, table, column), InvalidInput, Conflict (already
    followed), PermissionDenied (the connected role is not the table's owner, nor a member of it)."""
    fam = get_family(conn, family)
    schema, name = split_table(table)
    if not text_columns:
        raise InvalidInput("sync add needs at least one --text column")
    with db_errors():
        if citus.on_citus(conn):
            raise Conflict("sync add: ragstore sync does not run on Citus yet (its triggers and queue are local)")
        found = conn.execute(query("sync", "table_of"), {"schema": schema, "table": name}).fetchone()
        if found is None or found[3] not in ("r", "p"):
            raise NotFound(f"sync add: no table {schema}.{name}")
        oid, owner, may_own = int(found[0]), str(found[1]), bool(found[2])
        if not may_own:
            raise PermissionDenied(
                f"sync add: installing triggers on {schema}.{name} needs its owner: connect as {owner} "
                f"(or a member of it); the current role is not"
            )
        types = dict(conn.execute(query("sync", "columns_of"), {"oid": oid}).fetchall())
    conn.commit()  # what follows is one transaction of its own
    for option, columns in (
        ("--id", [id_column]),
        ("--text", list(text_columns)),
        ("--metadata", list(metadata_columns)),
        ("--package", [package] if package else []),
    ):
        for column in columns:
            if column not in types:
                raise NotFound(f"sync add: {option} {column!r}: {schema}.{name} has no such column")
    where = check_predicate(predicate) if predicate is not None else None
    read = _predicate_columns(conn, schema, name, oid, where) if where is not None else []
    followed = list(
        dict.fromkeys([id_column, *text_columns, *metadata_columns, *([package] if package else []), *read])
    )
    chosen_prefix = prefix or name.replace("/", "_")
    params = {
        "family": fam.name,
        "prefix": chosen_prefix,
        "schema": schema,
        "table": name,
        "oid": oid,
        "id": id_column,
        "text": list(text_columns),
        "metadata": list(metadata_columns),
        "package": package,
        "predicate": where,
        "followed": followed,
    }
    ids = {"schema": sql.Identifier(schema), "table": sql.Identifier(name)}
    try:
        with db_errors(), conn.transaction():
            row = conn.execute(query("sync", "insert_source"), params).fetchone()
            assert row is not None
            source_id = int(row[0])
            changed = sql.SQL(" OR ").join(
                sql.SQL("OLD.{c} IS DISTINCT FROM NEW.{c}").format(c=sql.Identifier(c)) for c in followed
            )
            extra = {
                "source": sql.Literal(str(source_id)),
                "columns": sql.SQL(", ").join(sql.Identifier(c) for c in followed),
                "changed": changed,
            }
            for kind in TRIGGERS:
                text = sql.SQL(query("sync", f"trigger_{kind}"))
                conn.execute(text.format(trigger=trigger_name(source_id, kind), **ids, **extra))
            cur = conn.execute(sql.SQL(query("sync", "backfill")).format(**ids), {"source": source_id, "id": id_column})
            queued = cur.rowcount
    except RagstoreError as exc:
        if "sync_sources_family" in str(exc):
            raise Conflict(
                f"sync add: family {fam.name} already follows {schema}.{name} (or prefix {chosen_prefix})"
            ) from exc
        raise
    source = SyncSource(
        source_id, fam.name, chosen_prefix, schema, name, id_column, list(text_columns), list(metadata_columns),
        package, where, followed,
    )  # fmt: skip
    return source, queued


def list_sources(conn: Conn, families: Sequence[str] | None = None) -> list[SyncSource]:
    with db_errors():
        rows = conn.execute(query("sync", "sources"), {"families": list(families) if families else None}).fetchall()
    conn.commit()
    return [source_from_row(r) for r in rows]


def get_source(conn: Conn, family: str, table: str) -> SyncSource:
    schema, name = split_table(table)
    with db_errors():
        row = conn.execute(query("sync", "source_of"), {"family": family, "schema": schema, "table": name}).fetchone()
    if row is None:
        raise NotFound(f"family {family} does not follow {schema}.{name} (see `ragstore sync list`)")
    return source_from_row(row)


def drop_triggers(conn: Conn, source: SyncSource) -> None:
    """Drop the source's triggers (in the caller's transaction); a table already gone has none."""
    exists = conn.execute(query("sync", "table_of"), {"schema": source.schema, "table": source.table}).fetchone()
    if exists is None:
        return
    for kind in TRIGGERS:
        conn.execute(
            sql.SQL(query("sync", "drop_trigger")).format(trigger=trigger_name(source.id, kind), **source.identifiers())
        )


def remove_source(conn: Conn, family: str, table: str, *, delete_chunks: bool = False) -> tuple[SyncSource, int]:
    """Stop following ``table``: its triggers, queue and bookkeeping go; the family's chunks stay unless
    ``delete_chunks`` (then those the source wrote go too, in the same transaction). Returns the source and
    the chunks deleted."""
    from ragstore.families import deleting

    source = get_source(conn, family, table)
    conn.commit()
    deleted = 0
    with deleting(conn, source.family):
        if delete_chunks:
            keys = [str(r[0]) for r in conn.execute(query("sync", "all_synced_keys"), {"source": source.id})]
            if keys:
                row = conn.execute(
                    query("chunks", "delete_ids"), {"family": source.family, "ids": [source.chunk_id(k) for k in keys]}
                ).fetchone()
                assert row is not None
                deleted = sum(int(n) for n in dict(row[0] or {}).values())
        drop_triggers(conn, source)
        conn.execute(query("sync", "delete_source"), {"source": source.id})
    return source, deleted


def drop_family_sources(conn: Conn, family: str) -> None:
    """In ``family drop``'s transaction: the triggers of every table the family follows (its sources and
    queue go with the family, ON DELETE CASCADE)."""
    for source in [s for s in _sources_in_tx(conn, family)]:
        drop_triggers(conn, source)


def _sources_in_tx(conn: Conn, family: str) -> list[SyncSource]:
    rows = conn.execute(query("sync", "sources"), {"families": [family]}).fetchall()
    return [source_from_row(r) for r in rows]


def status(conn: Conn) -> list[dict[str, Any]]:
    """The view ``ragstore.sync_status``, one dict per followed table."""
    names = (
        "family", "schema", "table", "prefix", "queued", "backing_off", "lag_seconds", "synced_keys",
        "synced_rows", "rows_per_second", "last_error", "last_error_at",
    )  # fmt: skip
    with db_errors():
        rows = conn.execute(query("sync", "status")).fetchall()
    conn.commit()
    return [dict(zip(names, row, strict=True)) for row in rows]
