"""The idempotent bulk writer behind ``ragstore index``.

For each batch of records:

1. duplicates of an id already seen in this run collapse (first occurrence wins); blank texts are skipped;
2. one lookup fetches what the store holds for the batch's ids (record hash, this family's content hash);
   unchanged records stop here: they cost a hash comparison, never a staged row or an embedding;
3. only new or changed texts are embedded, and only changed rows are binary-COPied into staging tables;
4. one ``INSERT … SELECT … ON CONFLICT`` merge per table, then a commit. A deadlock or serialisation
   failure (concurrent writers) retries the batch with bounded backoff.

An interrupted run loses nothing committed, and a rerun converges to the table a clean run leaves.
Counts come from what the merges actually changed, so concurrent writers' reports add up.

The pipeline, as a reader follows it: :func:`ragstore.ingest.run.index_sources` reads the sources and runs
the one pass (:mod:`ragstore.ingest.fast`), which spools the batches to write; :func:`write_prepared`
joins them into write batches and hands them to one writer or two (:mod:`ragstore.ingest.parallel`);
each batch is hashed, looked up and planned (which rows to rewrite, which to embed) by :class:`Writer`,
then written by the run's :class:`BatchWrite`, chosen once: :class:`Merge` (staging COPY and ``ON
CONFLICT`` merges), or :class:`DirectCopy` (a bulk load into an empty family, straight into the tables).
A first load of precomputed vectors may instead be streamed during the pass, in one transaction
(:mod:`ragstore.ingest.stream`, through :func:`copy_direct`). What differs on Citus is the dialect's
(:class:`ragstore.db.dialect.Dialect`: ``ordered_merge``, ``direct_copy``, ``second_writer``...).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import orjson
import psycopg
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.types.json import set_json_dumps
from pydantic import ValidationError

from ragstore.common.like import like_prefix
from ragstore.common.problems import describe_validation_error
from ragstore.db.connection import db_errors, map_db_error
from ragstore.db.dialect import Dialect, dialect_of
from ragstore.db.sqlfiles import query
from ragstore.embed.base import Backend
from ragstore.embed.cache import embed_cached
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.families import Family, deleting, filter_keys, has_hnsw_index, missing_vector
from ragstore.families.tables import cluster_by_package, drop_hnsw_index, ensure_hnsw_index, reset_build, size_build
from ragstore.ingest.fast import PassResult, Prepared
from ragstore.ingest.parallel import write_batches
from ragstore.ingest.records import ChunkRecord, IndexRow, check_matrix, content_sha256, record_sha256

if TYPE_CHECKING:
    import tenacity

    from ragstore.ingest.parallel import Lender
    from ragstore.ingest.readers import Skipped

DEFAULT_BATCH = 5000
# Above this many records going into an empty family, the HNSW index is dropped and built once at the
# end: building after a bulk load is several times faster than maintaining the graph row by row.
BULK_THRESHOLD = 5_000
MAX_RETRIES = 6
#: How many of the texts over the model's window a report names.
TRUNCATED_NAMED = 5
#: Characters of text in one backend call of a batch's embedding (about 8,000 MiniLM word pieces, a few
#: seconds): an interrupt stops a run's embedding between two such calls, not after a whole batch.
EMBED_SLICE_CHARS = 32_768
#: After a run that updated or pruned at least this fraction of a family's rows, its HNSW index is rebuilt
#: (measured at 30k x 384 after a 1% change: VACUUM of the graph took 1.7-2.2x a REINDEX, and the recall left
#: by the change was within noise: benchmarks/README.md, "Precomputed-vector ingest").
REBUILD_FRACTION = 0.1
# A deadlock or serialisation failure between concurrent writers: the batch is retried as a whole.
_TRANSIENT = (pgerrors.DeadlockDetected, pgerrors.SerializationFailure)

Conn = psycopg.Connection[Any]
Progress = Callable[[int], None]


@dataclass
class IndexReport:
    """What a run did. ``inserted + updated + unchanged`` is the number of distinct non-blank records."""

    family: str
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    duplicates: int = 0
    pruned: int = 0
    embedded: int = 0
    batches: int = 0
    retries: int = 0
    reindexed: bool = False
    seconds: float = 0.0
    #: Time in the backend's ``embed`` calls, and the word pieces embedded (0 without a tokenizer).
    embed_seconds: float = 0.0
    embed_tokens: int = 0
    #: Texts embedded that are longer than the model's window (its ``max_tokens``): the model read their
    #: first ``max_tokens`` word pieces only. ``truncated_at`` names the first of them (``file:line``).
    truncated: int = 0
    truncated_at: list[str] = field(default_factory=list)
    #: The folders and documents' prefixes and roots (:func:`ragstore.ingest.roots.claim`): ``prefix``,
    #: ``root``, ``host``, ``registered`` (``new``, ``same`` or ``replaced``).
    sources: list[dict[str, str]] = field(default_factory=list)
    packages: set[str] = field(default_factory=set, repr=False)
    #: The files the sources did not index, and why (``ragstore index --json`` prints them beside the report).
    skipped_files: list[Skipped] = field(default_factory=list, repr=False)
    #: The documents the sources read (their package_path: the name of the reader that read it).
    documents: dict[str, str] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("packages")
        data.pop("skipped_files")
        data.pop("documents")
        data["seconds"] = round(self.seconds, 3)
        if self.embedded and self.embed_seconds > 0:  # the rate the text summary prints
            data["embed_chunks_per_s"] = round(self.embedded / self.embed_seconds, 1)
            data["embed_tokens_per_s"] = round(self.embed_tokens / self.embed_seconds)
        return data

    def summary(self) -> str:
        parts = [
            f"{self.inserted} inserted",
            f"{self.updated} updated",
            f"{self.unchanged} unchanged",
            f"{self.skipped} skipped",
        ]
        if self.duplicates:
            parts.append(f"{self.duplicates} duplicates")
        parts.append(f"{self.pruned} pruned")
        line = f"{self.family}: " + ", ".join(parts) + f" in {self.seconds:.1f}s"
        if self.embedded and self.embed_seconds > 0:
            rate = f"{self.embedded} embedded at {self.embedded / self.embed_seconds:.1f} chunks/s"
            if self.embed_tokens:
                rate += f", {self.embed_tokens / self.embed_seconds:,.0f} tokens/s"
            line += f" ({rate})"
        if self.truncated:
            line += (
                f"; {self.truncated} text{'s' if self.truncated != 1 else ''} over the model's window embedded "
                f"from their start only (split them): {', '.join(self.truncated_at)}"
            )
        marks = {"new": " (new)", "replaced": " (taken over)"}
        roots = [f"{s['prefix']}/ <- {s['root']}{marks.get(s['registered'], '')}" for s in self.sources]
        return "; ".join([line, *roots])


@dataclass
class _Batch:
    """A batch to write: its rows, and each row's content and record hashes."""

    rows: Prepared
    content: list[bytes]
    record: list[bytes]
    #: The ids of the batch the store held when the batch was looked up (None: not looked up, a direct COPY).
    stored: set[str] | None = None


