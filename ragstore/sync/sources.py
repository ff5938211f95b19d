"""The tables a family follows: ``ragstore sync add | list | remove`` (docs/guide/sync.md).

``add`` registers the table in ``ragstore.sync_sources``, installs its four triggers (insert, update of the
followed columns when one of them changed, delete, truncate; all calling ``ragstore.sync_enqueue``) and
queues every row already there, in one transaction. Every name of the source table goes into SQL as a
:class:`psycopg.sql.Identifier`; the ``--where`` predicate is the one SQL text taken from the user (the
table's owner), refused unless it is one expression over the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from ragstore.db import sync_triggers
from ragstore.db.connection import db_errors
from ragstore.db.dialect import dialect_of
from ragstore.db.sqlfiles import query
from ragstore.db.sync_triggers import trigger_name
from ragstore.errors import Conflict, InvalidInput, NotFound, PermissionDenied, RagstoreError
from ragstore.families import get_family
from ragstore.sync.expressions import check_expression, expression_columns, predicate_sql

Conn = psycopg.Connection[Any]


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
        """The chunk a row's text is stored as when it makes one chunk: ``<prefix>/<key>``."""
        return f"{self.prefix}/{key}"

    def chunk_ids(self, key: str, count: int) -> list[str]:
        """The ids of a row's ``count`` chunks: ``<prefix>/<key>`` for one, ``<prefix>/<key>#0`` ... for more."""
        if count <= 1:
            return [self.chunk_id(key)] if count == 1 else []
        return [f"{self.chunk_id(key)}#{n}" for n in range(count)]

    def bound_ids(self, key: str, bound: int) -> list[str]:
        """Every id a row with at most ``bound`` chunks may have written (what deleting it deletes)."""
        return [self.chunk_id(key)] + (self.chunk_ids(key, bound) if bound > 1 else [])

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


def split_table(name: str) -> tuple[str, str]:
    """``SCHEMA.TABLE`` (or ``TABLE``, in ``public``) as (schema, table); a name with more dots must be
    written with the schema first and is split at the first dot."""
    schema, dot, table = name.partition(".")
    if not dot:
        schema, table = "public", name
    if not schema or not table:
        raise InvalidInput(f"--table {name!r}: write SCHEMA.TABLE")
    return schema, table


def _refuse_distributed(conn: Conn, oid: int, schema: str, name: str) -> None:
    """Conflict when the table is a Citus distributed or reference table: its triggers would fire on the
    worker nodes' shards, where ragstore's queue is not. A local table of the coordinator is followed."""
    with db_errors():
        distributed = dialect_of(conn).lays_out and conn.execute(query("sync", "citus_table"), {"oid": oid}).fetchone()
    conn.commit()
    if distributed:
        raise Conflict(
            f"sync add: {schema}.{name} is a Citus distributed (or reference) table, which ragstore sync does not "
            "follow (its triggers would fire on the worker nodes); follow a local table of the coordinator"
        )


def _table(conn: Conn, schema: str, name: str, command: str) -> tuple[int, dict[str, str]]:
    """The table's oid and column types; NotFound when there is no such table, PermissionDenied (one line,
    naming the owner) when the current role may not act as its owner (what CREATE TRIGGER needs)."""
    with db_errors():
        found = conn.execute(query("sync", "table_of"), {"schema": schema, "table": name}).fetchone()
        if found is None or found[3] not in ("r", "p"):
            raise NotFound(f"{command}: no table {schema}.{name}")
        oid, owner, may_own = int(found[0]), str(found[1]), bool(found[2])
        if not may_own:
            raise PermissionDenied(
                f"{command}: installing triggers on {schema}.{name} needs its owner: connect as {owner} "
                f"(or a member of it); the current role is not"
            )
        types = dict(conn.execute(query("sync", "columns_of"), {"oid": oid}).fetchall())
    conn.commit()  # what follows is one transaction of its own
    return oid, types


@dataclass(frozen=True)
class Following:
    """What a source follows, checked against its table: the columns, package and predicate, and every
    column whose change queues a row."""

    text_columns: list[str]
    metadata_columns: list[str]
    package: str | None
    predicate: str | None
    followed: list[str]


