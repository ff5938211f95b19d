"""What a search plan asks its driver to do, one step at a time, and the synchronous driver that does it
(psycopg's ``generators.py`` shape).

A plan (:mod:`ragstore.search.plan`) is a generator: it yields a step, the driver does it and sends the
result back (or throws the step's error into the plan, mapped to ragstore's error tree), until the plan
returns its answer. The plan holds no connection; the drivers hold it: :func:`run` here on a psycopg
connection, :func:`ragstore.search.drive_async.run` on an async one. Both turn the crank with
:func:`advance`, which is where a step's error is mapped (:func:`ragstore.db.connection.map_db_error`) and
thrown into the plan: the drivers only do steps; the plan may handle an error (a stale cached family is
read again) or let it out. A step is plain data, so ``ragstore search --explain`` prints the statements
the plan yields.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import pq, sql

from ragstore.db.connection import Conn, db_errors, map_db_error, run_isolated
from ragstore.db.dialect import Dialect, dialect_of
from ragstore.errors import RagstoreError

__all__ = [
    "Call",
    "Done",
    "InError",
    "Outcome",
    "Pipeline",
    "Plan",
    "Rows",
    "Step",
    "WithConnection",
    "advance",
    "dialect_of",
    "hnsw_step",
    "run",
    "run_with_settings",
    "settings_params",
]

T = TypeVar("T")
Text = str | sql.SQL | sql.Composed


@dataclass(frozen=True)
class Rows:
    """One read-only statement and its parameters: its rows. ``settings``: the statements that make the
    HNSW settings first, in the statement's transaction, rolled back after (Citus's ``SET LOCAL``s; none on
    one node, where the statement makes them itself from its parameters): :func:`hnsw_step` makes such a
    step for the plan's dialect, so the driver asks no dialect. ``isolated``: nothing it does outlives it,
    and its failure leaves the caller's transaction usable
    (:func:`ragstore.db.connection.run_isolated`). ``what`` names it for ``--explain``."""

    statement: Text
    params: Mapping[str, Any]
    what: str
    settings: tuple[sql.Composed | sql.SQL, ...] = ()
    isolated: bool = True
    binary: bool = True


@dataclass(frozen=True)
class Pipeline:
    """Read-only statements in one round trip: the rows of each."""

    statements: Sequence[tuple[Text, Mapping[str, Any]]]
    what: str


@dataclass(frozen=True)
class Call:
    """A blocking call that is no SQL (an embedding, a chat model, a reranker): its result."""

    fn: Callable[[], Any]
    what: str


@dataclass(frozen=True)
class WithConnection:
    """Work that needs a synchronous connection of its own (the exact path's server-side cursor, HyDE's
    cache): ``fn(conn)``."""

    fn: Callable[[psycopg.Connection[Any]], Any]
    what: str


@dataclass(frozen=True)
class InError:
    """Whether the connection's transaction is in error (a retry would fail too)."""


Step = Rows | Pipeline | Call | WithConnection | InError
Plan = Generator[Step, Any, T]


@dataclass(frozen=True)
class Outcome:
    """What the driver got doing a step: its ``value``, or the ``error`` it raised."""

    value: Any = None
    error: BaseException | None = None


@dataclass(frozen=True)
class Done:
    """The plan returned: its answer."""

    value: Any


def advance(plan: Plan[Any], outcome: Outcome) -> Step | Done:
    """The plan's next step after ``outcome`` of the last (``Outcome()`` to start), or :class:`Done`.

    A database error of the step is thrown into the plan as the RagstoreError that
    :func:`~ragstore.db.connection.map_db_error` makes of it (caused by it), whichever driver ran the step; the
    plan handles it (a stale cached family is read again) or lets it out to the driver's caller."""
    try:
        if outcome.error is None:
            return plan.send(outcome.value)
        return plan.throw(_mapped(outcome.error))
    except StopIteration as stop:
        return Done(stop.value)


def _mapped(error: BaseException) -> BaseException:
    if isinstance(error, psycopg.Error):
        try:
            map_db_error(error)
        except RagstoreError as mapped:
            return mapped
    return error