#: What a batch's write changed: the chunks rewritten, the vectors inserted, the vectors updated (by id).
Changed = tuple[set[str], set[str], set[str]]


class BatchWrite(Protocol):
    """How one batch's rows reach the family's tables: the seam of the write strategies, one implementation
    each (:class:`Merge`, :class:`DirectCopy`), chosen once per run by :func:`_write_run`. ``looks_up``:
    whether the writer first fetches what the store holds for the batch's ids (a direct COPY into an empty
    family has nothing to find). ``write`` runs the batch's transaction and says what it changed."""

    looks_up: bool

    def write(
        self,
        w: Writer,
        batch: _Batch,
        chunk_rows: list[int],
        embed_rows: list[int],
        vectors: np.ndarray,
        *,
        alone: bool,
    ) -> Changed: ...


class Writer:
    """Writes records of one family. Use :func:`write_prepared`; the class keeps the run's state.

    With ``direct`` (a bulk load into a family that was empty when the run began), a batch is COPied
    straight into the chunk and family tables, without staging or merge; should a row already be there (a
    concurrent writer), the batch is rolled back and merged instead.
    """

    def __init__(self, conn: Conn, family: Family, backend: Backend, *, fts_config: str = "english") -> None:
        family.check_backend(backend)
        self.conn = conn
        self.family = family
        self.backend = backend
        self.fts_config = fts_config
        self.seen: set[str] = set()
        #: How each batch reaches the tables (:class:`Merge`, or :class:`DirectCopy`), chosen by the run.
        self.strategy: BatchWrite = MERGE
        self._fts: int | None = None
        self.report = IndexReport(family=family.name)
        # Serialises the backend's embedding calls between the writers of one run (a model session need
        # not be thread-safe); a writer alone takes it uncontended.
        self.embed_lock = threading.Lock()
        #: Set when the run is interrupted: the writers of the run embed no further slice (see ``_vectors``).
        self.cancel = threading.Event()
        self._lookup = sql.SQL(query("ingest", "lookup")).format(**family.identifiers())
        self.merge_embeddings = embedding_merge(family)
        self.merge_existing = embedding_merge(family, "merge_embeddings_existing")
        self.copy_family = sql.SQL(query("ingest", "copy_family_direct")).format(**family.identifiers())
        with db_errors():
            conn.execute(query("ingest", "create_stage"))
            # Asked here, in a transaction this commits: a batch's transaction() must begin on an idle
            # connection (on one left in a transaction it would be a savepoint, never committed).
            self.dialect: Dialect = dialect_of(conn)
            conn.commit()

    def partner(self, conn: Conn) -> Writer:
        """A writer of the same run on a second connection (see :mod:`ragstore.ingest.parallel`): the same
        family, backend, configuration, bulk mode and embedding lock, its own report."""
        other = Writer(conn, self.family, self.backend, fts_config=self.fts_config)
        other.strategy = self.strategy
        other.embed_lock = self.embed_lock
        other.cancel = self.cancel
        return other

    def add_counts(self, other: Writer) -> None:
        """Add what ``other`` (a :meth:`partner`) wrote to this writer's report."""
        mine, theirs = self.report, other.report
        mine.inserted += theirs.inserted
        mine.updated += theirs.updated
        mine.unchanged += theirs.unchanged
        mine.embedded += theirs.embedded
        mine.embed_seconds += theirs.embed_seconds
        mine.embed_tokens += theirs.embed_tokens
        mine.truncated += theirs.truncated
        mine.truncated_at = (mine.truncated_at + theirs.truncated_at)[:TRUNCATED_NAMED]
        mine.batches += theirs.batches
        mine.retries += theirs.retries

    # -- one batch -----------------------------------------------------------------------------
    def write_prepared(self, batch: Prepared) -> None:
        """Write one batch of the one pass (:mod:`ragstore.ingest.fast`): checked, deduplicated, with its
        vectors as a matrix and the records' source hashes."""
        if len(batch):
            self._write(self._hashed(batch))

    def stream_batch(self, batch: Prepared) -> None:
        """COPY one batch of new rows, every one with its vector, straight into the tables inside the
        transaction the caller holds open (nothing is committed here; see :mod:`ragstore.ingest.stream`).
        A row already there raises UniqueViolation, and the caller rolls the whole load back."""
        if not len(batch):
            return
        if not batch.has_vector.all():
            raise ValueError("a streamed bulk load takes records with their vectors only")
        copy_direct(self, self._hashed(batch), batch.vectors)
        self.report.inserted += len(batch)
        self.report.batches += 1

    def _hashed(self, batch: Prepared) -> _Batch:
        """``batch`` with its rows' content and record hashes (a supplied vector is part of the record)."""
        fts = self.fts_config
        content = [content_sha256(t) for t in batch.texts]
        record = [
            record_sha256(p, t, m, fts) for p, t, m in zip(batch.packages, batch.texts, batch.metadata, strict=True)
        ]
        for i in np.flatnonzero(batch.has_vector).tolist():
            record[i] = hashlib.sha256(record[i] + batch.vectors[i].tobytes()).digest()
        return _Batch(batch, content, record)

    def _write(self, batch: _Batch) -> None:
        rows = batch.rows
        ids = rows.ids
        looks_up = self.strategy.looks_up
        if not looks_up:
            stored: dict[str, tuple[bytes, bytes | None, str, bytes, bytes | None]] = {}
        else:
            with db_errors():
                found = self.conn.execute(self._lookup, {"ids": ids, "family": self.family.name}, binary=True)
                stored = {
                    row[0]: (
                        bytes(row[1]),
                        None if row[3] is None else bytes(row[3]),
                        row[4],
                        bytes(row[2]),
                        None if row[5] is None else bytes(row[5]),
                    )
                    for row in found.fetchall()
                }
                self.conn.commit()

        if looks_up:
            batch.stored = set(stored)
        chunk_rows: list[int] = []
        embed_rows: list[int] = []
        rewritten: set[str] = set()
        supplied = batch.rows.has_vector
        for i, chunk_id in enumerate(ids):
            held = stored.get(chunk_id)
            # A chunk whose stored text is not the input's (its hash says so even when the record hash
            # does not: a row changed behind the writer's back) is written again, and so is its vector.
            record_changed = held is None or held[0] != batch.record[i] or held[3] != batch.content[i]
            embedding_stale = (
                held is None
                or held[1] != batch.content[i]
                or held[2] != self.family.model
                or (record_changed and bool(supplied[i]))
            )
            if record_changed:
                rewritten.add(chunk_id)
                chunk_rows.append(i)
            elif held is not None and rows.sources[i] is not None and held[4] != rows.sources[i]:
                chunk_rows.append(i)  # the same record in other bytes: only its source hash is written
            if embedding_stale:
                embed_rows.append(i)
        if not chunk_rows and not embed_rows:
            self.report.unchanged += len(ids)
            return

        vectors = self._vectors(batch, embed_rows)
        try:
            for attempt in _transient_retry():
                with attempt:
                    # A retry runs alone: under the family's exclusive df lock, no other merge holds a row.
                    alone = attempt.retry_state.attempt_number > 1
                    try:
                        changed, emb_inserted, emb_updated = self.strategy.write(
                            self, batch, chunk_rows, embed_rows, vectors, alone=alone
                        )
                    except _TRANSIENT:
                        _rollback(self.conn)
                        self.report.retries += 1
                        raise
        except psycopg.Error as exc:
            _rollback(self.conn)
            map_db_error(exc)
        chunk_only = len((changed & rewritten) - emb_inserted - emb_updated)
        self.report.inserted += len(emb_inserted)
        self.report.updated += len(emb_updated) + chunk_only
        self.report.unchanged += len(ids) - len(emb_inserted) - len(emb_updated) - chunk_only
        self.report.batches += 1

    def _vectors(self, batch: _Batch, rows: list[int]) -> np.ndarray:
        """Vectors for ``rows``: supplied ones as given, the others embedded in one backend call."""
        prepared = batch.rows
        index = np.asarray(rows, dtype=np.int64)
        out = prepared.vectors[index] if rows else np.empty((0, self.family.dim), dtype=np.float32)
        to_embed = [k for k, i in enumerate(rows) if not prepared.has_vector[i]]
        if to_embed:
            texts = [prepared.texts[rows[k]] for k in to_embed]
            where = f"{prepared.wheres[rows[to_embed[0]]]}..."

            tokens = self._count_tokens(texts, [prepared.wheres[rows[k]] for k in to_embed])

            def checked(todo: list[str]) -> np.ndarray:
                matrix = np.empty((len(todo), self.family.dim), dtype=np.float32)
                for part in embed_slices(todo):
                    if self.cancel.is_set():
                        raise KeyboardInterrupt
                    started = time.perf_counter()
                    vectors = self.backend.embed([todo[k] for k in part])
                    self.report.embed_seconds += time.perf_counter() - started
                    self.report.embed_tokens += sum(tokens.get(todo[k], 0) for k in part)
                    check_matrix(vectors, rows=len(part), dim=self.family.dim, model=self.backend.model, where=where)
                    matrix[part] = vectors
                return matrix

            # The embedding cache (ragstore.embed.cache) first: only texts it lacks reach the backend.
            with self.embed_lock, db_errors():
                try:
                    out[to_embed], embedded = embed_cached(
                        self.conn, self.backend, texts, [batch.content[rows[k]] for k in to_embed], embed=checked
                    )
                except KeyboardInterrupt:
                    _rollback(self.conn)  # the cache lookup's transaction: nothing of the batch is written
                    raise
                self.conn.commit()
            self.report.embedded += embedded
        return out

    def _count_tokens(self, texts: list[str], wheres: list[str]) -> dict[str, int]:
        """The word pieces the model reads of each text to embed (at most its window), by the backend's
        tokenizer when it has one (else none); a text over the window is counted in ``truncated``: its
        vector is of its first ``max_tokens`` pieces."""
        count = getattr(self.backend, "count_tokens", None)
        limit = getattr(self.backend, "max_tokens", None)
        if not callable(count) or not isinstance(limit, int):
            return {}
        counts: list[int] = count(texts)
        for n, where in zip(counts, wheres, strict=True):
            if n > limit:
                self.report.truncated += 1
                if len(self.report.truncated_at) < TRUNCATED_NAMED:
                    self.report.truncated_at.append(where)
        return {text: min(n, limit) for text, n in zip(texts, counts, strict=True)}

    def fts_oid(self) -> int:
        """The oid of the run's text-search configuration (a binary COPY sends a regconfig as its oid)."""
        if self._fts is None:
            with db_errors():
                row = self.conn.execute("SELECT %s::regconfig::oid", (self.fts_config,)).fetchone()
                # Each batch is its own transaction, committed whole: none may be left open around it.
                self.conn.commit()
            assert row is not None
            self._fts = int(row[0])
        return self._fts

    # -- the end of a run ----------------------------------------------------------------------
    def prune(self, prefixes: Iterable[str] = (), packages: Iterable[str] | None = None) -> int:
        """Delete this family's chunks of this run's packages (or of ``packages``, or under ``prefixes``)
        that the input no longer holds; other families' chunks are never touched."""
        like = [like_prefix(p) for p in prefixes]
        packages = sorted(self.report.packages if packages is None else set(packages))
        if not packages and not like:
            return 0
        if not self.dialect.stage_joins:  # the run's ids as an array instead of the session's seen table
            with db_errors(), self.conn.transaction(), self.conn.cursor() as cur:
                params = {"packages": packages, "prefixes": like, "family": self.family.name, "seen": list(self.seen)}
                cur.execute(self.dialect.block("ingest", "prune"), params)
                pruned = max(cur.rowcount, 0)
            self.report.pruned += pruned
            return pruned
        with deleting(self.conn, self.family.name), self.conn.cursor() as cur:
            cur.execute("TRUNCATE ragstore_seen")
            with cur.copy(query("ingest", "copy_seen")) as copy:
                copy.set_types(["text"])
                for chunk_id in self.seen:
                    copy.write_row((chunk_id,))
            cur.execute("ANALYZE ragstore_seen")
            params = {"packages": packages, "prefixes": like, "family": self.family.name}
            row = cur.execute(query("ingest", "prune"), params).fetchone()
            cur.execute("TRUNCATE ragstore_seen")
        pruned = int(row[0]) if row else 0
        self.report.pruned += pruned
        return pruned


