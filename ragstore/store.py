"""``Store``: ragstore for applications, on a pool of connections.

A :class:`Store` owns a ``psycopg_pool.ConnectionPool`` (pgvector's types registered and the
``RAGSTORE_STATEMENT_TIMEOUT`` applied to every connection it opens) and the :class:`~ragstore.caches.Caches`
its searches share (families, filter estimates, embedding backends). It is thread-safe: every call takes
a connection from the pool for its own duration, so any number of threads share one Store and no more
than ``pool_size`` connections are ever open. Its methods mirror the command line (``migrate``,
``create_family``, ``index``, ``search``, ``check_recall``, ``eval``, ``memory``, ``context_pack``) and
raise the same :class:`~ragstore.errors.RagstoreError` subclasses.

Where the database comes from is explicit: ``Store(dsn)``, else ``$RAGSTORE_DSN``; with neither,
``Store()`` refuses and names :meth:`Store.embedded`, which starts (or reuses) the embedded PostgreSQL
under ``$RAGSTORE_HOME``. Only the command line starts the embedded server on its own.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypedDict, TypeVar, Unpack, cast

import psycopg

from ragstore.caches import Caches, caches_for
from ragstore.common.closing import Closing
from ragstore.db.connection import NO_DATABASE as NO_DATABASE_OF
from ragstore.db.connection import connection_lost, given_dsn, mask_dsn, register_vector, statement_timeout
from ragstore.errors import DatabaseUnavailable, FingerprintVectorsWarning, InvalidInput, StorageRecallWarning
from ragstore.search import drive
from ragstore.search.api import search as _api_search
from ragstore.search.plan import Answer, learn_dialect, plan_search
from ragstore.search.request import Hit, SearchRequest

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from ragstore.context.models import ContextPack
    from ragstore.context.verify import VerifyReport
    from ragstore.db.dialect import Dialect
    from ragstore.embed.base import Backend
    from ragstore.embed.similarity import RankedText
    from ragstore.evaluation.datasets import Qrels, Query
    from ragstore.evaluation.runner import EvalResult, ModeSpec
    from ragstore.evaluation.tune import Tuned
    from ragstore.families import Family, FamilyStats
    from ragstore.families.chunks import ChunkPage, DeleteReport, ExportReport, GetResult
    from ragstore.families.filter_keys import FilterKey
    from ragstore.families.migrate import DryRunReport as FamilyMigrationPlan
    from ragstore.families.migrate import MigrationReport as FamilyMigration
    from ragstore.families.storage_migrate import StorageMigration
    from ragstore.families.vacuum import VacuumReport
    from ragstore.ingest.readers import Source
    from ragstore.ingest.records import ChunkRecord
    from ragstore.ingest.roots import SourceRow
    from ragstore.ingest.writer import IndexReport
    from ragstore.memory.models import AgentProfile, MemoryRecord
    from ragstore.memory.principals import Principal
    from ragstore.memory.recall import RecallResult
    from ragstore.memory.store import AddResult, ForgetResult
    from ragstore.migrate import MigrationResult, MigrationStatus
    from ragstore.search.recall import RecallReport
    from ragstore.search.rerank import Reranker
    from ragstore.serve.tokens import NewToken, TokenInfo
    from ragstore.sync.sources import SyncSource
    from ragstore.sync.worker import RunReport

Conn = psycopg.Connection[Any]
P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_POOL_SIZE = 10
DEFAULT_APPLICATION_NAME = "ragstore"
NO_DATABASE = NO_DATABASE_OF.format(door="Store", embedded="Store.embedded()")


def _dsn_or_refuse(dsn: str | None) -> str:
    return given_dsn(dsn, "Store", "Store.embedded()")


def check_pool_sizes(pool_size: int, min_size: int) -> None:
    """InvalidInput unless ``1 <= min_size <= pool_size`` (integers, not bools)."""
    for name, value in (("pool_size", pool_size), ("min_size", min_size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"{name} must be an integer, got {value!r}")
    if pool_size < 1:
        raise InvalidInput(f"pool_size must be at least 1, got {pool_size}")
    if not 0 <= min_size <= pool_size:
        raise InvalidInput(f"min_size must be between 0 and pool_size ({pool_size}), got {min_size}")


class PoolOptions(TypedDict, total=False):
    """The keyword options of :class:`Store` and :class:`~ragstore.AsyncStore` (defaults: :class:`PoolSettings`)."""

    pool_size: int
    min_size: int
    timeout: float
    application_name: str
    recover: bool


# How long a recovering pool (PoolSettings.recover) retries a lost database before the next call retries it.
RECONNECT_SECONDS = 1.0


@dataclass(frozen=True)
class PoolSettings:
    """A pool's settings, checked when made: at most ``pool_size`` connections, ``min_size`` kept open,
    ``timeout`` seconds to wait for a free connection (and for the first one when the pool opens), and the
    ``application_name`` its connections show in ``pg_stat_activity``. ``recover`` is for servers: every
    connection is checked before it is lent (:func:`check_idle`), so that one the database dropped while
    idle (a restart) is replaced instead of failing the call that gets it, and a pool that lost its database
    tries again every second instead of backing off for minutes, so that the first call after the database
    returns gets a connection."""

    pool_size: int = DEFAULT_POOL_SIZE
    min_size: int = 1
    timeout: float = 30.0
    application_name: str = DEFAULT_APPLICATION_NAME
    recover: bool = False

    def __post_init__(self) -> None:
        check_pool_sizes(self.pool_size, self.min_size)
        object.__setattr__(self, "timeout", float(self.timeout))

    def pool_kwargs(self) -> dict[str, Any]:
        """The psycopg_pool arguments these settings make (the same for the sync and the async pool; the
        ``check`` function differs and is each pool's own)."""
        # With recover, a failed reconnection is given up after a second (psycopg_pool's default backs off
        # for up to 5 minutes); the next call that needs a connection starts a new attempt at once.
        recovery = {"reconnect_timeout": RECONNECT_SECONDS} if self.recover else {}
        return {
            **recovery,
            "min_size": self.min_size,
            "max_size": self.pool_size,
            "timeout": self.timeout,
            "kwargs": {"autocommit": True, "application_name": self.application_name, "connect_timeout": 10},
        }


def quiet_socket(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether an idle pooled connection has nothing waiting on its socket: the case of a live one (with
    nothing asked, the server sends nothing). Something readable is the server closing it (a restart, a
    crash: end of file or a last FATAL message) or, rarely, a notice: the caller then checks it with a
    statement. A check of recovering pools that costs no round trip on the hot path."""
    import select

    if conn.closed:
        return False
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    return not readable


def check_idle(conn: Conn) -> None:
    """psycopg_pool's ``check`` of a recovering pool: the socket test, else one empty statement (which
    raises for a connection the server closed, and the pool replaces it)."""
    from psycopg_pool import ConnectionPool

    if not quiet_socket(conn):
        ConnectionPool.check_connection(conn)


def configure_connection(conn: Conn, timeout: str | None) -> None:
    """What every pooled connection gets when opened: pgvector's types (when the extension exists) and
    the statement timeout, as :func:`ragstore.db.connection.connect` applies them."""
    register_vector(conn)
    if timeout is not None:
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout,))


def _shown_as(model: Callable[Concatenate[Conn, P], R], method: Callable[..., R]) -> Callable[Concatenate[Store, P], R]:
    """``method`` with ``model``'s parameters (``self`` in place of ``conn``) for type checkers, help() and
    IDEs, and its docstring: the arguments are defined once, in ``model``."""
    shown = inspect.signature(model)
    first = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = shown.replace(parameters=[first, *list(shown.parameters.values())[1:]])  # type: ignore[attr-defined]
    method.__doc__ = f"On a connection of the Store's pool, with the Store's caches: {model.__doc__}"
    return cast("Callable[Concatenate[Store, P], R]", method)


# What a call on a closed store raises (a DatabaseUnavailable): no connection will be lent again.
CLOSED = "the {what} is closed (close() was called, or its `with` block ended): open a new {what}"


class Lender(Protocol):
    """What a Store asks of its connections' source: ``psycopg_pool.ConnectionPool``, or
    :class:`ragstore.db.connection.DirectConnections` for :meth:`Store.direct`."""

    @property
    def closed(self) -> bool: ...

    def getconn(self, timeout: float | None = None) -> Conn: ...

    def putconn(self, conn: Conn) -> None: ...

    def drain(self) -> None: ...

    def close(self, timeout: float = 5.0) -> None: ...


class Store(Closing):
    """ragstore on a pool of at most ``pool_size`` connections; see the module docstring.

    ``Store(dsn=None, *, pool_size=10, min_size=1, timeout=30.0, application_name="ragstore")``: the
    options and their defaults are :class:`PoolSettings`'s; ``timeout`` is how long a call waits for a free
    connection (DatabaseUnavailable after it) and for the first connection when the Store opens. Use it as
    a context manager, or call :meth:`close`.
    """

    def __init__(self, dsn: str | None = None, **options: Unpack[PoolOptions]) -> None:
        from psycopg_pool import ConnectionPool, PoolTimeout

        settings = PoolSettings(**options)
        self.dsn = _dsn_or_refuse(dsn)
        self.pool_size = settings.pool_size
        self.caches = Caches()
        self._dialect: Dialect | None = None  # asked on the first search, kept: one Store, one database
        self._timeout = settings.timeout
        statement_timeout_ms = statement_timeout()  # a malformed setting fails here, before any connection

        def configure(conn: Conn) -> None:
            configure_connection(conn, statement_timeout_ms)

        pool: ConnectionPool[Conn] = ConnectionPool(
            self.dsn,
            configure=configure,
            open=False,
            name=settings.application_name,
            check=check_idle if settings.recover else None,
            **settings.pool_kwargs(),
        )
        try:
            pool.open(wait=True, timeout=self._timeout)
        except PoolTimeout as exc:
            pool.close()
            raise DatabaseUnavailable(f"cannot connect to {mask_dsn(self.dsn)}: {exc}") from exc
        self._pool: Lender = pool
        self._retry = settings.recover

    # -- life cycle -------------------------------------------------------------------------------
    @classmethod
    def embedded(cls, home: str | Path | None = None, **options: Any) -> Store:
        """A Store on ragstore's embedded PostgreSQL under ``home`` (default ``$RAGSTORE_HOME``, else the
        per-user data folder), started if it is not running; ``options`` as for :class:`Store`."""
        from ragstore.embedded import start

        return cls(start(home), **options)

    def close(self) -> None:
        """Close every connection of the pool (idempotent)."""
        self._pool.close()

    @contextlib.contextmanager
    def connection(self, *, autocommit: bool = True) -> Iterator[Conn]:
        """A connection of the pool for the block (pgvector types registered, the statement timeout set);
        with ``autocommit=False`` the block runs as the command line does, in explicit transactions, and
        whatever it leaves open is rolled back before the connection goes back."""
        conn = self._checkout()
        try:
            if not autocommit:
                conn.autocommit = False
            yield conn
        finally:
            self._give_back(conn)

    def _give_back(self, conn: Conn) -> None:
        """Return a lent connection to the pool. The pool rolls back whatever is left open and discards a
        broken connection; a connection lent without autocommit goes back in autocommit, as the pool
        handed it out."""
        with contextlib.suppress(psycopg.Error):
            if not conn.autocommit:
                conn.rollback()
                conn.autocommit = True
        self._pool.putconn(conn)

    def read(self, fn: Callable[[Conn], R]) -> R:
        """``fn(conn)`` on a connection of the pool, for a read that may run twice. In a recovering pool
        (``recover=True``) a connection that breaks under it (:func:`~ragstore.db.connection.connection_lost`:
        the database restarted, a proxy or firewall dropped it) is discarded, the pool's idle connections
        with it (made before the same loss, they are broken too), and ``fn`` runs once more on a new one,
        so that the first call after the database returns gets its answer, not DatabaseUnavailable."""
        try:
            with self.connection() as conn:
                return fn(conn)
        except (psycopg.Error, DatabaseUnavailable) as exc:
            if not (self._retry and connection_lost(exc)):
                raise
        self._pool.drain()
        with self.connection() as conn:
            return fn(conn)

    def _checkout(self) -> Conn:
        """A connection of the pool, or DatabaseUnavailable when none is free within ``timeout``."""
        from psycopg_pool import PoolClosed, PoolTimeout

        try:
            return self._pool.getconn(timeout=self._timeout)
        except PoolClosed as exc:
            raise DatabaseUnavailable(CLOSED.format(what="Store")) from exc
        except PoolTimeout as exc:
            raise DatabaseUnavailable(
                f"no connection of the pool ({self.pool_size}) was free within {self._timeout:g}s: {exc}"
            ) from exc

    # -- schema and families ----------------------------------------------------------------------
    def migrate(self) -> MigrationResult:
        """Bring the schema to the newest revision (under an advisory lock); returns what was applied.

        Connections opened before the ``vector`` extension existed are replaced, so every connection
        handed out afterwards knows pgvector's types.
        """
        from ragstore.migrate import upgrade

        if self._pool.closed:
            raise DatabaseUnavailable(CLOSED.format(what="Store"))
        result = upgrade(self.dsn)
        if result.changed:
            self._pool.drain()
        return result

    def create_family(
        self,
        name: str,
        backend: str | Backend | None = None,
        *,
        model: str | None = None,
        options: Mapping[str, Any] | None = None,
        fts_config: str = "english",
        storage: str | None = None,
        rerank_factor: int | None = None,
        title_prefix: bool | None = None,
    ) -> Family:
        """Create family ``name`` for ``backend`` (a name such as ``"offline"``/``"minilm"``/``"openai"``,
        or a :class:`~ragstore.embed.base.Backend` instance) with its table and HNSW index. ``options`` are
        the backend's recorded settings (``base_url``, ``dimensions``, ``api_key_env`` for openai).
        Without ``backend``: ``"minilm"`` when the ``minilm`` extra is installed, else ``"offline"``, with a
        :class:`~ragstore.errors.FingerprintVectorsWarning` saying so
        (:func:`ragstore.embed.registry.default_backend`).
        ``storage``: how its HNSW index holds the vectors, ``"vector"`` (default), ``"halfvec"`` or ``"bit"``
        (with ``rerank_factor`` candidates per hit re-ranked exactly; docs/guide/storage.md).
        ``title_prefix``: whether document chunks are embedded with their ``Title > Heading`` path as the
        first line (recorded as the family option; None: :data:`ragstore.families.DEFAULT_TITLE_PREFIX`).
        Warns :class:`~ragstore.errors.StorageRecallWarning` where the storage measured a recall below the
        floor somewhere (the note ``ragstore family create`` prints). Raises InvalidInput, Conflict (it
        exists)."""
        from ragstore.embed.base import Backend as BackendType
        from ragstore.embed.registry import default_backend
        from ragstore.families import check_name, create_family, make_backend
        from ragstore.families.storage import measured_caveat, storage_options

        check_name(name)
        if backend is None:
            backend, note = default_backend()
            if note is not None:
                warnings.warn(FingerprintVectorsWarning(f"family {name}: {note}"), stacklevel=2)
        recorded = dict(options or {})
        made = backend if isinstance(backend, BackendType) else make_backend(backend, model=model, **recorded)
        if fts_config != "english":
            recorded["fts_config"] = fts_config
        if title_prefix is not None:
            recorded["title_prefix"] = title_prefix
        family_options = {**recorded, **storage_options(storage, rerank_factor)}
        with self.connection(autocommit=False) as conn:
            family = create_family(conn, name, made, options=family_options)
        self.caches.remember_family(family)
        caveat = measured_caveat(family.storage, family.model, family.dim)
        if caveat is not None:
            warnings.warn(StorageRecallWarning(f"family {name}: {caveat}"), stacklevel=2)
        return family

    def family(self, name: str) -> Family:
        """Family ``name`` as stored now (NotFound when there is none)."""
        from ragstore.search.api import fresh_family

        return self.read(lambda conn: fresh_family(conn, name, self.caches))

    def families(self) -> list[Family]:
        """Every family, by name."""
        from ragstore.families import list_families

        return self.read(list_families)

    def family_stats(self, name: str) -> FamilyStats:
        """Counts of family ``name`` (chunks, vectors, packages; see ``ragstore family stats``)."""
        from ragstore.families import family_stats

        with self.connection() as conn:
            return family_stats(conn, name)

    def drop_family(self, name: str) -> None:
        """Drop family ``name``: its table, its chunks, its registry row (NotFound when there is none)."""
        from ragstore.families import drop_family

        with self.connection(autocommit=False) as conn:
            drop_family(conn, name)
            conn.commit()
        self.caches.forget_family(name)

    def vacuum(self, family: str | None = None, *, full: bool = False) -> VacuumReport:
        """Return to the disk the space deletes left in ``family``'s table and the shared tables (every
        ragstore table when None), as ``ragstore vacuum`` does; see :mod:`ragstore.families.vacuum`.
        PermissionDenied unless the store's role is the owner side."""
        from ragstore.families.vacuum import vacuum

        with self.connection() as conn:
            return vacuum(conn, family, full=full)

    def add_filter_key(self, family: str, key: str, *, covering: bool = False) -> Family:
        """Declare metadata ``key`` a filter key of ``family``: a btree index (built concurrently; with
        ``covering``, holding the rows' vectors too) that filters on the key read instead of the GIN index
        (:mod:`ragstore.families.filter_keys`); answers do not change. Raises InvalidInput, NotFound,
        Conflict (a model migration is under way)."""
        from ragstore.families import filter_keys

        with self.connection() as conn:
            found = filter_keys.add_key(conn, family, key, covering=covering)
        self.caches.forget_family(family)
        return found

    def remove_filter_key(self, family: str, key: str) -> Family:
        """Forget filter key ``key`` of ``family`` and drop its index. Raises InvalidInput (not declared),
        NotFound, Conflict."""
        from ragstore.families import filter_keys

        with self.connection() as conn:
            found = filter_keys.remove_key(conn, family, key)
        self.caches.forget_family(family)
        return found

    def filter_keys(self, family: str) -> list[FilterKey]:
        """The declared filter keys of ``family``, each with its index and whether that index is valid."""
        from ragstore.families import filter_keys

        with self.connection() as conn:
            return filter_keys.list_keys(conn, family)

    # -- writing ----------------------------------------------------------------------------------
    def index(
        self,
        records: Iterable[ChunkRecord | Mapping[str, Any]],
        family: str,
        *,
        prune: bool = False,
        batch_size: int | None = None,
        backend: Backend | None = None,
    ) -> IndexReport:
        """Index ``records`` (``ChunkRecord``s, or dicts with ``chunk_id``, ``package_path``, ``text`` and
        optionally ``metadata``, ``vector``, ``model``) into ``family``; returns the IndexReport.

        The path and guarantees of ``ragstore index``: the records are read once, by the same one pass as a
        JSONL file's lines (each record as its JSON line, see :func:`record_lines`): a record whose bytes are
        those a stored chunk was written from is unchanged and costs no parsing; every other one is validated
        (InvalidInput names ``record N: field: problem``, ModelMismatch a vector that does not fit the
        family) and kept in a private spool, so memory holds one batch, not the input, and a bad record
        anywhere writes nothing. Then the kept records are written in batches, each committed whole, unchanged
        ones never re-embedded. ``prune`` deletes the family's chunks of the packages read that the input no
        longer holds.
        """
        from ragstore.ingest.programs import records_source  # pydantic: not loaded by a search

        return self._index_sources([records_source(records)], family, prune, batch_size, backend)

    def index_files(
        self,
        paths: Sequence[str | Path],
        family: str,
        *,
        prune: bool = False,
        batch_size: int | None = None,
        backend: Backend | None = None,
        skip_bad_files: bool = False,
        as_: str | None = None,
        name: str | None = None,
        replace_root: bool = False,
        chunk_tokens: int | None = None,
        overlap: int = 0,
        columns: Sequence[str] = (),
        progress: Callable[[int], None] | None = None,
        on_validated: Callable[[int], None] | None = None,
    ) -> IndexReport:
        """Index files and folders as ``ragstore index FAMILY PATH...`` does (JSONL chunk files, folders of
        ``.txt``/``.md``/``.rst`` documents, single documents), with the same validation-before-write guarantee.

        A folder's documents are named ``<folder name>/<path>``, or ``<as_>/<path>`` (``name`` is the same
        option); a run whose prefix was last written from another folder raises Conflict before anything
        is written, unless ``replace_root`` takes the prefix over (see :meth:`sources`). The report's
        ``sources`` names the prefixes and roots written, its ``skipped_files`` the files not read and why.
        ``chunk_tokens`` and ``overlap`` size the documents' chunks as ``--chunk-tokens`` and ``--overlap``
        do; ``columns`` maps Parquet columns as ``--column FIELD=COLUMN`` does. ``on_validated(n)`` is called
        once the pass has read the whole input (``n`` records), ``progress(n)`` as ``n`` more are written.
        A path of ``-`` reads JSONL from standard input (``ragstore index FAMILY -``).
        """
        from ragstore.ingest.columnar import parse_columns
        from ragstore.ingest.readers import close_sources, open_sources

        if as_ is not None and name is not None and as_ != name:
            raise InvalidInput(f"as_={as_!r} and name={name!r}: give one name")
        mapping = parse_columns(list(columns))
        sources = open_sources(
            [str(p) for p in paths], skip_bad_files=skip_bad_files, columns=mapping, as_=name if as_ is None else as_
        )
        try:
            return self._index_sources(
                sources, family, prune, batch_size, backend, replace_root, chunk_tokens, overlap, progress, on_validated
            )
        finally:
            close_sources(sources)

    def sources(self, family: str) -> list[SourceRow]:
        """The source registry of ``family``: for each prefix of its folder documents, the root (resolved
        folder path and host) that last wrote it, and when it was first and last written."""
        from ragstore.ingest.roots import list_sources

        with self.connection() as conn:
            return list_sources(conn, family)

    def _index_sources(
        self,
        sources: Sequence[Source],
        family: str,
        prune: bool,
        batch_size: int | None,
        backend: Backend | None,
        replace_root: bool = False,
        chunk_tokens: int | None = None,
        overlap: int = 0,
        progress: Callable[[int], None] | None = None,
        on_validated: Callable[[int], None] | None = None,
    ) -> IndexReport:
        """:func:`ragstore.ingest.run.index_sources` (the one pass, then the write) on a pooled connection."""
        from ragstore.ingest.run import index_sources
        from ragstore.ingest.writer import DEFAULT_BATCH

        with self.connection(autocommit=False) as conn:
            return index_sources(
                conn,
                family,
                sources,
                prune=prune,
                batch_size=batch_size or DEFAULT_BATCH,
                backend=backend,
                lender=self._lend_second,
                replace_root=replace_root,
                chunk_tokens=chunk_tokens,
                overlap=overlap,
                progress=progress,
                on_validated=on_validated,
                caches=self.caches,
            )

    # -- tables a family follows (ragstore sync, docs/guide/sync.md) -------------------------------
    def sync_add(
        self,
        family: str,
        table: str,
        *,
        id_column: str,
        text_columns: Sequence[str],
        metadata_columns: Sequence[str] = (),
        package: str | None = None,
        predicate: str | None = None,
        prefix: str | None = None,
    ) -> tuple[SyncSource, int]:
        """Follow ``table`` (``SCHEMA.TABLE``) into ``family`` (``ragstore sync add``): install its triggers
        and queue its rows; returns the source and the rows queued. Raises NotFound, InvalidInput, Conflict,
        PermissionDenied (the store's role is not the table's owner)."""
        from ragstore.sync.sources import add_source

        with self.connection(autocommit=False) as conn:
            return add_source(
                conn,
                family,
                table,
                id_column=id_column,
                text_columns=text_columns,
                metadata_columns=metadata_columns,
                package=package,
                predicate=predicate,
                prefix=prefix,
            )

    def sync_alter(self, family: str, table: str, **changes: Any) -> tuple[SyncSource, int]:
        """Change what ``family`` follows of ``table`` in place (``ragstore sync alter``; the changes are
        :func:`ragstore.sync.sources.alter_source`'s keywords); returns the source and the rows queued."""
        from ragstore.sync.sources import alter_source

        with self.connection(autocommit=False) as conn:
            return alter_source(conn, family, table, **changes)

    def sync_list(self, families: Sequence[str] | None = None) -> list[SyncSource]:
        """The tables ``families`` (every family by default) follow (``ragstore sync list``)."""
        from ragstore.sync.sources import list_sources

        with self.connection(autocommit=False) as conn:
            return list_sources(conn, families)

    def sync_show(self, family: str, table: str) -> dict[str, Any]:
        """What ``family`` follows of ``table``, with its status (``ragstore sync show``); NotFound."""
        from ragstore.sync.sources import show_source

        with self.connection(autocommit=False) as conn:
            return show_source(conn, family, table)

    def sync_remove(self, family: str, table: str, *, delete_chunks: bool = False) -> tuple[SyncSource, int]:
        """Stop following ``table`` (``ragstore sync remove``); the chunks stay unless ``delete_chunks``.
        Returns the source and the chunks deleted."""
        from ragstore.sync.sources import remove_source

        with self.connection(autocommit=False) as conn:
            return remove_source(conn, family, table, delete_chunks=delete_chunks)

    def sync_run(
        self, families: Sequence[str] | None = None, *, batch_size: int | None = None, workers: int = 1
    ) -> RunReport:
        """Sync what is queued for ``families`` (every followed table by default) until nothing is due, as
        ``ragstore sync run --once [--workers N]`` does; returns what was written, deleted and embedded."""
        from ragstore.sync.worker import BATCH, run_workers

        return run_workers(self.dsn, families, batch=batch_size or BATCH, workers=workers)

    def sync_status(self) -> list[dict[str, Any]]:
        """Per followed table: queue depth, lag, backoff, last error, rows/s (the view ragstore.sync_status)."""
        from ragstore.sync.sources import status

        with self.connection(autocommit=False) as conn:
            return status(conn)

    # -- what a family holds ----------------------------------------------------------------------
    def delete(
        self,
        family: str,
        *,
        ids: Sequence[str] = (),
        packages: Sequence[str] = (),
        dry_run: bool = False,
    ) -> DeleteReport:
        """Delete ``family``'s chunks of ``ids`` and under the package_path prefixes ``packages`` (as
        ``--package`` in a search: wildcards literal) (``ragstore delete``); with ``dry_run`` only report
        what would go. Other families are never touched; the family's word counts stay exact. Raises
        InvalidInput (neither ids nor packages), NotFound, and ``permission denied`` for the reader role."""
        from ragstore.families.chunks import delete_chunks

        with self.connection() as conn:
            return delete_chunks(conn, family, ids=ids, prefixes=packages, dry_run=dry_run)

    def get(self, family: str, ids: Sequence[str], *, vectors: bool = False) -> GetResult:
        """The chunks of ``ids`` in ``family`` (in the order given; with ``vectors``, each one's vector and
        model) and the ids it does not hold (``ragstore get``). Raises InvalidInput, NotFound."""
        from ragstore.families.chunks import get_chunks

        return self.read(lambda conn: get_chunks(conn, family, ids, vectors=vectors))

    def list_chunks(
        self, family: str, *, package: str | None = None, limit: int = 100, after: str | None = None
    ) -> ChunkPage:
        """One page of ``family``'s chunk ids in (package_path, chunk_id) order (``ragstore list``): at most
        ``limit``, after the chunk ``after`` (the previous page's ``next``), with the counts under the
        ``package`` prefix. Raises InvalidInput, NotFound."""
        from ragstore.families.chunks import list_chunks

        with self.connection() as conn:
            return list_chunks(conn, family, package=package, limit=limit, after=after)

    def export(
        self,
        family: str,
        path: str | Path | IO[bytes],
        *,
        format: str = "jsonl",
        package: str | None = None,
        vectors: bool = False,
    ) -> ExportReport:
        """Write ``family``'s chunks to ``path`` (or a binary stream) as JSONL or Parquet records that
        :meth:`index` reads back to the same chunks (``ragstore export``), streamed; with ``vectors``, each
        chunk's vector and model. Raises InvalidInput (a format, Parquet without pyarrow), NotFound."""
        from ragstore.families.chunks import export_chunks

        with self.connection() as conn:
            return export_chunks(conn, family, path, format=format, package=package, vectors=vectors)

    @contextlib.contextmanager
    def _lend_second(self) -> Iterator[Conn | None]:
        """A second connection of the pool for a run's parallel writes (:mod:`ragstore.ingest.parallel`),
        outside autocommit, or None (the run goes on with one) when the pool holds one connection or none
        is free within a second: the Store never opens more than ``pool_size`` connections."""
        from psycopg_pool import PoolClosed, PoolTimeout

        if self.pool_size < 2:
            yield None
            return
        try:
            conn = self._pool.getconn(timeout=min(self._timeout, 1.0))
        except PoolClosed as exc:
            raise DatabaseUnavailable(CLOSED.format(what="Store")) from exc
        except PoolTimeout:
            yield None
            return
        try:
            conn.autocommit = False
            yield conn
        finally:
            self._give_back(conn)

    def _search(self, /, family: str, query: str | None = None, **options: Any) -> list[Hit]:
        caches = options.pop("caches", self.caches)
        request = SearchRequest.of(family, query, **options)

        def attempt() -> Answer:
            # The hot path of every search: the pool's own checkout and return, nothing around them (half
            # of what connection() costs: 11 against 22 us a call, measured). The plan runs in autocommit
            # and leaves no transaction open; should it, the pool rolls it back on return.
            conn = self._checkout()
            try:
                memo = caches if caches is not None else caches_for(conn)
                dialect = self._dialect
                if dialect is None:
                    dialect = self._dialect = drive.run(conn, learn_dialect())
                return drive.run(conn, plan_search(request, memo, dialect))
            finally:
                self._pool.putconn(conn)

        try:
            answer = attempt()
        except (psycopg.Error, DatabaseUnavailable) as exc:
            if not (self._retry and connection_lost(exc)):
                raise
            self._pool.drain()  # as read() does: a search may run twice
            answer = attempt()
        if answer.note is not None:
            warnings.warn(FingerprintVectorsWarning(answer.note), stacklevel=2)
        return answer.hits

    #: :func:`ragstore.search.api.search` on a pooled connection with the Store's caches: the same arguments
    #: (after ``conn``), modes, errors and guarantees (the top ``min(k, rows that match)`` hits); the
    #: request is planned (:func:`ragstore.search.plan.plan_search`) and driven (:mod:`ragstore.search.drive`)
    #: here, as :meth:`AsyncStore.search` does on the event loop.
    search = _shown_as(_api_search, _search)

    def explain(self, /, family: str, query: str | None = None, *, analyze: bool = False, **options: Any) -> str:
        """The psql script of the statements the search ``search(family, query, **options)`` runs, with
        their parameters inlined (``ragstore search --explain``); ``analyze`` adds ``EXPLAIN ANALYZE`` of
        each (:func:`ragstore.search.explain.explain`). The same errors as :meth:`search`."""
        from ragstore.search.explain import explain

        request = SearchRequest.of(family, query, **options)
        with self.connection(autocommit=False) as conn:
            return explain(conn, request, analyze=analyze, caches=self.caches)

    def sweep_recall(self, /, family: str, ef_values: Sequence[int], **options: Any) -> list[RecallReport]:
        """:meth:`check_recall` at each ``ef_search`` of ``ef_values`` on the same samples, recording nothing
        (``ragstore check-recall --plot``): the recall-against-ef_search curve
        (:func:`ragstore.search.recall.sweep_recall`)."""
        from ragstore.search.recall import sweep_recall

        with self.connection(autocommit=False) as conn:
            return sweep_recall(conn, family, ef_values, **options)

    def check_recall(self, family: str, **options: Any) -> RecallReport:
        """HNSW recall@k against the exact top k on sampled queries (``ragstore check-recall``); options as
        :func:`ragstore.search.recall.check_recall` (``k``, ``samples``, ``ef_search``, ``package``,
        ``metadata``, ``queries``, ``min_recall``, ...)."""
        from ragstore.search.recall import check_recall

        with self.connection(autocommit=False) as conn:
            return check_recall(conn, family, **options)

    def eval(
        self,
        family: str,
        queries: Sequence[Query],
        qrels: Qrels,
        modes: Sequence[ModeSpec] | None = None,
        *,
        k: int = 10,
        per_leg: int | None = None,
        reranker: Reranker | None = None,
        rerank_depth: int | None = None,
    ) -> EvalResult:
        """Score search modes on a test set (``ragstore eval``): ``queries`` and ``qrels`` as
        :mod:`ragstore.evaluation.datasets` reads them; ``modes`` default to every plain mode; ``reranker``
        (with ``rerank_depth`` candidates) serves the modes that ask for ``rerank="cross"``."""
        from ragstore.evaluation.runner import ModeSpec, run_eval
        from ragstore.search.api import MODES
        from ragstore.search.rerank import DEFAULT_DEPTH

        specs = list(modes) if modes is not None else [ModeSpec(m) for m in MODES if m != "auto"]
        depth = rerank_depth or DEFAULT_DEPTH
        with self.connection(autocommit=False) as conn:
            return run_eval(
                conn, family, queries, qrels, specs, k=k, per_leg=per_leg, reranker=reranker, rerank_depth=depth
            )

    @property
    def memory(self) -> Memory:
        """Agent memory on this Store's pool (see :class:`Memory`)."""
        return Memory(self)

    def context_pack(
        self,
        *,
        brief: str,
        max_tokens: int,
        root: str | Path = ".",
        family: str | None = None,
        query: str | None = None,
        k: int = 8,
        mode: str = "auto",
        files: Sequence[str | Path] = (),
        summaries: Sequence[str] = (),
        constraints: Sequence[str] = (),
        map_repo: bool = False,
    ) -> ContextPack:
        """A context pack (``ragstore context pack``): ``brief``, the files, summaries and constraints,
        and, with ``family`` and ``query``, the top ``k`` hits of that search as L3 snippets."""
        from ragstore.context.retrieval import hits_to_snippets
        from ragstore.context.sources import build_from_disk

        snippets = None
        if family is not None or query is not None:
            if family is None or query is None:
                raise InvalidInput("a context pack's retrieval needs both family and query")
            hits = self.search(family, query, k=k, mode=mode)
            snippets = hits_to_snippets(hits, query, mode)
        return build_from_disk(
            brief=brief,
            root=root,
            max_tokens=max_tokens,
            map_repo=map_repo,
            files=tuple(str(p) for p in files),
            summaries=tuple(summaries),
            constraints=tuple(constraints),
            snippets=snippets,
        )

    # -- parity with the command line -------------------------------------------------------------
    # The Store methods of the commands that had none (tests/unit/test_cli_parity.py maps every command
    # to its methods). Each is one library call on a connection of the pool.
    @classmethod
    def direct(cls, dsn: str, *, max_connections: int = 2) -> Store:
        """A Store for one short-lived, single-threaded caller (the command line: it parses, calls one
        Store method, prints): no pool, no threads; a connection is opened by
        :func:`ragstore.db.connection.connect` when a call first needs one (a database that does not
        answer fails that call at once, with its one-line message) and kept for the next; at most
        ``max_connections`` are open (two: an index run's second writer)."""
        from ragstore.db.connection import DirectConnections

        check_pool_sizes(max_connections, 0)
        store = cls.__new__(cls)
        store.dsn = dsn
        store.pool_size = max_connections
        store.caches = Caches()
        store._dialect = None
        store._timeout = 0.0
        store._pool = DirectConnections(dsn, max_connections)
        store._retry = False  # one short-lived call: a lost connection fails it at once
        return store

    def migration_status(self) -> MigrationStatus:
        """The database's revision and the head (``ragstore migrate --status``); changes nothing."""
        from ragstore.migrate import status

        if self._pool.closed:
            raise DatabaseUnavailable(CLOSED.format(what="Store"))
        return status(self.dsn)

    def tune_family(
        self,
        name: str,
        queries: Sequence[Query],
        qrels: Qrels,
        *,
        k: int = 10,
        folds: int = 5,
        seed: int = 0,
        min_gain_se: float = 1.0,
        per_legs: Sequence[int] = (),
        dry_run: bool = False,
    ) -> Tuned:
        """Choose family ``name``'s hybrid fusion on labelled queries by cross-validated nDCG@k and store
        the choice unless ``dry_run`` (``ragstore family tune``; the rule:
        :func:`ragstore.evaluation.tune.tune_family`). Raises InvalidInput, NotFound."""
        from ragstore.evaluation.tune import tune_family

        with self.connection(autocommit=False) as conn:
            tuned = tune_family(
                conn,
                name,
                queries,
                qrels,
                k=k,
                folds=folds,
                seed=seed,
                min_gain_se=min_gain_se,
                per_legs=per_legs,
                dry_run=dry_run,
            )
        self.caches.forget_family(name)
        return tuned

    def reset_fusion(self, name: str) -> None:
        """Forget family ``name``'s tuned fusion: back to the default (``ragstore family tune --reset``)."""
        from ragstore.families import check_name
        from ragstore.search.fusion import store_settings

        check_name(name)
        with self.connection(autocommit=False) as conn:
            store_settings(conn, name, None)
            conn.commit()
        self.caches.forget_family(name)

    def migrate_family(
        self,
        name: str,
        backend: str | Backend,
        *,
        model: str | None = None,
        options: Mapping[str, Any] | None = None,
        batch_size: int | None = None,
        on_total: Callable[[int], None] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> FamilyMigration:
        """Re-embed family ``name`` with ``backend`` (a name, with ``model`` and the recorded ``options``,
        or a Backend) into a new table, then swap it in one transaction (``ragstore family migrate NAME
        --backend B``); searches use the old vectors until the swap, and a rerun resumes. ``on_total`` gets
        the number of chunks to write, ``progress`` each committed batch's size. Raises InvalidInput,
        NotFound, Conflict (another migration runs)."""
        from ragstore.families import migrate as family_migrate

        recorded = dict(options or {})
        made = _backend(backend, model, recorded)
        with self.connection(autocommit=False) as conn:
            report = family_migrate.migrate_family(
                conn,
                name,
                made,
                options=recorded,
                batch_size=batch_size or family_migrate.DEFAULT_BATCH,
                on_total=on_total,
                progress=progress,
            )
        self.caches.forget_family(name)
        return report

    def plan_family_migration(
        self,
        name: str,
        backend: str | Backend,
        *,
        model: str | None = None,
        options: Mapping[str, Any] | None = None,
        sample: int | None = None,
    ) -> FamilyMigrationPlan:
        """What migrating family ``name`` to ``backend`` would embed, timed on ``sample`` texts
        (``ragstore family migrate --dry-run``); writes nothing."""
        from ragstore.families import migrate as family_migrate

        recorded = dict(options or {})
        made = _backend(backend, model, recorded)
        with self.connection(autocommit=False) as conn:
            return family_migrate.dry_run(
                conn, name, made, options=recorded, sample=sample or family_migrate.DRY_RUN_SAMPLE
            )

    def abort_family_migration(self, name: str) -> Family:
        """Give up an unfinished migration of family ``name`` and drop its new table (``ragstore family
        migrate --abort``); the family serves its old model as before. Raises NotFound, Conflict."""
        from ragstore.families import migrate as family_migrate

        with self.connection(autocommit=False) as conn:
            family = family_migrate.abort_migration(conn, name)
        self.caches.forget_family(name)
        return family

    def migrate_storage(
        self, name: str, storage: str | None = None, *, rerank_factor: int | None = None
    ) -> StorageMigration:
        """Rebuild family ``name``'s HNSW index in ``storage`` (``vector``, ``halfvec``, ``bit``; default:
        its storage now, to change only ``rerank_factor``) concurrently and swap it in (``ragstore family
        migrate --storage``); nothing is re-embedded. Raises InvalidInput, NotFound, Conflict."""
        from ragstore.families import get_family
        from ragstore.families.storage_migrate import migrate_storage

        with self.connection(autocommit=False) as conn:
            chosen = storage or get_family(conn, name).storage
            report = migrate_storage(conn, name, chosen, rerank_factor=rerank_factor)
            conn.commit()  # a factor-only change is left open by migrate_storage for its caller
        self.caches.forget_family(name)
        return report

    def embedder(self, family: str) -> Backend:
        """The backend that built ``family``, configured as it recorded (``ragstore embed status
        --family``); kept in the Store's caches."""
        from ragstore.families import backend_for

        return backend_for(self.family(family), self.caches)

    def embed(self, texts: Sequence[str], *, family: str | None = None, backend: str | Backend | None = None) -> Any:
        """The vectors of ``texts`` (a numpy matrix, one row a text) as ``family``'s backend or ``backend``
        (a name or a Backend; default ``offline``) embeds them (``ragstore embed text``)."""
        return self._embedding_backend(family, backend).embed(list(texts))

    def similarity(self, a: str, b: str, *, family: str | None = None, backend: str | Backend | None = None) -> float:
        """The cosine similarity of texts ``a`` and ``b`` (``ragstore embed similarity``); the backend as
        for :meth:`embed`."""
        from ragstore.embed.similarity import similarity

        return similarity(self._embedding_backend(family, backend), a, b)

    def rank(
        self,
        query: str,
        candidates: Sequence[str],
        *,
        family: str | None = None,
        backend: str | Backend | None = None,
    ) -> list[RankedText]:
        """``candidates`` by cosine similarity to ``query``, highest first, ties in input order (``ragstore
        embed rank``); the backend as for :meth:`embed`."""
        from ragstore.embed.similarity import rank_texts

        return rank_texts(self._embedding_backend(family, backend), query, candidates)

    def _embedding_backend(self, family: str | None, backend: str | Backend | None) -> Backend:
        if family is not None and backend is not None:
            raise InvalidInput("give family or backend, not both: a family names its own backend")
        if family is not None:
            return self.embedder(family)
        return _backend(backend or "offline", None, {})

    def verify_pack(self, pack: str | Path | ContextPack, root: str | Path = ".") -> VerifyReport:
        """Recompute a saved context pack's ids and manifest against the files under ``root``
        (``ragstore context-pack --verify``); reads files only, no database."""
        from ragstore.context.sources import load_pack
        from ragstore.context.verify import verify

        return verify(load_pack(pack) if isinstance(pack, str | Path) else pack, root)

    def create_token(self, role: str, name: str | None = None) -> NewToken:
        """A bearer token of ``ragstore serve`` acting as ``role`` (``ragstore token create``); its secret
        is in the result only, never stored. Owner side only; raises InvalidInput, NotFound."""
        from ragstore.serve import tokens

        with self.connection() as conn:
            return tokens.create(conn, role, name)

    def tokens(self) -> list[TokenInfo]:
        """Every token (id, name, role, created, last used, revoked), never a secret (``ragstore token
        list``). Owner side only."""
        from ragstore.serve import tokens

        with self.connection() as conn:
            return tokens.list_tokens(conn)

    def revoke_token(self, name_or_id: str) -> TokenInfo:
        """Revoke the live token named (or numbered) ``name_or_id`` (``ragstore token revoke``). Raises
        NotFound."""
        from ragstore.serve import tokens

        with self.connection() as conn:
            return tokens.revoke(conn, name_or_id)

    # -- end of the parity block --------------------------------------------------------------------


class Memory:
    """Agent memory through a :class:`Store`: add records, compose, recall by meaning, forget."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def add(
        self, records: Iterable[MemoryRecord | Mapping[str, Any]], *, undated: Collection[tuple[str, str]] = ()
    ) -> AddResult:
        """Append records (``MemoryRecord``s or their dicts); an identical record is not added twice.
        ``undated`` names the (agent, id) records whose ``at`` is "now" rather than given: for those the
        stored ``at`` stands (:func:`ragstore.memory.store.add_records`)."""
        from ragstore.memory.models import MemoryRecord as RecordType
        from ragstore.memory.store import add_records, make_record

        made = [
            r if isinstance(r, RecordType) else make_record(dict(r), f"record {i}") for i, r in enumerate(records, 1)
        ]
        with self._store.connection(autocommit=False) as conn:
            return add_records(conn, made, undated=undated)

    def compose(
        self, profile: AgentProfile | str | Path, *, task_hint: str | None = None, now: datetime | None = None
    ) -> Any:
        """The composed memory bundle of ``profile`` (an AgentProfile or the path of one)."""
        from ragstore.memory.store import compose_from_db

        with self._store.connection(autocommit=False) as conn:
            return compose_from_db(conn, _profile(profile), now=now or datetime.now(UTC), task_hint=task_hint)

    def recall(
        self,
        profile: AgentProfile | str | Path,
        query: str,
        k: int = 8,
        *,
        now: datetime | None = None,
        backend: Backend | None = None,
    ) -> RecallResult:
        """The ``k`` records of ``profile`` nearest ``query`` by meaning, text and recency; ``backend``
        embeds the query and the records not embedded yet (default: the offline backend)."""
        from ragstore.memory.recall import recall

        chosen, moment = _profile(profile), now or datetime.now(UTC)

        def attempt(conn: Conn) -> RecallResult:
            # As the command line runs it, in a transaction (its embedding of unembedded records commits
            # with it): rolled back with a lost connection, so running it again is safe.
            conn.autocommit = False
            return recall(conn, chosen, query, k, now=moment, backend=backend)

        return self._store.read(attempt)

    def layers(
        self, profile: AgentProfile | str | Path, *, task_hint: str | None = None, now: datetime | None = None
    ) -> tuple[list[str], dict[str, Any]]:
        """The composed memory of ``profile`` as context-pack layers ``(L4 lines, L5 state)``
        (``ragstore context-pack --memory-profile``; :func:`ragstore.memory.store.memory_layers`)."""
        from ragstore.memory.store import memory_layers

        with self._store.connection(autocommit=False) as conn:
            return memory_layers(conn, profile, task_hint, now or datetime.now(UTC))

    def forget(self, agent: str, record_id: str, reason: str) -> ForgetResult:
        """Erase one record (owner side only), with an audit entry naming ``reason``."""
        from ragstore.memory.store import forget

        with self._store.connection(autocommit=False) as conn:
            return forget(conn, agent, record_id, reason)

    # -- parity with the command line (ragstore memory import|grant|revoke|principals) -------------
    def import_file(self, path: str | Path) -> AddResult:
        """Append the records of a JSONL file in one transaction, every line checked first; idempotent by
        id (``ragstore memory import``)."""
        from ragstore.memory.store import import_jsonl

        with self._store.connection(autocommit=False) as conn:
            return import_jsonl(conn, path)

    def grant(self, agent: str, role: str) -> bool:
        """Bind ``agent`` to the database role ``role`` (``ragstore memory grant``); False when it was bound
        already. Owner side only; raises InvalidInput, NotFound (no such role)."""
        from ragstore.memory.principals import grant_agent

        with self._store.connection(autocommit=False) as conn:
            return grant_agent(conn, agent, role)

    def revoke(self, agent: str, role: str) -> None:
        """Remove the binding of ``agent`` to ``role`` (``ragstore memory revoke``); NotFound when none."""
        from ragstore.memory.principals import revoke_agent

        with self._store.connection(autocommit=False) as conn:
            revoke_agent(conn, agent, role)

    def principals(self, agent: str | None = None) -> list[Principal]:
        """Which database roles act for which agents (of ``agent`` only, when given) (``ragstore memory
        principals``)."""
        from ragstore.memory.principals import list_principals

        with self._store.connection(autocommit=False) as conn:
            return list_principals(conn, agent)


def _profile(profile: AgentProfile | str | Path) -> AgentProfile:
    from ragstore.memory.models import load_profile

    if isinstance(profile, str | Path):
        return load_profile(profile)
    return profile


def _backend(backend: str | Backend, model: str | None, options: Mapping[str, Any]) -> Backend:
    """``backend`` itself, or the backend of that name made with ``model`` and ``options``."""
    from ragstore.embed.base import Backend as BackendType
    from ragstore.families import make_backend

    return backend if isinstance(backend, BackendType) else make_backend(backend, model=model, **options)


def pool_size_from_env(default: int = DEFAULT_POOL_SIZE) -> int:
    """``$RAGSTORE_POOL_SIZE`` when set (a positive integer), else ``default``."""
    raw = os.environ.get("RAGSTORE_POOL_SIZE", "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidInput(f"RAGSTORE_POOL_SIZE={raw!r} is not a positive integer") from exc
    check_pool_sizes(value, 0)
    return value
