"""``ragstore index`` as one library call: one pass validates every input whole, then the write pass writes it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypedDict, Unpack

import psycopg

from ragstore.caches import Caches, caches_for
from ragstore.db.connection import db_errors, second_connection
from ragstore.embed.base import Backend
from ragstore.embed.cache import cache_key, seed_from_positional_ids, uses_cache
from ragstore.errors import InvalidInput, RagstoreError
from ragstore.families import Family, backend_for, check_fts_config, get_family, title_prefix_of
from ragstore.ingest.chunker import window_for
from ragstore.ingest.columnar import COLUMNAR_KINDS, read_columnar
from ragstore.ingest.fast import OnePass, Spool
from ragstore.ingest.parallel import Lender
from ragstore.ingest.readers import EMPTY, Skipped, Source
from ragstore.ingest.records import FTS_SAFE_BYTES, ChunkRecord
from ragstore.ingest.roots import check as check_roots
from ragstore.ingest.roots import claim as claim_roots
from ragstore.ingest.roots import roots_of
from ragstore.ingest.stream import BulkStream
from ragstore.ingest.writer import DEFAULT_BATCH, IndexReport, Progress, check_supplied_vector

Conn = psycopg.Connection[Any]


def _all_records(sources: Sequence[Source]) -> Iterator[tuple[str, ChunkRecord]]:
    for source in sources:
        yield from source.records()


TextCheck = Callable[[str, str], None]


def validate_sources(
    sources: Sequence[Source], family: Family | None = None, *, check_text: TextCheck | None = None
) -> int:
    """Read every source whole and return the record count; InvalidInput names the first bad record,
    ModelMismatch a precomputed vector that does not fit ``family``. ``check_text(where, text)`` is called
    for texts over :data:`~ragstore.ingest.records.FTS_SAFE_BYTES` (see :func:`fts_size_check`).

    Nothing is written before this returns, so a bad line 900,000 leaves the store as it was.
    """
    count = 0
    for where, record in _all_records(sources):
        if family is not None:
            check_supplied_vector(where, record, family)
        if check_text is not None and len(record.text) * 4 > FTS_SAFE_BYTES:
            if len(record.text.encode("utf-8")) > FTS_SAFE_BYTES:
                check_text(where, record.text)
        count += 1
    return count


def fts_size_check(conn: Conn, config: str) -> TextCheck:
    """A ``check_text`` for :func:`validate_sources`: the database computes the text's tsvector with the
    family's configuration (nothing is stored) and InvalidInput names ``where`` when it is over
    PostgreSQL's 1 MB limit, which would otherwise fail the write of that batch."""

    def check(where: str, text: str) -> None:
        try:
            with db_errors(), conn.transaction():
                conn.execute("SELECT length(to_tsvector(%s::regconfig, %s))", (config, text))
        except RagstoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, psycopg.errors.ProgramLimitExceeded):
                raise InvalidInput(
                    f"{where}: text: {cause.diag.message_primary}: PostgreSQL's full-text vector holds at most "
                    "1 MB; split the text into smaller chunks"
                ) from exc
            raise

    return check