class Merge:
    """The merge: the batch's rows COPied into the session's staging tables, then one ``INSERT … SELECT … ON
    CONFLICT`` per table, in one transaction. Right for any batch: rows new, changed or already there."""

    looks_up = True

    def write(
        self,
        w: Writer,
        batch: _Batch,
        chunk_rows: list[int],
        embed_rows: list[int],
        vectors: np.ndarray,
        *,
        alone: bool,
    ) -> Changed:
        conn = w.conn
        rows = batch.rows
        ordered = w.dialect.ordered_merge
        inserted: set[str] = set()
        updated: set[str] = set()
        with conn.transaction(), conn.cursor() as cur:
            if (chunk_rows or alone) and ordered:
                _lock_term_df(w, cur, batch, chunk_rows, alone=alone)
            if chunk_rows:
                with cur.copy(query("ingest", "copy_chunks")) as copy:
                    copy.set_types(["text", "text", "text", "bytea", "bytea", "text", "text", "bytea"])
                    for i in chunk_rows:
                        copy.write_row(
                            (
                                rows.ids[i],
                                rows.packages[i],
                                rows.texts[i],
                                batch.content[i],
                                batch.record[i],
                                json.dumps(rows.metadata[i], ensure_ascii=False, sort_keys=True),
                                w.fts_config,
                                rows.sources[i],
                            )
                        )
            if embed_rows:
                with cur.copy(query("ingest", "copy_embeddings")) as copy:
                    copy.set_types(["text", "text", "vector", "text", "bytea"])
                    model = w.family.model
                    for k, i in enumerate(embed_rows):
                        copy.write_row((rows.ids[i], rows.packages[i], vectors[k], model, batch.content[i]))
                if ordered:
                    # The HNSW inserts of chunks already stored come first, before any df row lock is taken.
                    for chunk_id, was_inserted in cur.execute(w.merge_existing).fetchall():
                        (inserted if was_inserted else updated).add(chunk_id)
            if chunk_rows:
                merged = cur.execute(query("ingest", "merge_chunks"), {"family": w.family.name})
                changed = {row[0] for row in merged.fetchall()}
            else:
                changed = set()
            if embed_rows:
                for chunk_id, was_inserted in cur.execute(w.merge_embeddings).fetchall():
                    (inserted if was_inserted else updated).add(chunk_id)
            if changed:
                _sync_package_paths(w, cur, changed)
        return changed, inserted, updated


