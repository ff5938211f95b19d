"""Connections: where the database comes from, and the one place psycopg errors become ours."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import psycopg
from psycopg import errors as pgerrors
from psycopg import pq, sql
from psycopg_pool import PoolClosed, PoolTimeout

from ragstore import config
from ragstore.db.sqlfiles import query
from ragstore.errors import (
    Conflict,
    DatabaseUnavailable,
    InvalidInput,
    NotFound,
    PermissionDenied,
    RagstoreError,
    SchemaError,
    Timeout,
    mask_secrets,
)

# PostgreSQL's time units, in milliseconds; a bare number is milliseconds, as in postgresql.conf.
#: A psycopg connection, whatever its row type: the type every function taking ``conn`` is annotated with.
Conn = psycopg.Connection[Any]

_TIME_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "min": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}
_DURATION = re.compile(r"\s*(\d{1,15}(?:\.\d{1,6})?)\s*(us|ms|s|min|h|d)?\s*")
_MAX_TIMEOUT_MS = 2_147_483_647


def mask_dsn(text: str) -> str:
    """Replace any password in a DSN (URI or key=value form), or in a message quoting one, with ``***``."""
    return mask_secrets(text)


def statement_timeout() -> str | None:
    """``$RAGSTORE_STATEMENT_TIMEOUT`` checked and in milliseconds (``"1500ms"``); None when unset or blank.

    A number with an optional unit (``us``, ``ms``, ``s``, ``min``, ``h``, ``d``; none means ``ms``), as
    PostgreSQL reads it; ``0`` means no limit. Anything else, a non-zero value under 1ms, or one past
    PostgreSQL's maximum (about 24 days) is InvalidInput naming the variable.
    """
    value = _timeout_setting()
    if value is None:
        return None
    match = _DURATION.fullmatch(value)
    if not match:
        raise InvalidInput(f"{config.TIMEOUT_ENV}={value!r} is not a duration: use e.g. 30s, 500ms or 0 (no limit)")
    ms = float(match.group(1)) * _TIME_UNITS[match.group(2) or "ms"]
    if ms != 0 and not 1 <= ms <= _MAX_TIMEOUT_MS:
        raise InvalidInput(f"{config.TIMEOUT_ENV}={value!r} is out of range: 0 (no limit) or 1ms to 24 days")
    return f"{round(ms)}ms"


def _timeout_setting() -> str | None:
    """``$RAGSTORE_STATEMENT_TIMEOUT`` as set (stripped), None when unset or blank: read here only."""
    return os.environ.get(config.TIMEOUT_ENV, "").strip() or None


def resolve_dsn(dsn: str | None = None) -> str:
    """The DSN to use: the argument, then ``$RAGSTORE_DSN``, then the embedded server (started if needed)."""
    chosen = dsn or config.dsn_from_env()
    if chosen:
        return chosen
    from ragstore.db.server import EmbeddedServer

    return EmbeddedServer(config.home_dir()).ensure_running()


def connect(dsn: str | None = None, *, autocommit: bool = False) -> psycopg.Connection[tuple[object, ...]]:
    """Open a connection with pgvector's types registered and ``$RAGSTORE_STATEMENT_TIMEOUT`` applied.

    The timeout is set after ragstore's own set-up statements (pgvector's type look-ups), so even a tiny
    one cannot fail the connection itself; it holds for every statement the caller runs. Raises
    InvalidInput for a malformed timeout, DatabaseUnavailable (with the password masked) when the server
    does not answer.
    """
    timeout = statement_timeout()
    target = resolve_dsn(dsn)
    try:
        conn = psycopg.connect(target, autocommit=autocommit, connect_timeout=10)
    except psycopg.Error as exc:
        raise DatabaseUnavailable(f"cannot connect to {mask_dsn(target)}: {_first_line(exc)}") from exc
    try:
        with db_errors():
            register_vector(conn)
            if timeout is not None:
                conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout,))
                if not conn.autocommit:
                    conn.commit()
    except BaseException:
        conn.close()
        raise
    return conn


# What a library door says when no database is named: neither ``connect()`` nor ``Store()`` starts the
# embedded server behind the caller's back (only the command line does, through resolve_dsn).
NO_DATABASE = (
    "no database given: pass {door}(dsn=...), set RAGSTORE_DSN, or use {embedded} to start (or reuse) "
    "ragstore's embedded PostgreSQL under $RAGSTORE_HOME"
)


def given_dsn(dsn: str | None, door: str, embedded: str) -> str:
    """``dsn``, else ``$RAGSTORE_DSN``; with neither, DatabaseUnavailable naming ``door`` and ``embedded``
    (the explicit way to the embedded server). The rule of every library door."""
    chosen = dsn or config.dsn_from_env()
    if not chosen:
        raise DatabaseUnavailable(NO_DATABASE.format(door=door, embedded=embedded))
    return chosen


def connect_given(dsn: str | None = None, *, autocommit: bool = False) -> psycopg.Connection[tuple[object, ...]]:
    """``ragstore.connect()``: :func:`connect` to ``dsn`` or ``$RAGSTORE_DSN``, the Store's rule. With
    neither it raises DatabaseUnavailable naming ``ragstore.embedded.start()`` (which starts or reuses the
    embedded server and returns its DSN) instead of starting the server itself."""
    return connect(given_dsn(dsn, "connect", "connect(ragstore.embedded.start())"), autocommit=autocommit)


@contextlib.contextmanager
def second_connection(conn: Conn) -> Iterator[Conn | None]:
    """A second connection like ``conn`` for the block, or None when it cannot be opened (the caller goes
    on with ``conn`` alone); closed at the end.

    The same server, database, user and password (``conn.info.dsn`` leaves the password out, the
    connection keeps it), pgvector's types, and the session's role (when ``SET ROLE`` changed it),
    search_path and statement timeout. Opened outside autocommit, as the write path runs.
    """
    other = _open_like(conn)
    try:
        yield other
    finally:
        if other is not None:
            other.close()


def _open_like(conn: Conn) -> Conn | None:
    """A new connection like ``conn`` (see :func:`second_connection`), or None when it cannot be opened."""
    params: dict[str, Any] = dict(conn.info.get_parameters())
    params.setdefault("connect_timeout", "10")
    password = conn.pgconn.password
    if password:
        params["password"] = password.decode()
    idle = conn.info.transaction_status == pq.TransactionStatus.IDLE
    try:
        with conn.cursor() as cur:
            row = cur.execute(query("connection", "session")).fetchone()
        if idle and not conn.autocommit:
            conn.rollback()  # ends only the transaction this read began, never the caller's
        other = psycopg.connect(**params, autocommit=False)
    except psycopg.Error:
        return None
    try:
        register_vector(other)
        if row is not None:
            role, session_user, search_path, timeout = row
            if role != session_user:
                other.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            other.execute(query("connection", "copy_session"), (search_path, timeout))
        other.commit()
    except psycopg.Error:
        other.close()
        return None
    return other


def register_vector(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Register pgvector's types when the extension exists (before ``migrate`` it does not)."""
    from pgvector.psycopg import register_vector as _register

    try:
        _register(conn)
    except psycopg.ProgrammingError:
        pass  # vector type not found: the database is not migrated yet
    finally:
        if not conn.autocommit:
            conn.rollback()


