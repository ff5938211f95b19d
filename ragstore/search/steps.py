"""What a search plan asks its driver to do, one step at a time (psycopg's ``generators.py`` shape).

A plan (:mod:`ragstore.search.plan`) is a generator: it yields a step, the driver does it and sends the
result back (or throws the step's error into the plan, mapped to ragstore's error tree), until the plan
returns its answer. The plan holds no connection; the drivers hold it: :func:`ragstore.search.drive.run` on a
psycopg connection, :func:`ragstore.search.drive_async.run` on an async one. A step is plain data, so
``ragstore search --explain`` prints the statements the plan yields.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql

__all__ = ["Call", "InError", "Pipeline", "Plan", "Rows", "Step", "WithConnection"]

T = TypeVar("T")
Text = str | sql.SQL | sql.Composed


@dataclass(frozen=True)
class Rows:
    """One read-only statement and its parameters: its rows. ``hnsw`` (ef_search, iterative) says the
    statement makes the HNSW settings itself (``set_config(..., true)`` on one node; on Citus the driver
    ``SET LOCAL``s them first, see :func:`ragstore.search.vector.run_with_settings`). ``isolated``: nothing it
    does outlives it, and its failure leaves the caller's transaction usable
    (:func:`ragstore.db.connection.run_isolated`). ``what`` names it for ``--explain``."""

    statement: Text
    params: Mapping[str, Any]
    what: str
    hnsw: tuple[int, bool] | None = None
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