class DirectCopy:
    """A bulk load into a family that was empty when the run began: the batch's rows (every one new: the pass
    removed duplicates) COPied straight into the chunk and family tables, in package order, in one
    transaction, with no lookup, staging or merge. Should a row be there already (a concurrent writer), the
    batch is rolled back and merged, and so is the rest of the run (the writer's strategy becomes
    :data:`MERGE`)."""

    looks_up = False

    def write(
        self,
        w: Writer,
        batch: _Batch,
        chunk_rows: list[int],
        embed_rows: list[int],
        vectors: np.ndarray,
        *,
        alone: bool,
    ) -> Changed:
        try:
            return copy_direct(w, batch, vectors)
        except pgerrors.UniqueViolation:
            _rollback(w.conn)
            w.strategy = MERGE
            return MERGE.write(w, batch, chunk_rows, embed_rows, vectors, alone=alone)


MERGE = Merge()
DIRECT = DirectCopy()


def copy_direct(w: Writer, batch: _Batch, vectors: np.ndarray) -> Changed:
    """A batch of new rows COPied straight into the chunk and family tables, in package order, in one
    transaction (a savepoint inside a streamed load's, see :mod:`ragstore.ingest.stream`)."""
    conn = w.conn
    rows = batch.rows
    family, model, fts = w.family.name, w.family.model, w.fts_oid()
    order = sorted(range(len(rows.ids)), key=lambda i: (rows.packages[i], rows.ids[i]))
    with conn.transaction(), conn.cursor() as cur:
        set_json_dumps(_json_text, cur)
        cur.execute(query("ingest", "term_df_lock_shared"), {"family": family})
        with cur.copy(query("ingest", "copy_chunks_direct")) as copy:
            copy.set_types(["text", "text", "text", "text", "bytea", "bytea", "jsonb", "oid", "bytea"])
            for i in order:
                copy.write_row(
                    (
                        family,
                        rows.ids[i],
                        rows.packages[i],
                        rows.texts[i],
                        batch.content[i],
                        batch.record[i],
                        rows.metadata[i],
                        fts,
                        rows.sources[i],
                    )
                )
        with cur.copy(w.copy_family) as copy:
            copy.set_types(["text", "text", "vector", "text", "bytea", "jsonb"])
            for i in order:
                copy.write_row((rows.ids[i], rows.packages[i], vectors[i], model, batch.content[i], rows.metadata[i]))
    return set(), set(rows.ids), set()