@contextlib.contextmanager
def db_errors() -> Iterator[None]:
    """Map psycopg errors raised inside the block to ragstore's error tree."""
    try:
        yield
    except RagstoreError:
        raise
    except psycopg.Error as exc:
        map_db_error(exc)


Statement = tuple["str | psycopg.sql.SQL | psycopg.sql.Composed", dict[str, Any] | Sequence[Any] | None]
_SAVEPOINT = "SAVEPOINT ragstore_isolated"
_ROLLBACK_TO = "ROLLBACK TO SAVEPOINT ragstore_isolated"
_RELEASE = "RELEASE SAVEPOINT ragstore_isolated"


def run_isolated(
    conn: psycopg.Connection[Any], statements: Sequence[Statement], *, binary: bool = False
) -> list[list[tuple[Any, ...]]]:
    """Run read-only ``statements`` in ONE round trip and return the rows of each; nothing they do lasts.

    In autocommit with no transaction open, one statement is sent alone and is its own transaction (a
    ``set_config(..., true)`` ends with it); several share one implicit transaction that ends at the
    pipeline's sync (so a setting one makes would reach the next: callers pass settings in one statement).
    Otherwise they run in a pipeline ``SAVEPOINT; statements; ROLLBACK TO SAVEPOINT; RELEASE SAVEPOINT``,
    still one round trip: the caller's transaction is left as it was (on a connection that was idle
    outside autocommit, the transaction psycopg opens stays open, as with any statement), and a failing
    statement leaves it usable too. Raises the mapped RagstoreError of a failing statement.

    Like any psycopg pipeline, not for two threads sharing one connection at once (use one connection,
    or a pool, per thread).
    """
    isolated = not (conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE)
    if not isolated and len(statements) == 1:  # one message, no pipeline to set up (the search hot path)
        with db_errors():
            statement, params = statements[0]
            return [conn.execute(statement, params, binary=binary).fetchall()]
    # An error raised INSIDE the pipeline block would make psycopg log "error ignored terminating
    # <Pipeline>" on stderr when the block's exit syncs and meets the error again: the first error is kept
    # here, the block ends normally, and the exit's own error (the same failure) is the one caught below.
    first: psycopg.Error | None = None
    cursors: list[psycopg.Cursor[Any]] = []
    try:
        with conn.pipeline():
            try:
                if isolated:
                    conn.execute(_SAVEPOINT)
                for statement, params in statements:
                    cursors.append(conn.execute(statement, params, binary=binary))
                if isolated:
                    conn.execute(_ROLLBACK_TO)
                    conn.execute(_RELEASE)
            except psycopg.Error as exc:
                first = exc
        if first is None:
            return [cur.fetchall() for cur in cursors]
    except psycopg.Error as exc:
        first = first or exc
    if isolated:
        with contextlib.suppress(psycopg.Error):
            conn.execute(_ROLLBACK_TO)
            conn.execute(_RELEASE)
    map_db_error(first)


