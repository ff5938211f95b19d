"""A bulk load of precomputed vectors written while the pass still reads: one transaction, committed whole.

A first load of JSONL into an ``external`` family (every record brings its vector) that was empty when
the pass began would otherwise leave the server idle while the pass reads and validates, then the client
idle while the server COPies. Here, once the pass has kept :data:`~ragstore.ingest.writer.BULK_THRESHOLD`
records, the family's HNSW index is dropped (as any bulk load does) and a writer thread COPies each batch
the pass keeps straight into the chunk and family tables, on the run's connection, inside **one**
transaction; the pass goes on with the next batch meanwhile.

Guarantees:

* **Bad input writes nothing.** The transaction is committed only after the pass has read the whole input;
  a bad record anywhere (the last batch included) rolls every streamed row back. Texts whose full-text
  vector might pass PostgreSQL's limit are checked by the writer thread, inside the same transaction, before
  their batch is COPied; when the pass and that check both find a problem, the earlier record is named.
* **All or nothing.** A kill -9, a lost connection or a full disk during the load leaves nothing of it
  (there is no per-batch commit on this path: a load that fails is re-run whole); a rerun sees an empty
  family again, and reaches the content of a clean run.
* **Concurrent writers.** A row already there (another writer's) or a deadlock rolls the whole streamed
  load back; the run then writes what the pass spooled through the usual merge, batch by batch.
* The HNSW index dropped for the load is rebuilt when the load fails, as after any bulk load.
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

from ragstore.db.connection import db_errors, map_db_error
from ragstore.db.dialect import dialect_of
from ragstore.db.sqlfiles import query
from ragstore.embed.base import Backend
from ragstore.errors import InvalidInput
from ragstore.families import Family
from ragstore.families.tables import drop_hnsw_index, ensure_hnsw_index
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
        self.one = one
        self.check_text = one.check_text
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
        """A stream fed by ``one`` when its run may stream (an ``external`` family, empty when the pass
        began, on a single node), else None. The caller attaches one to a pass over JSONL only (a Parquet
        pass holds the interpreter in long pyarrow and numpy calls, which starve the writer thread)."""
        if family.backend != "external" or not one.empty or not dialect_of(conn).direct_copy:
            return None
        conn.commit()
        stream = cls(conn, family, backend, fts_config, one)
        one.sink = stream.offer
        return stream

    # -- the pass's side --------------------------------------------------------------------------
    def offer(self, batch: Prepared) -> None:
        """A batch the pass kept: held until the load is large enough to stream, then handed to the thread."""
        if self.declined:
            return
        if self.started:
            self._queue.put(batch)
            return
        self._pending.append(batch)
        self._count += len(batch)
        if self._count >= writing.BULK_THRESHOLD:
            self._start()

    def _start(self) -> None:
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
        self.started = True
        self.one.check_text = None  # the connection is the thread's now: it checks the texts
        self._thread = threading.Thread(target=self._run, name="ragstore-bulk-stream", daemon=True)
        self._thread.start()
        for batch in pending:
            self._queue.put(batch)

    # -- the writer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while (batch := self._queue.get()) is not None:
            if self.error is not None:
                continue  # drained, so that the pass never waits on a full queue
            try:
                self._check_texts(batch)
                if not self._stopping:
                    self.writer.stream_batch(batch)
            except BaseException as exc:  # handed to the main thread by finish() or abort()
                self.error = exc

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
        """The pass failed: roll the load back and rebuild the dropped index. A bad record the thread found
        in an earlier batch than the pass's failure is raised instead of it."""
        if not self.started:
            return
        self._stopping = True
        error = self._join()
        conn = self.writer.conn
        _rollback(conn)
        with contextlib.suppress(Exception):
            ensure_hnsw_index(conn, self.writer.family)
        if isinstance(error, InvalidInput):
            raise error

    def finish(
        self, found: PassResult, *, prune: bool, prune_prefixes: list[str], progress: writing.Progress | None
    ) -> writing.IndexReport | None:
        """The pass read the whole input: commit the load and finish the run (prune, clustering, HNSW build).
        None when a concurrent writer's rows were met: the load is rolled back, and the caller merges what
        the pass spooled."""
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
            with contextlib.suppress(Exception):
                ensure_hnsw_index(conn, family)
            if isinstance(exc, psycopg.Error):
                map_db_error(exc)
            raise
        return writing.finish_streamed(
            self.writer, found, prune=prune, prune_prefixes=prune_prefixes, progress=progress
        )


def _rollback(conn: Conn) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.rollback()
