"""The synchronous driver of search plans: runs each step of a plan on one psycopg connection.

Errors are mapped here, once (:func:`ragstore.db.connection.db_errors`), and thrown into the plan, which
may handle them (a stale cached family is read again) or let them out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from psycopg import pq

from ragstore.db.citus import on_citus
from ragstore.db.connection import Conn, db_errors, run_isolated
from ragstore.search import vector as _vector
from ragstore.search.steps import Call, InError, Pipeline, Plan, Rows, Step, WithConnection

__all__ = ["citus_of", "run"]

T = TypeVar("T")


def citus_of(conn: Conn) -> bool:
    """The dialect a plan is made for: whether ``conn`` is on Citus (asked once per connection)."""
    return on_citus(conn)


def run(conn: Conn, plan: Plan[T], *, on_step: Callable[[Step], None] | None = None) -> T:
    """Drive ``plan`` on ``conn`` to its answer; ``on_step`` sees each step before it runs (``--explain``)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = plan.send(value) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        if on_step is not None:
            on_step(step)
        try:
            value = execute(conn, step)
        except Exception as exc:  # thrown into the plan, which decides
            error = exc


def execute(conn: Conn, step: Step) -> Any:
    """Do one step on ``conn``."""
    if isinstance(step, Rows):
        if step.hnsw is not None:
            ef_search, iterative = step.hnsw
            params = dict(step.params)
            return _vector.run_with_settings(conn, step.statement, params, ef_search=ef_search, iterative=iterative)
        if step.isolated:
            return run_isolated(conn, [(step.statement, dict(step.params))], binary=step.binary)[0]
        with db_errors():
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