def _lock_term_df(
    w: Writer, cur: psycopg.Cursor[Any], batch: _Batch, chunk_rows: list[int], *, alone: bool = False
) -> None:
    """The family's df lock, the merge transaction's first lock: exclusive when the merge may both insert
    and update chunks (two df upserts, see ``term_df_lock`` in ragstore/sql/ingest.sql) or when ``alone``
    (a retry after a conflict), shared otherwise.

    Taken before any row lock, so a transaction waiting for it holds nothing another waits for. Merges
    under the shared lock may still deadlock on rows (a chunk another writer committed after this batch's
    lookup is locked by the first embedding merge, before the chunk merge); the retry takes the
    exclusive lock and runs while no other merge of the family holds a row, so it cannot conflict."""
    stored = batch.stored
    # A batch never looked up (a direct COPY that met a row already there) may hold either kind.
    kinds = {True, False} if stored is None else {batch.rows.ids[i] in stored for i in chunk_rows}
    name = "term_df_lock" if alone or len(kinds) > 1 else "term_df_lock_shared"
    cur.execute(query("ingest", name), {"family": w.family.name})


def _sync_package_paths(w: Writer, cur: psycopg.Cursor[Any], changed: set[str]) -> None:
    """This family's table follows its chunks' package_path (no other family's row is touched; a model
    migration in progress picks the change up in its catch-up)."""
    table = sql.Identifier(w.family.table)
    statement = sql.SQL(w.dialect.block("ingest", "sync_package_path")).format(table=table)
    if w.dialect.stage_joins:  # joined to the staging table
        cur.execute(statement)
    else:
        cur.execute(statement, {"family": w.family.name, "ids": sorted(changed)})