def index_sources(
    conn: Conn,
    family_name: str,
    sources: Sequence[Source],
    *,
    prune: bool = False,
    batch_size: int = DEFAULT_BATCH,
    backend: Backend | None = None,
    progress: Progress | None = None,
    on_validated: Callable[[int], None] | None = None,
    connections: int = 2,
    lender: Lender | None = None,
    replace_root: bool = False,
    chunk_tokens: int | None = None,
    overlap: int = 0,
    caches: Caches | None = None,
) -> IndexReport:
    """Index ``sources`` into family ``family_name``. Raises NotFound, InvalidInput, ModelMismatch,
    Conflict, DatabaseUnavailable.

    The prefixes of folders and documents belong to one root each (:mod:`ragstore.ingest.roots`): a run
    whose prefix was last written from another root is refused (Conflict) before anything is written,
    unless ``replace_root`` takes it over; the report's ``sources`` says which prefix and root it wrote.

    One pass reads every record once (:mod:`ragstore.ingest.fast`): a record whose input bytes are those
    a stored chunk was written from is unchanged and goes no further; every other record is parsed and
    validated against the limits the database would enforce (identifier bytes, the full-text vector's
    size, the family's text-search configuration, the vectors' dimension and float32 values) and kept in
    a private spool. Nothing is written before the whole input is valid, so bad input writes nothing.
    The kept records are then written in batches, each committed whole: should the database fail later
    (connection lost, disk full, a deadlock past its retries), the batches committed before stay
    committed and whole, the others are absent, and a rerun of the same input converges.

    Documents are chunked in ``window_for(backend, chunk_tokens, overlap)``
    (:func:`~ragstore.ingest.chunker.window_for`): the model's word pieces where the backend counts them,
    at most ``chunk_tokens``, else ``chunk_tokens`` characters; each chunk after a section's first starts
    with about ``overlap`` of them from the chunk before. A text the model would cut (a JSONL record longer
    than its window) is embedded from its start and counted, and named, in the report's ``truncated``.

    The report's ``skipped`` counts blank texts and empty documents; its ``skipped_files`` lists the files
    the sources left out, and why; its ``documents`` the documents read, each with its reader's name.
    ``batch_size`` is the write batch (the pass batches by :data:`~ragstore.ingest.fast.PASS_BATCH`).

    With ``connections=2`` (the default) batches that are each their own transaction are written on two
    connections at once (:mod:`ragstore.ingest.parallel`): ``conn`` and one ``lender`` gives, by default
    a second connection opened like ``conn`` (:func:`~ragstore.db.connection.second_connection`); a run
    goes on with ``conn`` alone when it cannot have one. ``connections=1`` writes on ``conn`` only.

    With no ``backend`` the family's is taken from ``caches`` (a Store passes its own, so its runs make
    the backend once), by default those of ``conn`` (:func:`~ragstore.caches.caches_for`).
    """
    from ragstore.ingest.fast import raw_lines
    from ragstore.ingest.writer import write_prepared

    family = get_family(conn, family_name)
    roots = roots_of(sources)
    chosen = backend or backend_for(family, caches if caches is not None else caches_for(conn))
    family.check_backend(chosen)
    if chunk_tokens is not None and chunk_tokens < 1:
        raise InvalidInput(f"--chunk-tokens (chunk_tokens=) {chunk_tokens}: must be at least 1")
    try:
        window = window_for(chosen, chunk_tokens, overlap, title_prefix_of(family))
    except ValueError as exc:
        raise InvalidInput(f"--overlap (overlap=) {overlap}: {exc}") from None
    for source in sources:
        source.window = window  # documents are chunked in the model's own tokens where it has them
    config = check_fts_config(conn, family.fts_config)
    conn.commit()
    check_roots(conn, family_name, roots, replace=replace_root)
    prefixes = [prefix for source in sources for prefix in source.prefixes]
    with Spool() as spool:
        one = OnePass(conn, family, config, spool, fts_size_check(conn, config))
        one.batch = batch_size
        # Only JSONL is streamed: the Parquet pass holds the interpreter in long pyarrow and numpy calls,
        # which starve the writer thread (measured: a streamed Parquet first load was slower, not faster).
        jsonl_only = all(s.lines is not None or s.kind in ("jsonl", "stdin") for s in sources)
        stream = BulkStream.attach(conn, family, chosen, config, one) if jsonl_only else None
        try:
            for source in sources:
                if source.lines is not None:
                    one.jsonl(source.lines)
                elif source.kind in ("jsonl", "stdin") and source.path is not None:
                    one.jsonl(raw_lines(source.path, source.label))
                elif source.kind in COLUMNAR_KINDS:
                    read_columnar(source, one)
                else:
                    one.records(source.records())
        except BaseException:
            one.close()
            if stream is not None:
                stream.abort()
            raise
        one.close()
        found = one.result
        if on_validated is not None:
            on_validated(found.total)
        # Folders and documents are never streamed: nothing is written before their prefixes are claimed.
        assert not (roots and stream is not None and stream.started)
        claimed = claim_roots(conn, family_name, roots, replace=replace_root)
        documents = sorted(set().union(*(source.documents for source in sources)))
        _seed_moved_documents(conn, family, chosen, documents)
        streamed = None
        if stream is not None and stream.started:
            streamed = stream.finish(found, prune=prune, prune_prefixes=prefixes, progress=progress)
        report = streamed or write_prepared(
            conn,
            family,
            chosen,
            spool.read(),
            found,
            prune=prune,
            prune_prefixes=prefixes,
            progress=progress,
            fts_config=config,
            batch_size=batch_size,
            documents=documents,
            second=(lender or (lambda: second_connection(conn))) if connections >= 2 else None,
        )
    # An empty document yields no record for the writer to count: it is counted here, with the blank texts.
    report.skipped_files = skipped_files(sources)
    report.documents = {package: reader for source in sources for package, reader in source.documents.items()}
    report.skipped += sum(1 for item in report.skipped_files if item.reason == EMPTY)
    report.sources = claimed
    return report


