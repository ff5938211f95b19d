"""Family model migration: re-embed a family with another backend, model or dimension, then swap.

:func:`migrate_family` (behind ``ragstore family migrate``) promises:

1. pgvector's limits are checked before anything is written (:func:`ragstore.families.vector_type_for`);
2. the target is recorded in the registry (``state='migrating'``, ``options.target`` = backend, model,
   dim, vector type, table, backend options) and a new table ``emb_<name>_<8 hex>`` is created;
3. every chunk the old table holds is re-embedded (through the embedding cache) into the new table in
   batches, each committed: after a crash or ``kill -9`` a rerun with the same target resumes, skipping
   chunks the new table holds for the same text and package;
4. the HNSW index is built once, after the backfill; chunks changed meanwhile are caught up;
5. ONE transaction locks the registry row and the old table against writers, catches up the last
   changes, points the registry and the family's view (``ragstore.vectors_<name>``) at the new table
   (state 'ready'); the old table is dropped after it.

Queries are served by the old table until that commit: a reader resolving the table from the registry
per query never sees an empty or half-filled family (one that resolved the old name just before the swap
gets UndefinedTable, and re-resolving once answers it). ``ragstore index`` keeps writing to the serving
table; the catch-up carries its changes over (an index batch overlapping the swap fails; a rerun redoes it).
Errors: NotFound, InvalidInput (limits, nothing to change), Conflict (another migration of the family, or
another target), BackendError, DatabaseUnavailable.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ragstore.db import citus
from ragstore.db.connection import Conn, db_errors
from ragstore.db.dialect import dialect_of
from ragstore.db.sqlfiles import query
from ragstore.embed.base import Backend
from ragstore.embed.cache import UNCACHED_BACKENDS, cache_key, embed_cached, key_for, seed_from_family
from ragstore.errors import Conflict, InvalidInput
from ragstore.families import Family, filter_keys, get_family, vector_type_for
from ragstore.families import storage as storages
from ragstore.families.tables import create_view, ensure_hnsw_index, give_table_to_owner
from ragstore.ingest.records import check_matrix

Progress = Callable[[int], None]

DEFAULT_BATCH = 256
DRY_RUN_SAMPLE = 32
# Catch-up passes outside the swap's lock before the last one inside it: each pass shortens the next.
CATCH_UP_PASSES = 3
# The server ends a killed client's session (and its lock) a moment after the kill.
LOCK_PATIENCE = 5.0


@dataclass(frozen=True)
class Target:
    """Where a family is going: what ``options.target`` in the registry holds."""

    backend: str
    model: str
    dim: int
    vector_type: str
    table: str
    options: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def same_space(self, backend: Backend) -> bool:
        return (self.backend, self.model, self.dim) == (backend.name, backend.model, backend.dim)


@dataclass
class MigrationReport:
    """What a run did: rows written to the new table, texts sent to the backend, whether it swapped."""

    family: str
    source: str
    target: str
    table: str
    old_table: str = ""
    resumed: bool = False
    total: int = 0
    written: int = 0
    embedded: int = 0
    caught_up: int = 0
    swapped: bool = False
    old_table_dropped: bool = False
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        return data


@dataclass
class DryRunReport:
    """What a migration would cost: chunks to write, how many need the backend, the estimated time."""

    family: str
    source: str
    target: str
    chunks: int
    cached: int
    to_embed: int
    sample: int
    sample_seconds: float
    estimated_seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {k: round(getattr(self, k), 3) for k in ("sample_seconds", "estimated_seconds")}


def _space(backend: str, model: str, dim: int) -> str:
    return f"{backend}/{model} ({dim}-d)"


def _block(name: str, old: str, new: str = "") -> sql.Composed:
    """Block ``name`` for tables ``old`` and ``new``; ``{pending}`` is the pending filter, or nothing when
    there is no ``new`` table."""
    names = {"old": sql.Identifier(old), "new": sql.Identifier(new or old)}
    pending = sql.SQL(query("family_migrate", "pending_filter")).format(**names) if new else sql.SQL("")
    return sql.SQL(query("family_migrate", name)).format(pending=pending, **names)


def _target_of(family: Family) -> Target | None:
    raw = family.options.get("target")
    if family.state != "migrating" or not isinstance(raw, dict):
        return None
    return Target(**raw)


def _check_target(family: Family, backend: Backend, options: dict[str, Any]) -> Target:
    """The target for ``backend``: the recorded one when resuming, a new table name otherwise."""
    vector_type = vector_type_for(backend.dim)
    recorded = _target_of(family)
    if recorded is not None:
        if not recorded.same_space(backend):
            raise Conflict(
                f"family {family.name!r} is migrating to "
                f"{_space(recorded.backend, recorded.model, recorded.dim)}: rerun with that backend to finish, "
                f"or `ragstore family migrate {family.name} --abort`"
            )
        return recorded
    if (family.backend, family.model, family.dim) == (backend.name, backend.model, backend.dim):
        raise InvalidInput(
            f"family {family.name!r} already holds {_space(backend.name, backend.model, backend.dim)} vectors"
        )
    table = f"emb_{family.name}_{secrets.token_hex(4)}"
    return Target(backend.name, backend.model, backend.dim, vector_type, table, dict(options))


def _new_family(family: Family, target: Target) -> Family:
    return replace(
        family,
        backend=target.backend,
        model=target.model,
        dim=target.dim,
        vector_type=target.vector_type,
        table=target.table,
        state="ready",
    )


def dry_run(
    conn: Conn, name: str, backend: Backend, *, options: dict[str, Any] | None = None, sample: int = DRY_RUN_SAMPLE
) -> DryRunReport:
    """Count what migrating family ``name`` to ``backend`` would embed and time ``sample`` of those texts.

    Writes nothing; it does call the backend (``sample`` + 1 texts, the first one warms the model up).
    Raises what :func:`migrate_family` raises before it writes.
    """
    family = get_family(conn, name)
    target = _check_target(family, backend, options or {})
    key = cache_key(backend)
    with db_errors():
        exists = conn.execute("SELECT to_regclass(%s)", (f"ragstore.{target.table}",)).fetchone()
        if exists and exists[0] is not None:
            row = conn.execute(_block("count_todo", family.table, target.table), {"cache_key": key}).fetchone()
        else:
            row = conn.execute(_block("count_todo", family.table), {"cache_key": key}).fetchone()
        texts = [r[0] for r in conn.execute(_block("sample", family.table), {"cache_key": key, "limit": sample})]
        conn.rollback()
    assert row is not None
    chunks, cached = int(row[0]), int(row[1])
    if backend.name in UNCACHED_BACKENDS:
        cached = 0
    seconds = 0.0
    if texts:
        backend.embed(texts[:1])
        started = time.perf_counter()
        backend.embed(texts)
        seconds = time.perf_counter() - started
    to_embed = chunks - cached
    estimate = to_embed * seconds / len(texts) if texts else 0.0
    return DryRunReport(
        family=name,
        source=_space(family.backend, family.model, family.dim),
        target=_space(backend.name, backend.model, backend.dim),
        chunks=chunks,
        cached=cached,
        to_embed=to_embed,
        sample=len(texts),
        sample_seconds=seconds,
        estimated_seconds=estimate,
    )


def migrate_family(
    conn: Conn,
    name: str,
    backend: Backend,
    *,
    options: dict[str, Any] | None = None,
    batch_size: int = DEFAULT_BATCH,
    on_total: Progress | None = None,
    progress: Progress | None = None,
) -> MigrationReport:
    """Migrate family ``name`` to ``backend`` (``options``: its settings, recorded in the registry).

    See the module docstring for the steps and errors. ``on_total`` gets the number of chunks to write
    (once), ``progress`` the size of each committed batch. Resumes a migration to the same target.
    """
    if batch_size < 1:
        raise InvalidInput(f"batch_size must be at least 1, got {batch_size}")
    started = time.perf_counter()
    if not _try_lock(conn, name):
        raise Conflict(f"another `ragstore family migrate {name}` is running")
    try:
        report = _migrate(conn, name, backend, options or {}, batch_size, on_total, progress)
    finally:
        with db_errors():
            conn.rollback()
            conn.execute(query("family_migrate", "unlock"), {"name": name})
            conn.commit()
    report.seconds = time.perf_counter() - started
    return report


def _try_lock(conn: Conn, name: str, patience: float = LOCK_PATIENCE) -> bool:
    """Take the family's migration lock, waiting up to ``patience`` seconds for a killed run's to go."""

    def attempt() -> bool:
        with db_errors():
            row = conn.execute(query("family_migrate", "try_lock"), {"name": name}).fetchone()
            conn.commit()
        return bool(row and row[0])

    from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

    polling = Retrying(
        retry=retry_if_result(lambda taken: not taken),
        stop=stop_after_delay(patience),
        wait=wait_fixed(0.1),
        retry_error_callback=lambda _state: False,
    )
    return polling(attempt)


def _migrate(
    conn: Conn, name: str, backend: Backend, options: dict[str, Any], batch_size: int,
    on_total: Progress | None, progress: Progress | None,
) -> MigrationReport:  # fmt: skip
    family = get_family(conn, name)
    target = _check_target(family, backend, options)
    new = _new_family(family, target)
    report = MigrationReport(
        family=name,
        source=_space(family.backend, family.model, family.dim),
        target=_space(target.backend, target.model, target.dim),
        table=target.table,
        old_table=family.table,
        resumed=family.state == "migrating",
    )
    if not report.resumed:
        _begin(conn, family, new, target)
    if family.backend not in UNCACHED_BACKENDS:
        # Vectors the old table holds become cache entries: migrating back later costs nothing.
        with db_errors():
            base_url = family.options.get("base_url")
            key = key_for(family.backend, family.model, family.dim, base_url if isinstance(base_url, str) else None)
            seed_from_family(conn, key, family.table, family.model)
            conn.commit()
    with db_errors():
        conn.execute(query("ingest", "create_stage"))
        row = conn.execute(_block("count_todo", family.table, new.table), {"cache_key": ""}).fetchone()
        conn.commit()
    report.total = int(row[0]) if row else 0
    if on_total is not None:
        on_total(report.total)
    copier = _Copier(conn, family, new, backend, report)
    report.written += copier.run(batch_size, progress, commit=True)
    ensure_hnsw_index(conn, new)
    for _ in range(CATCH_UP_PASSES):
        caught = copier.run(batch_size, None, commit=True)
        report.caught_up += caught
        if caught <= batch_size:
            break
    _swap(conn, family, new, target, copier, batch_size)
    report.swapped = True
    return report


def _begin(conn: Conn, family: Family, new: Family, target: Target) -> None:
    ids = new.identifiers()
    conn.commit()  # end get_family's read: what follows is one transaction of its own
    with conn.transaction(), db_errors():
        cur = conn.execute(query("family_migrate", "begin"), {"name": family.name, "target": Jsonb(target.as_json())})
        if cur.rowcount != 1:
            raise Conflict(f"family {family.name!r} changed state while the migration started; rerun it")
        # The HNSW index comes after the backfill: building once beats maintaining it row by row. The
        # metadata indexes (GIN, and a btree per declared filter key) serve filtered searches from the swap.
        for block in ("create_table", "create_package_index", "create_metadata_index"):
            conn.execute(sql.SQL(query("families", block)).format(**ids))
        filter_keys.create_indexes(conn, new)
        if dialect_of(conn).lays_out:
            # Distributed and co-located like the old table: the backfill's joins and the swap's
            # catch-up run shard by shard, and the new shards sit on every worker.
            citus.distribute_family(conn, new.table)
        give_table_to_owner(conn, new)


class _Copier:
    """Re-embeds pending chunks of the old table into the new one, batch by batch."""

    def __init__(self, conn: Conn, old: Family, new: Family, backend: Backend, report: MigrationReport) -> None:
        self.conn = conn
        self.old = old
        self.new = new
        self.backend = backend
        self.report = report
        self._pending = _block("pending", old.table, new.table)
        from ragstore.ingest.writer import embedding_merge

        self._merge = embedding_merge(new)

    def _embed(self, texts: list[str]) -> Any:
        matrix = self.backend.embed(texts)
        check_matrix(matrix, rows=len(texts), dim=self.new.dim, model=self.backend.model, where="migration")
        return matrix

    def run(self, batch_size: int, progress: Progress | None, *, commit: bool) -> int:
        """Copy every pending chunk; with ``commit`` each batch is committed. Returns the rows written."""
        conn = self.conn
        after = ""
        written = 0
        while True:
            with db_errors():
                rows = conn.execute(self._pending, {"after": after, "limit": batch_size}).fetchall()
            if not rows:
                if commit:
                    conn.commit()
                break
            after = rows[-1][0]
            with db_errors():
                vectors, embedded = embed_cached(
                    conn, self.backend, [r[2] for r in rows], [bytes(r[3]) for r in rows], embed=self._embed
                )
                with conn.cursor() as cur:
                    cur.execute("TRUNCATE ragstore_stage_embeddings")
                    with cur.copy(query("ingest", "copy_embeddings")) as copy:
                        copy.set_types(["text", "text", "vector", "text", "bytea"])
                        for (chunk_id, package_path, _, digest), vector in zip(rows, vectors, strict=True):
                            copy.write_row((chunk_id, package_path, vector, self.new.model, bytes(digest)))
                    cur.execute(self._merge)
                if commit:
                    conn.commit()
            self.report.embedded += embedded
            written += len(rows)
            if progress is not None:
                progress(len(rows))
        return written


DROP_TRIES = 40
DROP_LOCK_TIMEOUT = "100ms"


def _swap(conn: Conn, old: Family, new: Family, target: Target, copier: _Copier, batch_size: int) -> None:
    options = dict(target.options) | filter_keys.kept_options(old, new) | storages.kept_options(old.options)
    if "fts_config" in old.options:
        options["fts_config"] = old.options["fts_config"]
    conn.commit()
    with conn.transaction(), db_errors():
        dialect_of(conn).registry_then_shards(
            conn
        )  # on Citus: the catch-up writes the new table's shards, then the registry
        row = conn.execute(query("family_migrate", "lock_family"), {"name": old.name}).fetchone()
        held = None if row is None else (row[1] or {}).get("target")
        if row is None or row[0] != "migrating" or held != target.as_json():
            raise Conflict(f"family {old.name!r} was changed by someone else during the migration; nothing swapped")
        conn.execute(_block("lock_old", old.table))
        copier.report.caught_up += copier.run(batch_size, None, commit=False)
        conn.execute(_block("drop_strays", old.table, new.table))
        conn.execute(
            query("family_migrate", "swap"),
            {
                "name": old.name,
                "backend": new.backend,
                "model": new.model,
                "dim": new.dim,
                "vector_type": new.vector_type,
                "table_name": new.table,
                "options": Jsonb(options),
            },
        )
        create_view(conn, new)  # ragstore.vectors_<name> reads the new table from this commit on
    # The old table goes in a transaction of its own: dropping it also locks ragstore.chunks (its foreign
    # key's triggers live there), which inside the swap would stall every reader and deadlock some.
    copier.report.old_table_dropped = _drop_old_table(conn, old.table)


def _drop_old_table(conn: Conn, table: str) -> bool:
    """Drop the swapped-out table, waiting at most ``DROP_LOCK_TIMEOUT`` each try so readers never stall
    long; False (the table left behind, harmless: nothing reads it) when every try found it busy."""

    def attempt() -> bool:
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = '{DROP_LOCK_TIMEOUT}'")
            conn.execute(_block("drop_table", table))
        return True

    from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

    tries = Retrying(
        retry=retry_if_exception_type((psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected)),
        stop=stop_after_attempt(DROP_TRIES),
        wait=wait_exponential(multiplier=0.01, max=1.0),
        retry_error_callback=lambda _state: False,
    )
    return tries(attempt)


def abort_migration(conn: Conn, name: str) -> Family:
    """Give up a migration of family ``name``: drop the table being built, back to 'ready' as it was.

    Raises NotFound, Conflict (no migration to abort, or one running now).
    """
    if not _try_lock(conn, name):
        raise Conflict(f"a `ragstore family migrate {name}` is running; stop it before aborting")
    try:
        family = get_family(conn, name)
        target = _target_of(family)
        if target is None:
            raise Conflict(f"family {name!r} is not migrating")
        conn.commit()
        with conn.transaction(), db_errors():
            conn.execute(_block("drop_table", target.table))
            conn.execute(query("family_migrate", "abort"), {"name": name})
    finally:
        with db_errors():
            conn.rollback()
            conn.execute(query("family_migrate", "unlock"), {"name": name})
            conn.commit()
    return get_family(conn, name)
