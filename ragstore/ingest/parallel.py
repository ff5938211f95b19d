"""Batches written on two connections at once, so the server works on two cores.

A run whose batches are each their own transaction (the merge of a re-run, the direct bulk path of a
non-streamed first load) hands them to whichever of two writers is free, each on its own connection and
thread (psycopg releases the interpreter while the server works). The run's last batch, when large
enough, is split in two halves, so a re-run that changed one batch's worth of records keeps both
connections busy too. Each batch is still one transaction, committed whole; the counts are those a
one-connection run reports (``batches`` counts transactions, so a split batch counts two).

The first failure stops the other writer: it finishes the batch it holds (committed whole, as any
batch before a failure) and takes no other; the failure is raised as a one-connection run raises it.
An interrupt (Ctrl-C) stops both sooner: a writer still embedding its batch stops at the next slice of
the embedding (``embed_slices`` in ragstore/ingest/writer.py: seconds, not the minutes of a whole batch
of a model's texts) and commits nothing of it; batches committed before are kept.
When the second connection cannot be had (the lender returns None), the run goes on with one; a run of
one batch too small to split opens none. On Citus a run keeps one connection: its workers already
spread a batch's shards over their own cores, and the merge order below is the one-node one.

The transactions of the two writers overlap because the slow part of a merge, the HNSW inserts of
chunks already stored, comes before the chunk merge whose triggers lock rows of ragstore.chunk_term_df
until commit (see ``merge_embeddings_existing`` in ragstore/sql/ingest.sql); the other writer waits
for those locks only through the short tail of a transaction.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from ragstore.ingest.fast import Prepared

if TYPE_CHECKING:
    from ragstore.ingest.writer import Progress, Writer

Conn = psycopg.Connection[Any]
#: Lends the run a second connection for the block (None when it cannot), outside autocommit, and takes
#: it back afterwards: :func:`ragstore.db.connection.second_connection`, or the Store's pool.
Lender = Callable[[], contextlib.AbstractContextManager[Conn | None]]

#: The last batch is split in two when each half holds at least this many records.
MIN_HALF = 50
_POLL = 0.05  # seconds a writer or the feeder waits before looking at the run's state again


def write_batches(
    writer: Writer, batches: Iterable[Prepared], progress: Progress | None, lender: Lender | None
) -> None:
    """Write ``batches`` with ``writer``, and with a second writer on a connection of ``lender`` when it
    gives one (where the dialect allows a second writer: not on Citus). The second writer's counts are added
    to ``writer``'s report."""
    if lender is None or not writer.dialect.second_writer:
        _one(writer, batches, progress)
        return
    items = halved_tail(iter(batches))
    ahead = list(itertools.islice(items, 2))
    if len(ahead) < 2:  # one batch, too small to split: a second connection would only cost its opening
        _one(writer, ahead, progress)
        return
    with lender() as other:
        if other is None:
            _one(writer, itertools.chain(ahead, items), progress)
            return
        helper = writer.partner(other)
        try:
            _two([writer, helper], itertools.chain(ahead, items), progress)
        finally:
            writer.add_counts(helper)


def _one(writer: Writer, batches: Iterable[Prepared], progress: Progress | None) -> None:
    for batch in batches:
        writer.write_prepared(batch)
        if progress is not None:
            progress(len(batch))


def _two(writers: list[Writer], batches: Iterator[Prepared], progress: Progress | None) -> None:
    todo: queue.Queue[Prepared] = queue.Queue(maxsize=len(writers))
    fed = threading.Event()
    stop = threading.Event()
    failures: list[BaseException] = []
    lock = threading.Lock()

    def run(writer: Writer) -> None:
        while not stop.is_set():
            try:
                batch = todo.get(timeout=_POLL)
            except queue.Empty:
                if fed.is_set():
                    return
                continue
            try:
                writer.write_prepared(batch)
                if progress is not None:
                    with lock:
                        progress(len(batch))
            except BaseException as exc:  # raised again by the run's thread
                with lock:
                    failures.append(exc)
                stop.set()
                return

    def interrupt() -> None:
        stop.set()
        writers[0].cancel.set()

    threads = [threading.Thread(target=run, args=(w,), name=f"ragstore-writer-{k}") for k, w in enumerate(writers)]
    for thread in threads:
        thread.start()
    try:
        for batch in batches:
            while not stop.is_set():
                try:
                    todo.put(batch, timeout=_POLL)
                    break
                except queue.Full:
                    continue
            if stop.is_set():
                break
        fed.set()
    except KeyboardInterrupt:
        interrupt()
        raise
    finally:
        # An error of the feeder (the spool) stops the writers too; each ends its batch. An interrupt
        # stops them sooner: a batch not yet embedded is left, uncommitted, at its next embedding slice.
        if not fed.is_set():
            stop.set()
        _join(threads, interrupt)
    if failures:
        raise failures[0]


def _join(threads: list[threading.Thread], interrupt: Callable[[], None]) -> None:
    """Wait for ``threads``; an interrupt while waiting calls ``interrupt``, waits on, and is raised after."""
    pending: KeyboardInterrupt | None = None
    for thread in threads:
        while thread.is_alive():
            try:
                thread.join()
            except KeyboardInterrupt as exc:
                interrupt()
                pending = pending or exc
    if pending is not None:
        raise pending


def halved_tail(batches: Iterator[Prepared], min_half: int = MIN_HALF) -> Iterator[Prepared]:
    """``batches`` as they come, the last one split in two halves when each holds ``min_half`` records."""
    held = next(batches, None)
    while held is not None:
        following = next(batches, None)
        if following is None and len(held) >= 2 * min_half:
            half = len(held) // 2
            yield slice_prepared(held, 0, half)
            yield slice_prepared(held, half, len(held))
        else:
            yield held
        held = following


def slice_prepared(batch: Prepared, start: int, stop: int) -> Prepared:
    """Records ``start`` to ``stop`` of ``batch``."""
    return Prepared(
        batch.wheres[start:stop],
        batch.ids[start:stop],
        batch.packages[start:stop],
        batch.texts[start:stop],
        batch.metadata[start:stop],
        batch.sources[start:stop],
        np.ascontiguousarray(batch.vectors[start:stop]),
        batch.has_vector[start:stop],
    )
