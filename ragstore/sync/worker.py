"""``ragstore sync run``: claim queued keys, read their rows, write them as ``ragstore index`` does.

A batch of one source: its due keys are leased (``claim`` in ragstore/sql/sync.sql: ``FOR UPDATE SKIP
LOCKED``, committed at once, so the writers of the followed table never wait for a worker), the rows
still there are read and written through :func:`ragstore.ingest.run.index_records` (the one pass and
writer of ``ragstore index``: change detection, the embedding cache, batches committed whole), the chunks
of rows deleted (or gone out of the predicate, or blank) are deleted, and the keys leave the queue unless
they changed again meanwhile. A worker killed mid-batch leaves its keys leased: they are due again when
the lease ends, and the rewrite of a chunk already written is a no-op (same bytes). A failing batch
(the provider refusing, a row that is not valid) backs off its own keys only. A row's text longer than the
family's chunk window makes several chunks (:meth:`Reader.records`); the first batch of a backfill into an
empty family is one bulk load (:meth:`Reader.batch_size`, its lease renewed by :class:`Renewal`).
"""

from __future__ import annotations

import json
import select
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from ragstore.db.connection import db_errors
from ragstore.db.sqlfiles import query
from ragstore.embed.base import Backend
from ragstore.errors import InvalidInput, NotFound, RagstoreError
from ragstore.ingest.chunker import Window, chunk_document, window_for
from ragstore.ingest.document import Document, Section
from ragstore.sync.expressions import package_sql, predicate_sql
from ragstore.sync.sources import SyncSource, list_sources

Conn = psycopg.Connection[Any]
BATCH = 1000
LEASE_SECONDS = 300.0
BACKOFF_SECONDS = 1.0
BACKOFF_MOST = 300.0
#: The most keys of one bulk backfill batch (see :meth:`Reader.batch_size`).
BULK_MOST = 50_000


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


@dataclass
class Reader:
    """How one run reads a source's rows: the statement (the id's type, the package and predicate SQL
    resolved once), the family's backend and its chunk window."""

    source: SyncSource
    statement: sql.Composed
    backend: Backend
    window: Window
    family_table: sql.Composable
    first: bool = True

    @classmethod
    def of(cls, conn: Conn, source: SyncSource, backend: Backend | None) -> Reader:
        from ragstore.caches import caches_for
        from ragstore.families import backend_for, get_family

        with db_errors():
            columns = dict(
                conn.execute(query("sync", "columns_of_table"), {"schema": source.schema, "table": source.table})
            )
            family = get_family(conn, source.family)
        conn.commit()
        if source.id_column not in columns:
            raise NotFound(
                f"sync: {source.name} has no column {source.id_column!r} any more (`ragstore sync remove` it)"
            )
        chosen = backend or backend_for(family, caches_for(conn))
        statement = sql.SQL(query("sync", "read_rows")).format(
            schema=sql.Identifier(source.schema),
            table=sql.Identifier(source.table),
            id=sql.Identifier(source.id_column),
            id_type=sql.SQL(columns[source.id_column]),  # the catalog's own spelling of the type (format_type)
            package=package_sql(source.package, set(columns)),
            predicate=predicate_sql(source.predicate),
        )
        return cls(source, statement, chosen, window_for(chosen), family.identifiers()["table"])

    def batch_size(self, conn: Conn, batch: int) -> int:
        """``batch``, or for the first batch of a backfill into an empty family (at least
        :data:`~ragstore.ingest.writer.BULK_THRESHOLD` keys due) every due key up to :data:`BULK_MOST`: the
        writer then loads them as ``ragstore index`` loads a first run, building the HNSW index once at the
        end instead of inserting into it row by row."""
        if not self.first:
            return batch
        self.first = False
        from ragstore.ingest.writer import BULK_THRESHOLD

        with db_errors(), conn.transaction():
            row = conn.execute(
                sql.SQL(query("sync", "bulk_due")).format(table=self.family_table),
                {"source": self.source.id, "most": BULK_MOST},
            ).fetchone()
        due = int(row[0]) if row else 0
        return max(batch, due) if due >= BULK_THRESHOLD else batch

    def read(self, conn: Conn, keys: Sequence[str]) -> list[tuple[str, dict[str, Any], str | None]]:
        rows = conn.execute(self.statement, {"id_name": self.source.id_column, "keys": list(keys)}).fetchall()
        return [(str(r[0]), dict(r[1]), r[2]) for r in rows]

    def records(self, rows: Sequence[tuple[str, dict[str, Any], str | None]]) -> dict[str, list[dict[str, Any]]]:
        """Each row's chunk records, by key (a row whose text is blank has none): its text chunked as a
        document's section is (:func:`chunk_document`, the family's window), one record per chunk."""
        source = self.source
        out: dict[str, list[dict[str, Any]]] = {}
        for key, row, package in rows:
            text = _text(row, source.text_columns)
            if not text.strip():
                continue
            # A text that fits the window is one chunk, as it is (what `ragstore index` of its record stores).
            chunks = [text] if self.window.count([text])[0] <= self.window.limit else _chunks(text, self.window)
            ids = source.chunk_ids(key, len(chunks))
            metadata = {c: row.get(c) for c in source.metadata_columns}
            out[key] = [
                {
                    "chunk_id": chunk_id,
                    "package_path": package if package not in (None, "") else source.chunk_id(key),
                    "text": chunk,
                    "metadata": metadata,
                }
                for chunk_id, chunk in zip(ids, chunks, strict=True)
            ]
        return out