def _following(
    conn: Conn,
    command: str,
    schema: str,
    name: str,
    oid: int,
    types: dict[str, str],
    id_column: str,
    text_columns: Sequence[str],
    metadata_columns: Sequence[str],
    package: str | None,
    predicate: str | None,
) -> Following:
    if not text_columns:
        raise InvalidInput(f"{command} needs at least one --text column")
    for option, columns in (("--id", [id_column]), ("--text", list(text_columns)), ("--metadata", metadata_columns)):
        for column in columns:
            if column not in types:
                raise NotFound(f"{command}: {option} {column!r}: {schema}.{name} has no such column")
    read: list[str] = []
    if package is not None and package not in types:
        package = check_expression(package, "--package")
        read += expression_columns(conn, schema, name, oid, package, option="--package", kind="value")
    where = check_expression(predicate, "--where") if predicate is not None else None
    if where is not None:
        read += expression_columns(conn, schema, name, oid, where, option="--where", kind="where")
    package_columns = [package] if package is not None and package in types else []
    followed = list(dict.fromkeys([id_column, *text_columns, *metadata_columns, *package_columns, *read]))
    return Following(list(text_columns), list(metadata_columns), package, where, followed)


def _install_update_trigger(conn: Conn, source_id: int, followed: Sequence[str], ids: dict[str, Any]) -> None:
    changed = sql.SQL(" OR ").join(
        sql.SQL("OLD.{c} IS DISTINCT FROM NEW.{c}").format(c=sql.Identifier(c)) for c in followed
    )
    text = sql.SQL(query("sync", "trigger_update"))
    conn.execute(
        text.format(
            trigger=trigger_name(source_id, "update"),
            source=sql.Literal(str(source_id)),
            columns=sql.SQL(", ").join(sql.Identifier(c) for c in followed),
            changed=changed,
            **ids,
        )
    )


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
    oid, types = _table(conn, schema, name, "sync add")
    _refuse_distributed(conn, oid, schema, name)
    want = _following(
        conn, "sync add", schema, name, oid, types, id_column, text_columns, metadata_columns, package, predicate
    )
    chosen_prefix = prefix or name.replace("/", "_")
    params = {
        "family": fam.name,
        "prefix": chosen_prefix,
        "schema": schema,
        "table": name,
        "oid": oid,
        "id": id_column,
        "text": want.text_columns,
        "metadata": want.metadata_columns,
        "package": want.package,
        "predicate": want.predicate,
        "followed": want.followed,
    }
    ids = {"schema": sql.Identifier(schema), "table": sql.Identifier(name)}
    try:
        with db_errors(), conn.transaction():
            row = conn.execute(query("sync", "insert_source"), params).fetchone()
            assert row is not None
            source_id = int(row[0])
            for kind in ("insert", "delete", "truncate"):
                text = sql.SQL(query("sync", f"trigger_{kind}"))
                conn.execute(
                    text.format(trigger=trigger_name(source_id, kind), source=sql.Literal(str(source_id)), **ids)
                )
            _install_update_trigger(conn, source_id, want.followed, ids)
            cur = conn.execute(sql.SQL(query("sync", "backfill")).format(**ids), {"source": source_id, "id": id_column})
            queued = cur.rowcount
    except RagstoreError as exc:
        if "sync_sources_family" in str(exc):
            raise Conflict(
                f"sync add: family {fam.name} already follows {schema}.{name} (or prefix {chosen_prefix})"
            ) from exc
        raise
    source = SyncSource(
        source_id, fam.name, chosen_prefix, schema, name, id_column, want.text_columns, want.metadata_columns,
        want.package, want.predicate, want.followed,
    )  # fmt: skip
    return source, queued


