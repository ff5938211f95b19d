"""``ragstore sync run``: claim queued keys, read their rows, write them as ``ragstore index`` does.

A batch of one source: its due keys are leased (``claim`` in ragstore/sql/sync.sql: ``FOR UPDATE SKIP
LOCKED``, committed at once, so the writers of the followed table never wait for a worker), the rows
still there are read and written through :func:`ragstore.ingest.run.index_records` (the one pass and
writer of ``ragstore index``: change detection, the embedding cache, batches committed whole), the chunks
of rows deleted (or gone out of the predicate, or blank) are deleted, and the keys leave the queue unless
they changed again meanwhile. A worker killed mid-batch leaves its keys leased: they are due again when
the lease ends, and the rewrite of a chunk already written is a no-op (same bytes). A failing batch
(the provider refusing, a row that is not valid) backs off its own keys only.
"""

from __future__ import annotations

import json
import select
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from ragstore.db.connection import db_errors
from ragstore.db.sqlfiles import query
from ragstore.embed.base import Backend
from ragstore.errors import NotFound, RagstoreError
from ragstore.sync.sources import SyncSource, list_sources

Conn = psycopg.Connection[Any]
BATCH = 1000
LEASE_SECONDS = 300.0
BACKOFF_SECONDS = 1.0
BACKOFF_MOST = 300.0


@dataclass
class RunReport:
    """What a run did: rows written (or found unchanged), rows whose chunks were deleted, failed batches."""

    written: int = 0
    deleted: int = 0
    embedded: int = 0
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"written": self.written, "deleted": self.deleted, "embedded": self.embedded, "failures": self.failures}

    def summary(self) -> str:
        text = f"synced {self.written} rows, deleted the chunks of {self.deleted}, embedded {self.embedded}"
        return text + (f"; {len(self.failures)} batches failed (see `ragstore sync status`)" if self.failures else "")


BackendFor = Callable[[SyncSource], Backend | None]


def _text(row: dict[str, Any], columns: Sequence[str]) -> str:
    parts = [row.get(c) for c in columns]
    return "\n\n".join(p if isinstance(p, str) else json.dumps(p, ensure_ascii=False) for p in parts if p is not None)


def _records(source: SyncSource, rows: Sequence[tuple[str, dict[str, Any]]]) -> tuple[list[dict[str, Any]], list[str]]:
    records: list[dict[str, Any]] = []
    blank: list[str] = []
    for key, row in rows:
        text = _text(row, source.text_columns)
        if not text.strip():
            blank.append(key)
            continue
        package = row.get(source.package) if source.package else None
        records.append(
            {
                "chunk_id": source.chunk_id(key),
                "package_path": str(package) if package not in (None, "") else source.chunk_id(key),
                "text": text,
                "metadata": {c: row.get(c) for c in source.metadata_columns},
            }
        )
    return records, blank


def _id_type(conn: Conn, source: SyncSource) -> str:
    row = conn.execute(
        "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute AS a"
        " WHERE a.attrelid = %s::regclass AND a.attname = %s AND NOT a.attisdropped",
        (sql.Identifier(source.schema, source.table).as_string(conn), source.id_column),
    ).fetchone()
    if row is None:
        raise NotFound(f"sync: {source.name} has no column {source.id_column!r} any more (`ragstore sync remove` it)")
    return str(row[0])