class Renewal:
    """A big batch's lease, renewed every ``LEASE_SECONDS / 5`` by a thread on a second connection until
    :meth:`stop`: a bulk backfill may take longer than one lease, yet no other worker may take its keys
    meanwhile. A worker killed stops renewing, so its keys are due one lease after its last renewal."""

    def __init__(self, conn: Conn, source: int, keys: Sequence[str], seqs: Sequence[int]) -> None:
        from ragstore.db.connection import second_connection

        self._opened = second_connection(conn)
        self._other = self._opened.__enter__()
        self._params = {"source": source, "keys": list(keys), "seqs": list(seqs), "lease": LEASE_SECONDS}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ragstore-sync-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._other is not None and not self._stopping.wait(LEASE_SECONDS / 5):
            try:
                self._other.execute(query("sync", "renew"), self._params)
                self._other.commit()
            except psycopg.Error:
                return  # the lease then ends as an unrenewed one does; the batch goes on

    def stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._thread.join()
        self._opened.__exit__(None, None, None)


def _chunks(text: str, window: Window) -> list[str]:
    return [c.text for c in chunk_document(Document((Section(text),)), window)] or [text]


def sync_batch(conn: Conn, reader: Reader, report: RunReport, *, batch: int = BATCH) -> int:
    """Sync one batch of the source's due keys; returns how many keys were claimed (0: nothing due)."""
    from ragstore.families import deleting
    from ragstore.ingest.run import index_records

    source = reader.source
    conn.commit()  # each step below is a transaction of its own
    limit = reader.batch_size(conn, batch)
    with db_errors(), conn.transaction():
        claimed = conn.execute(
            query("sync", "claim"), {"source": source.id, "limit": limit, "lease": LEASE_SECONDS}
        ).fetchall()
    if not claimed:
        return 0
    keys = [str(r[0]) for r in claimed]
    seqs = [int(r[1]) for r in claimed]
    started = time.perf_counter()
    records: dict[str, list[dict[str, Any]]] = {}
    bounds: dict[str, int] = {}
    renewal = Renewal(conn, source.id, keys, seqs) if len(keys) > BATCH else None
    try:
        with db_errors(), conn.transaction():
            records = reader.records(reader.read(conn, keys))
            bounds = {
                str(k): int(n)
                for k, n in conn.execute(query("sync", "synced_keys"), {"source": source.id, "keys": keys})
            }
            if records:
                conn.execute(
                    query("sync", "rows_writing"),
                    {"source": source.id, "keys": list(records), "chunks": [len(r) for r in records.values()]},
                )
        embedded = 0
        if records:
            written = index_records(
                conn, source.family, [r for rs in records.values() for r in rs], backend=reader.backend
            )
            embedded = written.embedded
        if renewal is not None:
            renewal.stop()
        stale: list[str] = []
        for key in keys:
            kept = {r["chunk_id"] for r in records.get(key, ())}
            bound = max(bounds.get(key, 0), len(records.get(key, ())))
            stale += [i for i in source.bound_ids(key, bound) if i not in kept] if bound else []
        gone = [k for k in keys if k not in records and k in bounds]
        with deleting(conn, source.family):
            if stale:
                conn.execute(query("chunks", "delete_ids"), {"family": source.family, "ids": stale})
            if gone:
                conn.execute(query("sync", "rows_gone"), {"source": source.id, "keys": gone})
            if records:
                conn.execute(
                    query("sync", "rows_written"),
                    {"source": source.id, "keys": list(records), "chunks": [len(r) for r in records.values()]},
                )
            conn.execute(query("sync", "finish"), {"source": source.id, "keys": keys, "seqs": seqs})
            conn.execute(
                query("sync", "counted"),
                {"source": source.id, "rows": len(keys), "seconds": time.perf_counter() - started},
            )
    except RagstoreError as exc:
        if renewal is not None:
            renewal.stop()
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.rollback()
        message = f"{source.name}: {exc}".splitlines()[0][:1000]
        fresh = [k for k in records if k not in bounds]  # recorded for this batch, maybe never written
        ids = [(i, k) for k in fresh for i in source.bound_ids(k, len(records[k]))]
        with db_errors(), conn.transaction():
            if fresh:
                conn.execute(
                    query("sync", "rows_unwritten"),
                    {
                        "source": source.id,
                        "family": source.family,
                        "keys": fresh,
                        "ids": [i for i, _ in ids],
                        "owners": [k for _, k in ids],
                    },
                )
            conn.execute(
                query("sync", "failed"),
                {"source": source.id, "keys": keys, "error": message, "base": BACKOFF_SECONDS, "most": BACKOFF_MOST},
            )
            conn.execute(query("sync", "source_failed"), {"source": source.id, "error": message})
        report.failures.append(message)
        return len(keys)
    report.written += len(records)
    report.deleted += len([k for k in keys if k not in records and k in bounds])
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
    readers: dict[tuple[str, int], Reader] = {}
    done: set[int] = set()
    while True:
        # The sources are read again every round: a `sync alter` meanwhile is followed from the next batch
        # (the keys it queued have new seqs, so a batch written under the old settings is redone).
        active = [s for s in list_sources(conn, families) if s.id not in done]
        if not active:
            return report
        for source in active:
            failures = len(report.failures)
            chosen = backend(source) if backend is not None else None
            settings = (json.dumps([source.id, source.as_dict()]), id(chosen))
            reader = readers.get(settings)
            if reader is None:
                reader = readers[settings] = Reader.of(conn, source, chosen)
            if not sync_batch(conn, reader, report, batch=batch) or len(report.failures) != failures:
                done.add(source.id)