def is_transaction_rollback(exc: psycopg.Error) -> bool:
    """Whether ``exc`` is of SQLSTATE class 40 (a deadlock, a serialisation failure: the transaction was rolled
    back and may be retried). psycopg's DeadlockDetected and SerializationFailure are not subclasses of its
    TransactionRollback (each derives from OperationalError), so the class is told by its code."""
    return isinstance(exc, pgerrors.TransactionRollback) or (exc.sqlstate or "").startswith("40")


def map_db_error(exc: psycopg.Error) -> NoReturn:
    """Raise the ragstore error that says what the caller does next about ``exc``."""
    message = mask_dsn(_first_line(exc))
    if is_transaction_rollback(exc):
        raise Conflict(f"a concurrent transaction conflicted, nothing was changed; retry: {message}") from exc
    if isinstance(exc, pgerrors.QueryCanceled):
        setting = _timeout_setting()
        cause = f" ({config.TIMEOUT_ENV}={setting})" if setting and "statement timeout" in message else ""
        raise Timeout(f"statement cancelled{cause}: {message}") from exc
    if isinstance(exc, pgerrors.ProgramLimitExceeded):  # a value over a server limit: not an outage
        raise InvalidInput(f"a value is over a database limit, nothing was written: {message}") from exc
    if isinstance(exc, psycopg.OperationalError | pgerrors.AdminShutdown | pgerrors.CannotConnectNow):
        raise DatabaseUnavailable(f"database unavailable: {message}") from exc
    if isinstance(exc, pgerrors.InsufficientPrivilege):
        raise PermissionDenied(f"permission denied: {message}") from exc
    if isinstance(exc, pgerrors.UndefinedTable | pgerrors.InvalidSchemaName | pgerrors.UndefinedFunction):
        raise SchemaError(f"{message}: is the database migrated? run `ragstore migrate`") from exc
    if isinstance(exc, pgerrors.DataError | pgerrors.IntegrityConstraintViolation):
        raise InvalidInput(message) from exc
    if isinstance(exc, pgerrors.UndefinedObject):
        raise NotFound(message) from exc
    raise RagstoreError(f"database error: {message}") from exc


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (a psycopg error, or the DatabaseUnavailable :func:`map_db_error` made of one) says
    that the connection broke under the statement: the server closed it or the socket failed (no SQLSTATE,
    or class 08 "connection exception"), or the server is shutting the session down (57P01-57P03). Not a
    statement timeout (57014), not a pool that had no connection to lend: a read that failed so may be
    run once more on a new connection and answer."""
    if isinstance(exc, RagstoreError):
        if type(exc) is not DatabaseUnavailable:
            return False
        exc = exc.__cause__ if exc.__cause__ is not None else exc
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# -- connections lent without a pool, for a Store with one short-lived caller (the command line) ----
# :class:`DirectConnections` is the part of ``psycopg_pool.ConnectionPool`` a :class:`~ragstore.Store`
# uses (``getconn``, ``putconn``, ``drain``, ``close``, ``closed``), without the pool's threads and
# retries: a connection is opened by :func:`connect` when one is first asked for
# (so a database that does not answer fails at once, with that function's one-line message), kept for the
# next call, and at most ``size`` are open at a time (the second one serves an index run's second writer).


class DirectConnections:
    """Up to ``size`` connections to ``dsn``, opened on demand, in autocommit as a pool lends them."""

    def __init__(self, dsn: str, size: int = 2) -> None:
        self._dsn = dsn
        self._size = size
        self._idle: list[Conn] = []
        self._lent = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def getconn(self, timeout: float | None = None) -> Conn:
        """An idle connection, else a new one; PoolTimeout when ``size`` are lent (the caller goes on
        with fewer), PoolClosed after :meth:`close`."""
        if self._closed:
            raise PoolClosed("the connections are closed")
        if self._idle:
            conn = self._idle.pop()
        elif self._lent >= self._size:
            raise PoolTimeout(f"all {self._size} connections are lent")
        else:
            conn = connect(self._dsn, autocommit=True)
        self._lent += 1
        return conn

    def putconn(self, conn: Conn) -> None:
        """Take ``conn`` back: kept when it is sound and idle, else closed (a transaction left open is
        rolled back by closing)."""
        self._lent -= 1
        idle = not conn.closed and conn.info.transaction_status == pq.TransactionStatus.IDLE
        if self._closed or not idle or not conn.autocommit:
            conn.close()
        else:
            self._idle.append(conn)

    def drain(self) -> None:
        """Close the idle connections: the next call opens a fresh one (after ``migrate`` created the
        vector type, so that it knows pgvector's types)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self, timeout: float = 5.0) -> None:
        """Close every idle connection; a lent one is closed when it comes back."""
        self._closed = True
        self.drain()
