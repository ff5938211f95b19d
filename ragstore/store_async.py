"""``AsyncStore``: ragstore for asyncio applications, on ``psycopg_pool.AsyncConnectionPool``.

The same methods as :class:`ragstore.Store`, as coroutines, with the same arguments, results, errors and
guarantees. How each runs:

- ``search`` in ``hnsw`` mode (and ``auto`` with a vector) runs on the event loop over the async pool:
  the family lookup, the filter estimate, the one search statement, and the exact redo of a short
  iterative scan are awaited, never blocking the loop; a text query is embedded in a worker thread
  (``asyncio.to_thread``);
- the other modes (``exact``'s numpy scoring, ``fts``, ``hybrid``, ``rerank="mmr"``) and every other
  method (``index``, ``migrate``, ``eval``, ...) run the synchronous implementation in a worker thread on a
  connection of a small synchronous pool of ``worker_pool_size`` connections.

At most ``pool_size + worker_pool_size`` connections are open at any time. The two pools share one
:class:`~ragstore.caches.Caches`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, Unpack, cast

import psycopg

from ragstore.db.connection import connection_lost
from ragstore.errors import DatabaseUnavailable, InvalidInput
from ragstore.store import CLOSED, Memory, PoolOptions, PoolSettings, Store, quiet_socket

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from ragstore.caches import Caches
    from ragstore.context.models import ContextPack
    from ragstore.embed.base import Backend
    from ragstore.evaluation.datasets import Qrels, Query
    from ragstore.evaluation.runner import EvalResult, ModeSpec
    from ragstore.families import Family, FamilyStats
    from ragstore.families.chunks import ChunkPage, DeleteReport, ExportReport, GetResult
    from ragstore.families.filter_keys import FilterKey
    from ragstore.families.vacuum import VacuumReport
    from ragstore.ingest.records import ChunkRecord
    from ragstore.ingest.roots import SourceRow
    from ragstore.ingest.writer import IndexReport
    from ragstore.migrate import MigrationResult
    from ragstore.search.recall import RecallReport
    from ragstore.search.request import Hit
    from ragstore.sync.sources import SyncSource
    from ragstore.sync.worker import RunReport

AConn = psycopg.AsyncConnection[Any]
P = ParamSpec("P")
R = TypeVar("R")
# The arguments of a search that take it off the event loop when given: a second stage (MMR, a cross
# reranker, HyDE) or a fusion override, which the synchronous implementation runs in a worker thread.
_SECOND_STAGE = ("rerank", "fusion", "alpha", "reranker", "rerank_depth", "hyde")


def _coroutine_of(
    model: Callable[Concatenate[Store, P], R],
) -> Callable[[Callable[..., Awaitable[R]]], Callable[Concatenate[AsyncStore, P], Coroutine[Any, Any, R]]]:
    """Give the decorated coroutine method ``model``'s parameters (for type checkers, help() and IDEs) and
    say in its docstring that it is ``model`` as a coroutine: the arguments are defined once, in ``model``."""

    def decorate(fn: Callable[..., Awaitable[R]]) -> Callable[Concatenate[AsyncStore, P], Coroutine[Any, Any, R]]:
        fn.__signature__ = inspect.signature(model)  # type: ignore[attr-defined]
        fn.__doc__ = f":meth:`Store.{model.__name__}` as a coroutine (the same arguments, results and errors)."
        return cast("Callable[Concatenate[AsyncStore, P], Coroutine[Any, Any, R]]", fn)

    return decorate


def _in_thread(
    model: Callable[Concatenate[Store, P], R],
) -> Callable[Concatenate[AsyncStore, P], Coroutine[Any, Any, R]]:
    """``model`` (a Store method) as an AsyncStore coroutine that runs it in a worker thread on the worker
    pool: its parameters, result and errors, defined once, in ``model``."""
    name = model.__name__

    async def method(self: AsyncStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        call: Callable[P, R] = getattr(self.store, name)
        return await asyncio.to_thread(call, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.signature(model)  # type: ignore[attr-defined]
    method.__doc__ = f":meth:`Store.{name}` as a coroutine, in a worker thread (the same arguments, results, errors)."
    return method


def _memory_in_thread(
    model: Callable[Concatenate[Memory, P], R],
) -> Callable[Concatenate[AsyncMemory, P], Coroutine[Any, Any, R]]:
    """``model`` (a :class:`~ragstore.store.Memory` method) as an AsyncMemory coroutine, in a worker thread."""
    name = model.__name__

    async def method(self: AsyncMemory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        call: Callable[P, R] = getattr(self._store.store.memory, name)
        return await asyncio.to_thread(call, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.signature(model)  # type: ignore[attr-defined]
    method.__doc__ = f":meth:`Memory.{name}` as a coroutine, in a worker thread (the same arguments and results)."
    return method


async def _check_idle(conn: AConn) -> None:
    """:func:`ragstore.store.check_idle` of the async pool."""
    from psycopg_pool import AsyncConnectionPool

    if not quiet_socket(conn):
        await AsyncConnectionPool.check_connection(conn)


class AsyncStore:
    """ragstore on an asyncio connection pool; see the module docstring. Use ``async with`` (or
    ``await store.open()`` then ``await store.close()``)."""

    def __init__(self, dsn: str | None = None, *, worker_pool_size: int = 2, **options: Unpack[PoolOptions]) -> None:
        self._settings = PoolSettings(**options)
        if isinstance(worker_pool_size, bool) or not isinstance(worker_pool_size, int) or worker_pool_size < 1:
            raise InvalidInput(f"worker_pool_size must be an integer of at least 1, got {worker_pool_size!r}")
        # The worker pool runs what leaves the event loop (embedding, the numpy exact path, ingest).
        self._workers = PoolSettings(
            pool_size=worker_pool_size,
            min_size=0,
            timeout=self._settings.timeout,
            application_name=self._settings.application_name,
            recover=self._settings.recover,
        )
        self._timeout = self._settings.timeout
        self._dsn = dsn
        self._sync: Store | None = None
        self._pool: AsyncConnectionPool[AConn] | None = None
        self._closed = False
        self.pool_size = self._settings.pool_size

    @classmethod
    async def embedded(cls, home: str | Path | None = None, **options: Any) -> AsyncStore:
        """An opened AsyncStore on the embedded PostgreSQL (started if needed, in a worker thread)."""
        from ragstore.embedded import start

        dsn = await asyncio.to_thread(start, home)
        store = cls(dsn, **options)
        await store.open()
        return store

    async def open(self) -> AsyncStore:
        """Open both pools (DatabaseUnavailable when the database does not answer within ``timeout``)."""
        from psycopg_pool import AsyncConnectionPool, PoolTimeout

        from ragstore.db.connection import mask_dsn, statement_timeout

        if self._pool is not None:
            return self
        workers = self._workers
        sync = await asyncio.to_thread(
            Store,
            self._dsn,
            pool_size=workers.pool_size,
            min_size=workers.min_size,
            timeout=workers.timeout,
            application_name=workers.application_name,
            recover=workers.recover,
        )
        timeout_ms = statement_timeout()

        async def configure(conn: AConn) -> None:
            await conn.set_autocommit(True)
            await _register_vector_async(conn)
            if timeout_ms is not None:
                await conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout_ms,))

        settings = self._settings
        pool: AsyncConnectionPool[AConn] = AsyncConnectionPool(
            sync.dsn,
            configure=configure,
            open=False,
            name=f"{settings.application_name}-async",
            check=_check_idle if settings.recover else None,
            **settings.pool_kwargs(),
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except PoolTimeout as exc:
            await pool.close()
            sync.close()
            raise DatabaseUnavailable(f"cannot connect to {mask_dsn(sync.dsn)}: {exc}") from exc
        self._sync, self._pool = sync, pool
        self._closed = False
        return self

    async def close(self) -> None:
        """Close both pools (idempotent)."""
        pool, sync = self._pool, self._sync
        self._pool, self._sync = None, None
        self._closed = True
        if pool is not None:
            await pool.close()
        if sync is not None:
            await asyncio.to_thread(sync.close)

    async def __aenter__(self) -> AsyncStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def store(self) -> Store:
        """The synchronous Store behind the worker-thread methods (its pool is ``worker_pool_size``)."""
        if self._sync is None:
            raise DatabaseUnavailable(self._not_open())
        return self._sync

    def _not_open(self) -> str:
        if self._closed:
            return CLOSED.format(what="AsyncStore")
        return "the AsyncStore is not open: use `async with AsyncStore(...)` or await open()"

    @property
    def caches(self) -> Caches:
        return self.store.caches

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AConn]:
        """An async connection of the pool (autocommit, pgvector types registered) for the block."""
        from psycopg_pool import PoolTimeout

        if self._pool is None:
            raise DatabaseUnavailable(self._not_open())
        try:
            async with self._pool.connection(timeout=self._timeout) as conn:
                yield conn
        except PoolTimeout as exc:
            raise DatabaseUnavailable(f"no connection of the async pool ({self.pool_size}) was free: {exc}") from exc

    async def read(self, fn: Callable[[AConn], Awaitable[R]]) -> R:
        """``await fn(conn)`` on a connection of the async pool, for a read that may run twice: as
        :meth:`Store.read`, a connection of a recovering pool that breaks under it is discarded with the
        pools' idle connections, and ``fn`` runs once more on a new one."""
        try:
            async with self.connection() as conn:
                return await fn(conn)
        except (psycopg.Error, DatabaseUnavailable) as exc:
            if not (self._settings.recover and connection_lost(exc)):
                raise
        await self._drain()
        async with self.connection() as conn:
            return await fn(conn)

    async def _drain(self) -> None:
        """Close the idle connections of both pools (the lent ones when they come back): after a lost
        connection, those made before the loss are lost too."""
        if self._pool is not None:
            await self._pool.drain()
        if self._sync is not None:
            await asyncio.to_thread(self._sync._pool.drain)

    # -- the methods run in a worker thread ------------------------------------------------------
    async def migrate(self) -> MigrationResult:
        """:meth:`Store.migrate` in a worker thread (Alembic is synchronous); drains the async pool after a change."""
        result = await asyncio.to_thread(self.store.migrate)
        if result.changed and self._pool is not None:
            await self._pool.drain()
        return result

    async def create_family(self, name: str, backend: str | Backend | None = None, **options: Any) -> Family:
        """:meth:`Store.create_family` in a worker thread (the DDL and the backend check are the sync path's)."""
        return await asyncio.to_thread(self.store.create_family, name, backend, **options)

    async def family(self, name: str) -> Family:
        """:meth:`Store.family` on the event loop: the family's row, awaited."""
        return await self.read(lambda conn: _fresh_family(conn, self.store.caches, name))

    async def families(self) -> list[Family]:
        """:meth:`Store.families` in a worker thread."""
        return await asyncio.to_thread(self.store.families)

    async def family_stats(self, name: str) -> FamilyStats:
        """:meth:`Store.family_stats` in a worker thread."""
        return await asyncio.to_thread(self.store.family_stats, name)

    async def drop_family(self, name: str) -> None:
        """:meth:`Store.drop_family` in a worker thread."""
        await asyncio.to_thread(self.store.drop_family, name)

    async def vacuum(self, family: str | None = None, *, full: bool = False) -> VacuumReport:
        """:meth:`Store.vacuum` in a worker thread."""
        return await asyncio.to_thread(self.store.vacuum, family, full=full)

    async def add_filter_key(self, family: str, key: str, *, covering: bool = False) -> Family:
        """:meth:`Store.add_filter_key` in a worker thread (the index is built concurrently there)."""
        return await asyncio.to_thread(self.store.add_filter_key, family, key, covering=covering)

    async def remove_filter_key(self, family: str, key: str) -> Family:
        """:meth:`Store.remove_filter_key` in a worker thread."""
        return await asyncio.to_thread(self.store.remove_filter_key, family, key)

    async def filter_keys(self, family: str) -> list[FilterKey]:
        """:meth:`Store.filter_keys` in a worker thread."""
        return await asyncio.to_thread(self.store.filter_keys, family)

    async def index(
        self, records: Iterable[ChunkRecord | Mapping[str, Any]], family: str, **options: Any
    ) -> IndexReport:
        """:meth:`Store.index` in a worker thread (the iterable is read there: pass a list or a plain
        iterator, not an async one)."""
        return await asyncio.to_thread(self.store.index, records, family, **options)

    async def index_files(self, paths: Sequence[str | Path], family: str, **options: Any) -> IndexReport:
        """:meth:`Store.index_files` in a worker thread: the same options (``as_``/``name``,
        ``replace_root``, ``prune``...), the same refusal of a folder another root wrote."""
        return await asyncio.to_thread(self.store.index_files, paths, family, **options)

    async def sync_add(self, family: str, table: str, **options: Any) -> tuple[SyncSource, int]:
        """:meth:`Store.sync_add` in a worker thread."""
        return await asyncio.to_thread(self.store.sync_add, family, table, **options)

    async def sync_alter(self, family: str, table: str, **changes: Any) -> tuple[SyncSource, int]:
        """:meth:`Store.sync_alter` in a worker thread."""
        return await asyncio.to_thread(self.store.sync_alter, family, table, **changes)

    async def sync_list(self, families: Sequence[str] | None = None) -> list[SyncSource]:
        """:meth:`Store.sync_list` in a worker thread."""
        return await asyncio.to_thread(self.store.sync_list, families)

    async def sync_show(self, family: str, table: str) -> dict[str, Any]:
        """:meth:`Store.sync_show` in a worker thread."""
        return await asyncio.to_thread(self.store.sync_show, family, table)

    async def sync_remove(self, family: str, table: str, *, delete_chunks: bool = False) -> tuple[SyncSource, int]:
        """:meth:`Store.sync_remove` in a worker thread."""
        return await asyncio.to_thread(self.store.sync_remove, family, table, delete_chunks=delete_chunks)

    async def sync_run(self, families: Sequence[str] | None = None, **options: Any) -> RunReport:
        """:meth:`Store.sync_run` in a worker thread (its workers open connections of their own)."""
        return await asyncio.to_thread(self.store.sync_run, families, **options)

    async def sync_status(self) -> list[dict[str, Any]]:
        """:meth:`Store.sync_status` in a worker thread."""
        return await asyncio.to_thread(self.store.sync_status)

    async def delete(self, family: str, **options: Any) -> DeleteReport:
        """:meth:`Store.delete` in a worker thread (the delete, its lock and the index upkeep are the sync
        path's)."""
        return await asyncio.to_thread(self.store.delete, family, **options)

    async def export(self, family: str, path: Any, **options: Any) -> ExportReport:
        """:meth:`Store.export` in a worker thread (it streams to a file or a binary stream)."""
        return await asyncio.to_thread(self.store.export, family, path, **options)

    async def get(self, family: str, ids: Sequence[str], *, vectors: bool = False) -> GetResult:
        """:meth:`Store.get` on the event loop: the same statement, awaited."""
        from ragstore.families import chunks

        chosen = chunks.check_ids(ids)

        async def read(conn: AConn) -> GetResult:
            fam = await _fresh_family(conn, self.store.caches, family)
            statement, params = chunks.get_statement(fam, chosen)
            return chunks.read_get(fam, chosen, await _rows(conn, statement, params), vectors)

        return await self.read(read)

    async def list_chunks(
        self, family: str, *, package: str | None = None, limit: int = 100, after: str | None = None
    ) -> ChunkPage:
        """:meth:`Store.list_chunks` on the event loop: the page and its counts in one snapshot."""
        from ragstore.db.sqlfiles import query
        from ragstore.errors import NotFound
        from ragstore.families import chunks

        async with self.connection() as conn:
            fam = await _fresh_family(conn, self.store.caches, family)
            params = chunks.list_params(fam.name, package, limit, after)
            statements = [(query("chunks", name), params) for name in ("chunk_exists", "list_chunks", "count_chunks")]
            exists, rows, counts = await _pipelined(conn, statements)
        if after is not None and not exists[0][0]:
            raise NotFound(f"family {fam.name!r} holds no chunk {after!r} to list after")
        return chunks.read_page(fam.name, package, params, rows, counts[0])

    async def sources(self, family: str) -> list[SourceRow]:
        """:meth:`Store.sources`: the source registry of ``family``."""
        return await asyncio.to_thread(self.store.sources, family)

    async def check_recall(self, family: str, **options: Any) -> RecallReport:
        """:meth:`Store.check_recall` in a worker thread (it times the sync paths it measures)."""
        return await asyncio.to_thread(self.store.check_recall, family, **options)

    async def eval(
        self,
        family: str,
        queries: Sequence[Query],
        qrels: Qrels,
        modes: Sequence[ModeSpec] | None = None,
        **options: Any,
    ) -> EvalResult:
        """:meth:`Store.eval` in a worker thread (it times the sync search paths it scores)."""
        return await asyncio.to_thread(self.store.eval, family, queries, qrels, modes, **options)

    async def context_pack(self, **options: Any) -> ContextPack:
        """:meth:`Store.context_pack` in a worker thread (it reads files from disk)."""
        return await asyncio.to_thread(self.store.context_pack, **options)

    @property
    def memory(self) -> AsyncMemory:
        """Agent memory as coroutines (see :class:`AsyncMemory`)."""
        return AsyncMemory(self)

    # -- parity with the command line -------------------------------------------------------------
    # Each runs the Store method in a worker thread: every one is a synchronous code path (Alembic, the
    # tuning's numpy grid over searches, re-embedding and index builds, embedding models, file reads, the
    # token and storage statements of sync library functions), and a native version would copy its
    # statements here; AsyncStore keeps no logic of its own.
    migration_status = _in_thread(Store.migration_status)
    tune_family = _in_thread(Store.tune_family)
    reset_fusion = _in_thread(Store.reset_fusion)
    migrate_family = _in_thread(Store.migrate_family)
    plan_family_migration = _in_thread(Store.plan_family_migration)
    abort_family_migration = _in_thread(Store.abort_family_migration)
    migrate_storage = _in_thread(Store.migrate_storage)
    embedder = _in_thread(Store.embedder)
    embed = _in_thread(Store.embed)
    similarity = _in_thread(Store.similarity)
    rank = _in_thread(Store.rank)
    verify_pack = _in_thread(Store.verify_pack)
    explain = _in_thread(Store.explain)
    sweep_recall = _in_thread(Store.sweep_recall)
    create_token = _in_thread(Store.create_token)
    tokens = _in_thread(Store.tokens)
    revoke_token = _in_thread(Store.revoke_token)
    # -- end of the parity block --------------------------------------------------------------------

    # -- search ----------------------------------------------------------------------------------
    @_coroutine_of(Store.search)
    async def search(self, family: str, query: str | None = None, **options: Any) -> list[Hit]:
        """:meth:`Store.search` on the event loop: the same request and plan
        (:func:`ragstore.search.plan.plan_search`), run by the async driver."""
        import warnings

        from ragstore.errors import FingerprintVectorsWarning
        from ragstore.search import drive_async
        from ragstore.search.plan import Answer, plan_search
        from ragstore.search.request import SearchRequest

        caches = options.pop("caches", None) or self.store.caches
        request = SearchRequest.of(family, query, **options)

        async def attempt() -> Answer:
            async with self.connection() as conn:
                plan = plan_search(request, caches, await drive_async.dialect_of(conn))
                return await drive_async.run(conn, plan, self._blocking)

        try:
            answer = await attempt()
        except (psycopg.Error, DatabaseUnavailable) as exc:
            # As read(): a lost connection (of either pool: a mode's step may run in a worker thread)
            # discards the idle ones, and the search runs once more.
            if not (self._settings.recover and connection_lost(exc)):
                raise
            await self._drain()
            answer = await attempt()
        if answer.note is not None:
            warnings.warn(FingerprintVectorsWarning(answer.note), stacklevel=2)
        return answer.hits

    async def _blocking(self, fn: Callable[[psycopg.Connection[Any]], R]) -> R:
        """``fn(conn)`` in a worker thread, on a connection of the worker pool."""

        def call() -> R:
            with self.store.connection() as conn:
                return fn(conn)

        return await asyncio.to_thread(call)