def merge(reports: Sequence[RunReport]) -> RunReport:
    """One report of several workers' reports."""
    out = RunReport()
    for r in reports:
        out.written += r.written
        out.deleted += r.deleted
        out.embedded += r.embedded
        out.failures.extend(r.failures)
    return out


def run_workers(
    dsn: str | None,
    families: Sequence[str] | None = None,
    *,
    batch: int = BATCH,
    workers: int = 1,
    backend: BackendFor | None = None,
) -> RunReport:
    """``sync run --once --workers N``: ``workers`` threads, each on a connection of its own, run
    :func:`run_once` together; the claims' SKIP LOCKED leases split the keys between them, so no key is
    synced (nor embedded) by two. Returns their reports merged; the first worker's error is raised after
    every worker stopped."""
    from ragstore.db.connection import connect, resolve_dsn

    if workers < 1:
        raise InvalidInput(f"--workers must be at least 1, got {workers}")
    dsn = resolve_dsn(dsn)
    reports: list[RunReport] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work() -> None:
        try:
            with connect(dsn) as conn:
                got = run_once(conn, families, batch=batch, backend=backend)
            with lock:
                reports.append(got)
        except BaseException as exc:  # raised below, in the caller's thread
            with lock:
                errors.append(exc)

    if workers == 1:
        work()
    else:
        threads = [threading.Thread(target=work, name=f"ragstore-sync-{i}") for i in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return merge(reports)


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
        try:
            report = run_once(conn, names or None)
        except NotFound:
            return  # the families no longer follow any table (removed, or dropped): nothing left to follow
        if on_report is not None and (report.written or report.deleted or report.failures):
            on_report(report)
        # Wait on the socket, then drain every notification that came: one run serves them all.
        select.select([listener.fileno()], [], [], idle_seconds)
        for _ in listener.notifies(timeout=0):
            pass


def follow_workers(
    dsn: str | None,
    families: Sequence[str] | None = None,
    *,
    batch: int = BATCH,
    workers: int = 1,
    idle_seconds: float = 5.0,
    stop: Callable[[], bool] = lambda: False,
    on_report: Callable[[RunReport], None] | None = None,
) -> None:
    """``sync run --follow --workers N``: per followed family, ``workers`` threads each running
    :func:`follow` for that family alone on connections of its own, until ``stop()``. A family's provider
    that is slow, refuses or rate-limits so holds up only that family's threads: the other families are
    synced by theirs meanwhile. The workers of one family are woken by the same NOTIFY and the leases
    split its keys. The first error of any thread stops them all and is raised."""
    from ragstore.db.connection import connect, resolve_dsn

    if workers < 1:
        raise InvalidInput(f"--workers must be at least 1, got {workers}")
    dsn = resolve_dsn(dsn)
    with connect(dsn) as conn:
        names = sorted({s.family for s in list_sources(conn, families)})
    if families:
        missing = sorted(set(families) - set(names))
        if missing:
            raise NotFound(f"sync run: {', '.join(missing)} follows no table (see `ragstore sync list`)")
    errors: list[BaseException] = []
    lock = threading.Lock()

    def stopping() -> bool:
        return bool(errors) or stop()

    def reported(report: RunReport) -> None:
        if on_report is not None:
            with lock:
                on_report(report)

    def work(family: str) -> None:
        try:
            with connect(dsn) as conn, connect(dsn, autocommit=True) as listener:
                follow(
                    conn, listener, [family], batch=batch, idle_seconds=idle_seconds, stop=stopping, on_report=reported
                )
        except BaseException as exc:  # raised below, in the caller's thread
            with lock:
                errors.append(exc)

    threads = [
        threading.Thread(target=work, args=(name,), name=f"ragstore-sync-{name}-{i}", daemon=True)
        for name in names
        for i in range(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.5)
    if errors:
        raise errors[0]
