"""Precomputed vectors written while the pass still reads: one transaction, committed whole.

A run into an ``external`` family (every record brings its vector) would otherwise leave the server idle
while the pass reads and validates, then the client idle while the server writes. Here a writer thread
writes each batch the pass keeps, on the run's connection, inside **one** transaction, while the pass goes
on with the next batch (the batches queued meanwhile are written together):

* a **first load** (the family was empty when the pass began): once the pass has kept
  :data:`~ragstore.ingest.writer.BULK_THRESHOLD` records, the family's HNSW index is dropped (as any bulk
  load does) and each batch is COPied straight into the chunk and family tables; the index is built at
  the end;
* a **re-run** (the family holds rows): each batch's new and changed records are merged as the write pass
  would merge them (their insertion into the HNSW graph, the costly part of a small change, then runs
  while the pass still reads). The pass's lookups of source hashes and the writer's batches take turns
  on the connection.

Guarantees:

* **Bad input writes nothing.** The transaction is committed only after the pass has read the whole input;
  a bad record anywhere (the last batch included) rolls every written row back. Texts whose full-text
  vector might pass PostgreSQL's limit are checked by the writer thread, inside the same transaction, before
  their batch is written; when the pass and that check both find a problem, the earlier record is named.
* **All or nothing.** A kill -9, a lost connection or a full disk during the run leaves nothing of it
  (there is no per-batch commit on this path: a run that fails is re-run whole); a rerun reaches the
  content of a clean run.
* **Concurrent writers.** A row another writer holds makes this run wait for it, as any merge does; a row
  already there on a first load, a deadlock or a serialisation failure rolls the whole run back, and the
  run then writes what the pass spooled through the usual merge, batch by batch (each batch its own
  transaction, retried on conflicts).
* The HNSW index dropped for a first load is rebuilt when the load fails, as after any bulk load.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql

from ragstore.db.citus import on_citus
from ragstore.db.connection import db_errors, map_db_error
from ragstore.db.sqlfiles import query
from ragstore.embed.base import Backend
from ragstore.errors import InvalidInput
from ragstore.families import Family, drop_hnsw_index, ensure_hnsw_index
from ragstore.ingest import writer as writing
from ragstore.ingest.fast import OnePass, PassResult, Prepared
from ragstore.ingest.records import FTS_SAFE_BYTES

Conn = psycopg.Connection[Any]
TextCheck = Callable[[str, str], None]
#: Batches kept waiting for the writer thread at most (the pass waits beyond: memory stays bounded).
QUEUED = 3
# What rolls a streamed load back to the merge of the spooled batches instead of failing the run.
_MERGE_INSTEAD = (pgerrors.UniqueViolation, pgerrors.DeadlockDetected, pgerrors.SerializationFailure)


class BulkStream:
    """Feeds a pass's batches to a writer thread; see the module docstring. Make it with :meth:`attach`."""

    def __init__(self, conn: Conn, family: Family, backend: Backend, fts_config: str, one: OnePass) -> None:
        self.writer = writing.Writer(conn, family, backend, fts_config=fts_config)
        self.writer.streaming = True
        self.one = one
        self.check_text = one.check_text
        self.size = one.batch
        self.started = False
        self.declined = False
        self.error: BaseException | None = None
        self._pending: list[Prepared] = []
        self._count = 0
        self._stopping = False
        self._queue: queue.Queue[Prepared | None] = queue.Queue(maxsize=QUEUED)
        self._thread: threading.Thread | None = None

    @classmethod
    def attach(cls, conn: Conn, family: Family, backend: Backend, fts_config: str, one: OnePass) -> BulkStream | None:
        """A stream fed by ``one`` when its run may stream (an ``external`` family on a single node), else
        None. A re-run streams from its first batch, a first load once it is large enough."""
        if family.backend != "external" or on_citus(conn):
            return None
        conn.commit()
        stream = cls(conn, family, backend, fts_config, one)
        one.sink = stream.offer
        if not one.empty:
            stream._begin()
        return stream

    # -- the pass's side --------------------------------------------------------------------------
    def offer(self, batch: Prepared) -> None:
        """A batch the pass kept: held until a first load is large enough to stream, then handed on."""
        if self.declined:
            return
        if self.started:
            self._queue.put(batch)
            return
        self._pending.append(batch)
        self._count += len(batch)
        if self._count >= writing.BULK_THRESHOLD:
            self._start_bulk()

    def _start_bulk(self) -> None:
        writer, pending = self.writer, self._pending
        conn, family = writer.conn, writer.family
        self._pending = []
        writer.fts_oid()
        if not drop_hnsw_index(conn, family):  # the app, and the family is not empty any more
            self.declined = True
            return
        empty = sql.SQL(query("ingest", "family_is_empty")).format(**family.identifiers())
        with db_errors():
            row = conn.execute(empty).fetchone()  # opens the load's transaction, committed by finish()
        if not (row and row[0]):
            conn.rollback()
            self.declined = True  # the run merges; it builds the dropped index at its end
            return
        writer.direct = True
        self._begin()
        for batch in pending:
            self._queue.put(batch)

    def _begin(self) -> None:
        self.started = True
        self.one.check_text = None  # the thread checks the texts, in its transaction
        self.one.commit_lookups = False
        self._thread = threading.Thread(target=self._run, name="ragstore-stream", daemon=True)
        self._thread.start()

    # -- the writer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while (batch := self._queue.get()) is not None:
            parts, last = self._more([batch])
            if self.error is None:
                try:
                    with self.one.lock:
                        joined = writing.join_prepared(parts)
                        self._check_texts(joined)
                        if not self._stopping:
                            self.writer.stream_batch(joined)
                except BaseException as exc:  # handed to the main thread by finish() or abort()
                    self.error = exc
                    with self.one.lock:  # the pass's lookups go on in a clean transaction
                        _rollback(self.writer.conn)
            if last:
                return

    def _more(self, parts: list[Prepared]) -> tuple[list[Prepared], bool]:
        """``parts`` and the batches queued behind it, up to the batch size; True when the end was met."""
        count = sum(len(p) for p in parts)
        while count < self.size:
            try:
                batch = self._queue.get_nowait()
            except queue.Empty:
                return parts, False
            if batch is None:
                return parts, True
            parts.append(batch)
            count += len(batch)
        return parts, False

    def _check_texts(self, batch: Prepared) -> None:
        if self.check_text is None:
            return
        for where, text in zip(batch.wheres, batch.texts, strict=True):
            if len(text) * 4 > FTS_SAFE_BYTES and len(text.encode("utf-8")) > FTS_SAFE_BYTES:
                self.check_text(where, text)

    def _join(self) -> BaseException | None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        return self.error

    # -- the end ----------------------------------------------------------------------------------
    def abort(self) -> None:
        """The pass failed: roll the run back (and rebuild an index dropped for it). A bad record the thread
        found in an earlier batch than the pass's failure is raised instead of it."""
        if not self.started:
            return
        self._stopping = True
        error = self._join()
        conn = self.writer.conn
        _rollback(conn)
        if self.writer.direct:
            with contextlib.suppress(Exception):
                ensure_hnsw_index(conn, self.writer.family)
        if isinstance(error, InvalidInput):
            raise error

    def finish(
        self, found: PassResult, *, prune: bool, prune_prefixes: list[str], progress: writing.Progress | None
    ) -> writing.IndexReport | None:
        """The pass read the whole input: commit and finish the run (prune; for a first load the clustering
        and the HNSW build). None when a concurrent writer was met: everything is rolled back, and the
        caller writes what the pass spooled."""
        error = self._join()
        conn, family = self.writer.conn, self.writer.family
        try:
            if error is not None:
                raise error
            conn.commit()
        except _MERGE_INSTEAD:
            _rollback(conn)
            return None
        except BaseException as exc:
            _rollback(conn)
            if self.writer.direct:
                with contextlib.suppress(Exception):
                    ensure_hnsw_index(conn, family)
            if isinstance(exc, psycopg.Error):
                map_db_error(exc)
            raise
        self.writer.streaming = False
        return writing.finish_streamed(
            self.writer, found, prune=prune, prune_prefixes=prune_prefixes, progress=progress
        )


def _rollback(conn: Conn) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.rollback()