class AsyncMemory:
    """:class:`ragstore.store.Memory` as coroutines (each call in a worker thread)."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store

    async def add(self, records: Iterable[Any], **options: Any) -> Any:
        """:meth:`Memory.add` in a worker thread."""
        return await asyncio.to_thread(self._store.store.memory.add, list(records), **options)

    async def compose(self, profile: Any, **options: Any) -> Any:
        """:meth:`Memory.compose` in a worker thread."""
        return await asyncio.to_thread(self._store.store.memory.compose, profile, **options)

    async def recall(self, profile: Any, query: str, k: int = 8, **options: Any) -> Any:
        """:meth:`Memory.recall` in a worker thread."""
        return await asyncio.to_thread(self._store.store.memory.recall, profile, query, k, **options)

    async def forget(self, agent: str, record_id: str, reason: str) -> Any:
        """:meth:`Memory.forget` in a worker thread."""
        return await asyncio.to_thread(self._store.store.memory.forget, agent, record_id, reason)

    # -- parity with the command line (ragstore memory import|grant|revoke|principals) -------------
    import_file = _memory_in_thread(Memory.import_file)
    grant = _memory_in_thread(Memory.grant)
    revoke = _memory_in_thread(Memory.revoke)
    principals = _memory_in_thread(Memory.principals)
    layers = _memory_in_thread(Memory.layers)


async def _register_vector_async(conn: AConn) -> None:
    from pgvector.psycopg import register_vector_async

    with contextlib.suppress(psycopg.ProgrammingError):  # before `migrate` there is no vector type yet
        await register_vector_async(conn)


async def _rows(conn: AConn, statement: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """One statement in autocommit (its own transaction: a transaction-local setting ends with it)."""
    from ragstore.db.connection import db_errors

    with db_errors():
        cur = await conn.execute(statement, params, binary=True)
        return await cur.fetchall()


async def _pipelined(conn: AConn, statements: Sequence[tuple[Any, dict[str, Any]]]) -> list[list[tuple[Any, ...]]]:
    """Read-only ``statements`` in ONE round trip (a pipeline: in autocommit they share one implicit
    transaction, ended by its sync), the rows of each; the mapped RagstoreError of a failing one."""
    from ragstore.db.connection import map_db_error

    # As in ragstore.db.connection.run_isolated: an error raised inside the pipeline block is kept and the
    # block ends normally (psycopg would otherwise log "error ignored terminating" on the exit's sync).
    first: psycopg.Error | None = None
    cursors: list[psycopg.AsyncCursor[Any]] = []
    try:
        async with conn.pipeline():
            try:
                for statement, params in statements:
                    cursors.append(await conn.execute(statement, params))
            except psycopg.Error as exc:
                first = exc
        if first is None:
            return [await cur.fetchall() for cur in cursors]
    except psycopg.Error as exc:
        first = first or exc
    map_db_error(first)


async def _fresh_family(conn: AConn, caches: Caches, name: str) -> Family:
    from ragstore.db.connection import db_errors
    from ragstore.families import GET_FAMILY, check_name, family_not_found, row_to_family

    check_name(name)
    with db_errors():
        cur = await conn.execute(GET_FAMILY, {"name": name})
        row = await cur.fetchone()
    if row is None:
        raise family_not_found(name)
    fam = row_to_family(row)
    caches.remember_family(fam)
    return fam