def embedding_merge(family: Family, name: str = "merge_embeddings") -> sql.Composed:
    """The statement ``name`` of ragstore/sql/ingest.sql that merges staged vectors into ``family``'s table,
    with its shared ending (``upsert_embedding``)."""
    upsert = sql.SQL(query("ingest", "upsert_embedding"))
    return sql.SQL(query("ingest", name)).format(**family.identifiers(), upsert=upsert)


def _transient_retry() -> tenacity.Retrying:
    """Up to ``MAX_RETRIES`` tries on a transient conflict, with jittered exponential backoff (at most 2 s);
    the last failure is re-raised as is."""
    from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

    return Retrying(
        retry=retry_if_exception_type(_TRANSIENT),
        stop=stop_after_attempt(MAX_RETRIES),
        wait=wait_random_exponential(multiplier=0.05, max=2.0),
        reraise=True,
    )


def embed_slices(texts: Sequence[str], budget: int = EMBED_SLICE_CHARS) -> list[list[int]]:
    """Positions of ``texts`` in backend calls: by rising length, as many as fit in ``budget`` characters
    (at least one a call), so that each call's texts are of similar length, as one call's would be."""
    out: list[list[int]] = []
    current: list[int] = []
    size = 0
    for k in sorted(range(len(texts)), key=lambda k: len(texts[k])):
        if current and size + len(texts[k]) > budget:
            out.append(current)
            current, size = [], 0
        current.append(k)
        size += len(texts[k])
    if current:
        out.append(current)
    return out