def _seed_moved_documents(conn: Conn, family: Family, backend: Backend, documents: list[str]) -> None:
    """Documents still stored under positional ids (``<package>#<n>``, before ids were anchored in
    content) have their vectors put in the embedding cache first: moving them embeds nothing."""
    if not documents or not uses_cache(backend):
        return
    with db_errors():
        seed_from_positional_ids(conn, cache_key(backend), family.name, family.table, family.model, documents)
        conn.commit()


class RecordOptions(TypedDict, total=False):
    """Options of :func:`index_records`: ``prune``, ``backend`` (else the family's), ``progress``."""

    prune: bool
    backend: Backend | None
    progress: Progress | None


def index_records(
    conn: Conn, family_name: str, records: Iterable[ChunkRecord | Mapping[str, Any]], **options: Unpack[RecordOptions]
) -> IndexReport:
    """Index records a program built (``ChunkRecord``s, or dicts with ``chunk_id``, ``package_path``,
    ``text`` and optionally ``metadata``, ``vector``, ``model``) on ``conn``: what ``Store.index`` runs on a
    pooled connection. Each record is read by the one pass as the JSON line a file would hold
    (:mod:`ragstore.ingest.programs`), named ``record N`` (from 1) in messages: an unchanged record costs
    the hash of its bytes; nothing is written if one does not fit. ``prune`` deletes the family's chunks of
    the packages the records name that they no longer hold."""
    from ragstore.ingest.programs import records_source

    return index_sources(
        conn,
        family_name,
        [records_source(records)],
        prune=options.get("prune", False),
        backend=options.get("backend"),
        progress=options.get("progress"),
    )


def write_records(
    conn: Conn,
    family: Family,
    backend: Backend | None,
    records: Iterable[tuple[str, ChunkRecord]],
    *,
    batch_size: int = DEFAULT_BATCH,
    prune: bool = False,
    progress: Progress | None = None,
) -> IndexReport:
    """Write ``(where, record)`` pairs into ``family`` by the path of ``ragstore index`` (:func:`index_sources`:
    the one pass, then the write): each record read as the JSON line a file would hold, named ``where`` in
    messages; nothing is written if one does not fit. ``backend`` embeds (else the family's)."""
    from ragstore.ingest.programs import named_records_source

    source = named_records_source(records)
    return index_sources(
        conn, family.name, [source], prune=prune, batch_size=batch_size, backend=backend, progress=progress
    )


def skipped_files(sources: Sequence[Source]) -> list[Skipped]:
    """The files the last read of ``sources`` did not index, with the reason (see :class:`Source`)."""
    return [item for source in sources for item in source.skipped]
