"""The synchronous driver of search plans: runs each step of a plan on one psycopg connection.

Errors are mapped and thrown into the plan by :func:`ragstore.search.steps.advance`, the one loop both
drivers turn; the plan may handle them (a stale cached family is read again) or let them out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from psycopg import pq

from ragstore.db.connection import Conn, run_isolated
from ragstore.db.dialect import dialect_of
from ragstore.search import vector as _vector
from ragstore.search.steps import Call, Done, InError, Outcome, Pipeline, Plan, Rows, Step, WithConnection, advance

__all__ = ["dialect_of", "run"]

T = TypeVar("T")


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
        if step.hnsw is not None:
            ef_search, iterative = step.hnsw
            params = dict(step.params)
            return _vector.run_with_settings(conn, step.statement, params, ef_search=ef_search, iterative=iterative)
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