def _rollback(conn: Conn) -> None:
    """Roll back; on a lost connection the server has done it already, and the caller reports the loss."""
    with contextlib.suppress(psycopg.Error):
        conn.rollback()


def _json_text(value: Any) -> str:
    """JSON text of a metadata object for a binary COPY into jsonb (orjson; json for what it refuses,
    such as integers past 64 bits)."""
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:
        return json.dumps(value, ensure_ascii=False)


def rebuild_if_churned(conn: Conn, family: Family, churned: int, seen: int) -> bool:
    """Rebuild the family's HNSW index (``REINDEX … CONCURRENTLY``: searches go on meanwhile) when
    ``churned`` (rows updated or pruned) is at least :data:`REBUILD_FRACTION` of its rows (as the planner
    counts them; ``seen``, the rows the run read, when it has not counted them yet); True when it ran.

    An updated or deleted row leaves a dead entry in the graph, which searches visit and drop; the rebuilt
    graph holds the live rows only. A role that may not rebuild the index (not its owner) leaves it to
    the owner's maintenance, as a failed rebuild does (the index stays valid)."""
    if churned <= 0 or not dialect_of(conn).rebuild_index:
        return False
    with db_errors():
        row = conn.execute(query("ingest", "family_rows"), {"table": family.table}).fetchone()
        conn.commit()
    rows = float(row[0]) if row and row[0] is not None else float(seen)
    if churned < REBUILD_FRACTION * rows:
        return False
    autocommit = conn.autocommit
    locked = False
    try:
        conn.autocommit = True
        row = conn.execute(query("ingest", "try_rebuild_lock"), {"table": family.table}).fetchone()
        locked = bool(row and row[0])
        if not locked:  # another run is rebuilding this graph
            return False
        size_build(conn, family, local=False)
        conn.execute(sql.SQL(query("ingest", "rebuild_hnsw")).format(**family.identifiers()))
        return True
    except psycopg.errors.InsufficientPrivilege:
        return False
    except psycopg.Error as exc:
        map_db_error(exc)
        raise
    finally:
        with contextlib.suppress(psycopg.Error):
            reset_build(conn)
            if locked:
                conn.execute(query("ingest", "rebuild_unlock"), {"table": family.table})
        conn.autocommit = autocommit


def check_supplied_vector(where: str, record: ChunkRecord, family: Family) -> None:
    """A precomputed vector in a record must fit ``family``: its dimension, its model, finite float32
    values (the :class:`IndexRow` contract); a family of the ``external`` backend needs one on every record.
    Raises ModelMismatch or InvalidInput naming ``where``."""
    if record.vector is None:
        if family.backend == "external":
            raise InvalidInput(f"{where}: vector: {missing_vector(family)}")
        return
    if len(record.vector) != family.dim:
        raise ModelMismatch(
            f"{where}: vector: {len(record.vector)} dimensions, family {family.name!r} is {family.dim}-d"
        )
    if record.model is not None and record.model != family.model:
        raise ModelMismatch(
            f"{where}: model: vector made by {record.model!r}, family {family.name!r} holds {family.model!r} vectors"
        )
    try:
        IndexRow(
            chunk_id=record.chunk_id,
            package_path=record.package_path,
            vector=record.vector,
            dim=family.dim,
            model=family.model,
        )
    except ValidationError as exc:
        raise InvalidInput(f"{where}: {describe_validation_error(exc)}") from exc


def write_prepared(
    conn: Conn,
    family: Family,
    backend: Backend,
    batches: Iterable[Prepared],
    found: PassResult,
    *,
    prune: bool = False,
    prune_prefixes: Iterable[str] = (),
    progress: Progress | None = None,
    fts_config: str | None = None,
    batch_size: int = DEFAULT_BATCH,
    documents: Iterable[str] = (),
    second: Lender | None = None,
) -> IndexReport:
    """Write what the one pass (:mod:`ragstore.ingest.fast`) kept: its batches, plus the counts and ids of
    the records it found unchanged, duplicated or blank (which ``--prune`` must know). Batches the pass
    left small (a re-run where few records changed) are written together, up to ``batch_size`` records
    a transaction. With ``second`` (a lender of a second connection), the batches are written on two
    connections at once (:mod:`ragstore.ingest.parallel`). Without ``prune``, the stored chunks of
    ``documents`` (package paths of documents read whole) that they no longer hold are deleted: their ids
    are anchored in content, so an edited chunk is a new id and its former one would stay behind."""

    def work(writer: Writer) -> None:
        _take_pass_counts(writer, found, progress)
        write_batches(writer, coalesced(batches, batch_size), progress, second)

    return _write_run(conn, family, backend, work, found.to_write, prune, prune_prefixes, fts_config, None, documents)