def _read_rows(conn: Conn, source: SyncSource, keys: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    predicate = sql.SQL((source.predicate or "true").replace("%", "%%"))
    statement = sql.SQL(query("sync", "read_rows")).format(
        schema=sql.Identifier(source.schema),
        table=sql.Identifier(source.table),
        id=sql.Identifier(source.id_column),
        id_type=sql.SQL(_id_type(conn, source)),  # the catalog's own spelling of the type (format_type)
        predicate=predicate,
    )
    rows = conn.execute(statement, {"id_name": source.id_column, "keys": list(keys)}).fetchall()
    return [(str(r[0]), dict(r[1])) for r in rows]


def sync_batch(
    conn: Conn, source: SyncSource, report: RunReport, *, batch: int = BATCH, backend: Backend | None = None
) -> int:
    """Sync one batch of ``source``'s due keys; returns how many keys were claimed (0: nothing due)."""
    from ragstore.ingest.run import index_records

    conn.commit()  # each step below is a transaction of its own
    with db_errors(), conn.transaction():
        claimed = conn.execute(
            query("sync", "claim"), {"source": source.id, "limit": batch, "lease": LEASE_SECONDS}
        ).fetchall()
    if not claimed:
        return 0
    keys = [str(r[0]) for r in claimed]
    seqs = [int(r[1]) for r in claimed]
    started = time.perf_counter()
    try:
        with db_errors(), conn.transaction():
            rows = _read_rows(conn, source, keys)
        records, blank = _records(source, rows)
        present = {key for key, _ in rows} - set(blank)
        embedded = 0
        if records:
            written = index_records(conn, source.family, records, backend=backend)
            embedded = written.embedded
        gone = [k for k in keys if k not in present]
        from ragstore.families import deleting

        with deleting(conn, source.family):
            if gone:
                known = [
                    str(r[0]) for r in conn.execute(query("sync", "synced_keys"), {"source": source.id, "keys": gone})
                ]
                if known:
                    conn.execute(
                        query("chunks", "delete_ids"),
                        {"family": source.family, "ids": [source.chunk_id(k) for k in known]},
                    )
                    conn.execute(query("sync", "rows_gone"), {"source": source.id, "keys": known})
            conn.execute(query("sync", "rows_written"), {"source": source.id, "keys": sorted(present)})
            conn.execute(query("sync", "finish"), {"source": source.id, "keys": keys, "seqs": seqs})
            conn.execute(
                query("sync", "counted"),
                {"source": source.id, "rows": len(keys), "seconds": time.perf_counter() - started},
            )
    except RagstoreError as exc:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.rollback()
        message = f"{source.name}: {exc}".splitlines()[0][:1000]
        with db_errors(), conn.transaction():
            conn.execute(
                query("sync", "failed"),
                {"source": source.id, "keys": keys, "error": message, "base": BACKOFF_SECONDS, "most": BACKOFF_MOST},
            )
            conn.execute(query("sync", "source_failed"), {"source": source.id, "error": message})
        report.failures.append(message)
        return len(keys)
    report.written += len(present)
    report.deleted += len(gone)
    report.embedded += embedded
    return len(keys)


def run_once(
    conn: Conn, families: Sequence[str] | None = None, *, batch: int = BATCH, backend: BackendFor | None = None
) -> RunReport:
    """Sync every due key of the sources of ``families`` (all by default) until none is due; a source whose
    batch failed is left to its backoff, the others go on. ``backend(source)`` chooses a backend (tests);
    by default each family's own."""
    sources = list_sources(conn, families)
    if families:
        missing = sorted(set(families) - {s.family for s in sources})
        if missing:
            raise NotFound(f"sync run: {', '.join(missing)} follows no table (see `ragstore sync list`)")
    report = RunReport()
    active = list(sources)
    while active:
        still = []
        for source in active:
            failures = len(report.failures)
            chosen = backend(source) if backend is not None else None
            if sync_batch(conn, source, report, batch=batch, backend=chosen) and len(report.failures) == failures:
                still.append(source)
        active = still
    return report


def follow(
    conn: Conn,
    listener: Conn,
    families: Sequence[str] | None = None,
    *,
    batch: int = BATCH,
    idle_seconds: float = 5.0,
    stop: Callable[[], bool] = lambda: False,
    on_report: Callable[[RunReport], None] | None = None,
) -> None:
    """``sync run --follow``: sync what is due, then sleep until a trigger's NOTIFY on one of the families'
    channels (``ragstore_sync_<family>``) or ``idle_seconds`` (keys in backoff come due without a NOTIFY);
    until ``stop()``. ``listener`` is an autocommit connection of its own."""
    names = sorted({s.family for s in list_sources(conn, families)})
    for name in names:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(f"ragstore_sync_{name}")))
    while not stop():
        report = run_once(conn, names or None)
        if on_report is not None and (report.written or report.deleted or report.failures):
            on_report(report)
        # Wait on the socket, then drain every notification that came: one run serves them all.
        select.select([listener.fileno()], [], [], idle_seconds)
        for _ in listener.notifies(timeout=0):
            pass
