"""``ragstore index`` as one library call: validate every input whole, then write it batch by batch."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg

from ragstore.embed.base import Backend
from ragstore.families import Family, get_family
from ragstore.ingest.readers import EMPTY, Skipped, Source
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.writer import DEFAULT_BATCH, IndexReport, Progress, check_supplied_vector, write_records

Conn = psycopg.Connection[Any]


_BACKENDS: dict[str, Backend] = {}


def backend_for(family: Family) -> Backend:
    """The backend that built ``family``, configured from the options the family recorded.

    Backends are kept per process and configuration: a search must not pay for a new model session or
    HTTP client (tens of milliseconds) on every query.
    """
    from ragstore.embed.registry import make_backend

    # fts_config belongs to the chunks; target is a model migration in progress (ragstore.family_migrate).
    options = {k: v for k, v in family.options.items() if k not in {"fts_config", "target"}}
    key = json.dumps([family.backend, family.model, family.dim, options], sort_keys=True, default=str)
    backend = _BACKENDS.get(key)
    if backend is None:
        backend = make_backend(family.backend, model=family.model, dim=family.dim, **options)
        family.check_backend(backend)
        _BACKENDS[key] = backend
    return backend


def _all_records(sources: Sequence[Source]) -> Iterator[tuple[str, ChunkRecord]]:
    for source in sources:
        yield from source.records()


def validate_sources(sources: Sequence[Source], family: Family | None = None) -> int:
    """Read every source whole and return the record count; InvalidInput names the first bad record,
    ModelMismatch a precomputed vector that does not fit ``family``.

    Nothing is written before this returns, so a bad line 900,000 leaves the store as it was.
    """
    count = 0
    for where, record in _all_records(sources):
        if family is not None:
            check_supplied_vector(where, record, family)
        count += 1
    return count


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
) -> IndexReport:
    """Index ``sources`` into family ``family_name``. Raises NotFound, InvalidInput, ModelMismatch,
    DatabaseUnavailable; whatever it raises, batches committed before stay committed and whole.

    The report's ``skipped`` counts blank texts and empty documents; :func:`skipped_files` lists the files
    the sources left out, and why."""
    family = get_family(conn, family_name)
    chosen = backend or backend_for(family)
    family.check_backend(chosen)
    total = validate_sources(sources, family)
    if on_validated is not None:
        on_validated(total)
    prefixes = [prefix for source in sources for prefix in source.prefixes]
    report = write_records(
        conn,
        family,
        chosen,
        _all_records(sources),
        batch_size=batch_size,
        expected=total,
        prune=prune,
        prune_prefixes=prefixes,
        progress=progress,
    )
    # An empty document yields no record for the writer to count: it is counted here, with the blank texts.
    report.skipped += sum(1 for item in skipped_files(sources) if item.reason == EMPTY)
    return report


def skipped_files(sources: Sequence[Source]) -> list[Skipped]:
    """The files the last read of ``sources`` did not index, with the reason (see :class:`Source`)."""
    return [item for source in sources for item in source.skipped]