def coalesced(batches: Iterable[Prepared], size: int) -> Iterator[Prepared]:
    """``batches`` joined in order into batches of at most ``size`` records (a larger one stays whole)."""
    held: list[Prepared] = []
    count = 0
    for batch in batches:
        if held and count + len(batch) > size:
            yield join_prepared(held)
            held, count = [], 0
        held.append(batch)
        count += len(batch)
    if held:
        yield join_prepared(held)


def join_prepared(parts: list[Prepared]) -> Prepared:
    """One batch of the records of ``parts``, in order."""
    if len(parts) == 1:
        return parts[0]
    return Prepared(
        [w for p in parts for w in p.wheres],
        [i for p in parts for i in p.ids],
        [k for p in parts for k in p.packages],
        [t for p in parts for t in p.texts],
        [m for p in parts for m in p.metadata],
        [s for p in parts for s in p.sources],
        np.concatenate([p.vectors for p in parts]),
        np.concatenate([p.has_vector for p in parts]),
    )


def finish_streamed(
    writer: Writer,
    found: PassResult,
    *,
    prune: bool = False,
    prune_prefixes: Iterable[str] = (),
    progress: Progress | None = None,
) -> IndexReport:
    """The end of a bulk load streamed during the pass (:mod:`ragstore.ingest.stream`), once committed: the
    pass's counts, the prune, then the clustering and the HNSW build of any bulk load."""

    def work(done: Writer) -> None:
        _take_pass_counts(done, found, progress)
        if progress is not None:
            progress(done.report.inserted)

    family = writer.family
    return _write_run(writer.conn, family, writer.backend, work, None, prune, prune_prefixes, writer.fts_config, writer)


def _take_pass_counts(writer: Writer, found: PassResult, progress: Progress | None) -> None:
    """The pass's ids and counts of the records it found unchanged, duplicated or blank, into ``writer``."""
    writer.seen = found.seen
    writer.report.packages = found.packages
    writer.report.unchanged += found.unchanged
    writer.report.duplicates += found.duplicates
    writer.report.skipped += found.skipped
    if progress is not None:
        progress(found.unchanged + found.duplicates + found.skipped)


def _write_run(
    conn: Conn,
    family: Family,
    backend: Backend,
    work: Callable[[Writer], None],
    expected: int | None,
    prune: bool,
    prune_prefixes: Iterable[str],
    fts_config: str | None,
    writer: Writer | None = None,
    documents: Iterable[str] = (),
) -> IndexReport:
    """Run ``work`` with a writer (``writer``, else a new one), then prune and finish the family's index."""
    started = time.perf_counter()
    if writer is None:
        writer = Writer(conn, family, backend, fts_config=fts_config or family.options.get("fts_config", "english"))
    # An earlier bulk load killed before its end leaves the index missing: this run builds it at its end.
    bulk = not has_hnsw_index(conn, family)
    conn.commit()
    if not bulk and expected is not None and expected >= BULK_THRESHOLD:
        empty_sql = sql.SQL(query("ingest", "family_is_empty")).format(**family.identifiers())
        with db_errors():
            row = conn.execute(empty_sql).fetchone()
            conn.commit()
        if row and row[0]:
            bulk = drop_hnsw_index(conn, family)
            if bulk and writer.dialect.direct_copy:
                writer.strategy = DIRECT
    try:
        work(writer)
        if prune:
            writer.prune(prune_prefixes)
        else:
            writer.prune(packages=documents)
    except KeyboardInterrupt:
        # Stop now: building the index over what was committed could take minutes. It stays missing, and
        # the rerun the message asks for builds it at its end (``bulk`` above).
        raise
    except BaseException:
        if bulk:
            # Build the index over what was committed; the original error matters more than this one.
            with contextlib.suppress(Exception):
                conn.rollback()
                ensure_hnsw_index(conn, family)
        raise
    if bulk:
        cluster_by_package(conn, family)
        filter_keys.after_bulk_cluster(conn, family)
        ensure_hnsw_index(conn, family)
    else:
        report = writer.report
        seen = report.inserted + report.updated + report.unchanged
        report.reindexed = rebuild_if_churned(conn, family, report.updated + report.pruned, seen)
    writer.report.seconds += time.perf_counter() - started
    return writer.report