class Keep:
    """The default of an :func:`alter_source` option: leave it as it is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = Keep()


def alter_source(
    conn: Conn,
    family: str,
    table: str,
    *,
    text_columns: Sequence[str] | Keep = KEEP,
    metadata_columns: Sequence[str] | Keep = KEEP,
    package: str | Keep | None = KEEP,
    predicate: str | Keep | None = KEEP,
) -> tuple[SyncSource, int]:
    """Change what ``family`` follows of ``table`` in place (``sync alter``): the text and metadata columns,
    the package (a column or an expression; None: ``<prefix>/<id>``) and the predicate (None: every row),
    each left as it is when not given. In one transaction: the source is updated, its update trigger
    re-made for the new followed columns, and only the rows the change concerns queued: every row for new
    text columns, the rows with chunks for new metadata or package (their text is unchanged, so the writer
    embeds nothing), the rows the two predicates disagree on for a new predicate. Returns the source and
    the keys queued. Raises what :func:`add_source` raises."""
    current = get_source(conn, family, table)
    conn.commit()
    oid, types = _table(conn, current.schema, current.table, "sync alter")
    texts = current.text_columns if isinstance(text_columns, Keep) else list(text_columns)
    metadata = current.metadata_columns if isinstance(metadata_columns, Keep) else list(metadata_columns)
    chosen_package = current.package if isinstance(package, Keep) else package
    chosen_predicate = current.predicate if isinstance(predicate, Keep) else predicate
    want = _following(
        conn, "sync alter", current.schema, current.table, oid, types, current.id_column, texts, metadata,
        chosen_package, chosen_predicate,
    )  # fmt: skip
    ids = current.identifiers()
    queued = 0
    with db_errors(), conn.transaction():
        conn.execute(query("sync", "lock_source"), {"source": current.id})
        conn.execute(
            query("sync", "update_source"),
            {
                "source": current.id,
                "text": want.text_columns,
                "metadata": want.metadata_columns,
                "package": want.package,
                "predicate": want.predicate,
                "followed": want.followed,
            },
        )
        if want.followed != current.followed:
            conn.execute(
                sql.SQL(query("sync", "drop_trigger")).format(trigger=trigger_name(current.id, "update"), **ids)
            )
            _install_update_trigger(conn, current.id, want.followed, ids)
        params = {"source": current.id, "id": current.id_column}
        if want.text_columns != current.text_columns:
            queued = conn.execute(sql.SQL(query("sync", "requeue_all")).format(**ids), params).rowcount
        else:
            if want.predicate != current.predicate:
                statement = sql.SQL(query("sync", "requeue_where_changed")).format(
                    old=predicate_sql(current.predicate), new=predicate_sql(want.predicate), **ids
                )
                queued += conn.execute(statement, params).rowcount
            if (want.metadata_columns, want.package) != (current.metadata_columns, current.package):
                queued = conn.execute(query("sync", "requeue_synced"), params).rowcount + queued
        if queued:
            conn.execute(sql.SQL("SELECT pg_notify({}, '')").format(sql.Literal(f"ragstore_sync_{current.family}")))
    altered = SyncSource(
        current.id, current.family, current.prefix, current.schema, current.table, current.id_column,
        want.text_columns, want.metadata_columns, want.package, want.predicate, want.followed,
    )  # fmt: skip
    return altered, queued


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
    sync_triggers.drop_triggers(conn, source.id, source.schema, source.table)


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
            rows = conn.execute(query("sync", "all_synced_keys"), {"source": source.id}).fetchall()
            if rows:
                ids = [i for key, bound in rows for i in source.bound_ids(str(key), int(bound))]
                row = conn.execute(query("chunks", "delete_ids"), {"family": source.family, "ids": ids}).fetchone()
                assert row is not None
                deleted = sum(int(n) for n in dict(row[0] or {}).values())
        drop_triggers(conn, source)
        conn.execute(query("sync", "delete_source"), {"source": source.id})
    return source, deleted


def show_source(conn: Conn, family: str, table: str) -> dict[str, Any]:
    """What ``family`` follows of ``table`` (:meth:`SyncSource.as_dict`) with its row of the status view
    under ``status`` (``ragstore sync show``); NotFound when it follows no such table."""
    source = get_source(conn, family, table)
    conn.commit()
    state = [s for s in status(conn) if (s["family"], s["schema"], s["table"]) == (family, source.schema, source.table)]
    return source.as_dict() | {"status": state[0] if state else None}


def status(conn: Conn) -> list[dict[str, Any]]:
    """The view ``ragstore.sync_status``, one dict per followed table."""
    names = (
        "family", "schema", "table", "prefix", "queued", "backing_off", "lag_seconds", "synced_keys",
        "synced_rows", "rows_per_second", "last_error", "last_error_at", "leased",
    )  # fmt: skip
    with db_errors():
        rows = conn.execute(query("sync", "status")).fetchall()
    conn.commit()
    return [dict(zip(names, row, strict=True)) for row in rows]