# -- the synchronous driver ----------------------------------------------------------------------
def run(conn: Conn, plan: Plan[T], *, on_step: Callable[[Step], None] | None = None) -> T:
    """Drive ``plan`` on ``conn`` to its answer; ``on_step`` sees each step before it runs (``--explain``)."""
    step = advance(plan, Outcome())
    while not isinstance(step, Done):
        if on_step is not None:
            on_step(step)
        try:
            outcome = Outcome(execute(conn, step))
        except Exception as exc:  # thrown into the plan, which decides
            outcome = Outcome(error=exc)
        step = advance(plan, outcome)
    return step.value  # type: ignore[no-any-return]


def execute(conn: Conn, step: Step) -> Any:
    """Do one step on ``conn``."""
    if isinstance(step, Rows):
        if step.settings:
            return _settings_first(conn, step)
        if step.isolated:
            return run_isolated(conn, [(step.statement, dict(step.params))], binary=step.binary)[0]
        return conn.execute(step.statement, dict(step.params), binary=step.binary).fetchall()
    if isinstance(step, Pipeline):
        return run_isolated(conn, [(text, dict(params)) for text, params in step.statements])
    if isinstance(step, Call):
        return step.fn()
    if isinstance(step, WithConnection):
        return step.fn(conn)
    if isinstance(step, InError):
        return conn.info.transaction_status == pq.TransactionStatus.INERROR
    raise TypeError(f"not a step: {step!r}")


def _settings_first(conn: Conn, step: Rows) -> list[tuple[Any, ...]]:
    """An HNSW statement on Citus: the settings ``SET LOCAL`` (``citus.propagate_set_commands = 'local'``
    sends them to every worker connection of the transaction; ``set_config(..., true)`` would change the
    coordinator's session only), then the statement, in a transaction (or a savepoint of the caller's)
    rolled back after, so no setting outlives it. Four round trips instead of one: the price of the shards."""
    rows: list[tuple[Any, ...]] = []
    with conn.transaction():
        for setting in step.settings:
            conn.execute(setting)
        rows = conn.execute(step.statement, dict(step.params), binary=step.binary).fetchall()
        raise psycopg.Rollback()
    return rows


def settings_params(params: Mapping[str, Any], *, ef_search: int, iterative: bool) -> dict[str, Any]:
    """``params`` with the values of the two HNSW settings a statement makes itself (the parameters
    ``ragstore_ef`` and ``ragstore_iterative`` of its ``set_config('hnsw.ef_search', ..., true)`` and
    ``set_config('hnsw.iterative_scan', ..., true)``): what a :class:`Rows` step with ``hnsw`` carries."""
    return {
        **params,
        "ragstore_ef": str(int(ef_search)),
        "ragstore_iterative": "relaxed_order" if iterative else "off",
    }


def hnsw_step(
    statement: Text, params: Mapping[str, Any], what: str, *, ef_search: int, iterative: bool, dialect: Dialect
) -> Rows:
    """The step of ``statement``, which makes the HNSW settings itself (:func:`settings_params` are their
    values), in ``dialect``: on one node the statement alone (one round trip), on Citus with the settings'
    ``SET LOCAL`` first (:meth:`~ragstore.db.dialect.Dialect.hnsw_settings`)."""
    values = settings_params(params, ef_search=ef_search, iterative=iterative)
    first = (
        () if dialect.settings_in_statement else tuple(dialect.hnsw_settings(ef_search=ef_search, iterative=iterative))
    )
    return Rows(statement, values, what, settings=first)


def run_with_settings(
    conn: Conn, statement: Text, params: Mapping[str, Any], *, ef_search: int, iterative: bool
) -> Any:
    """Run ``statement``, which makes the HNSW settings itself, as the driver runs such a step (in ONE round
    trip on one node: :func:`~ragstore.db.connection.run_isolated` runs it as its own transaction in
    autocommit, else between a savepoint and its rollback, so no setting outlives the call); its rows. Raises
    the mapped RagstoreError of a failing statement, after which the connection is usable."""
    step = hnsw_step(statement, params, "hnsw", ef_search=ef_search, iterative=iterative, dialect=dialect_of(conn))
    with db_errors():
        return execute(conn, step)
