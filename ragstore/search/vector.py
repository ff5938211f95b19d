"""The SQL paths of a vector search: HNSW, exact over a filtered subset, and the zero query.

Every function here runs ONE statement on a connection the caller has put inside a transaction (the
``SET LOCAL`` settings of :func:`apply_settings` end with it), and returns hits ordered by score
descending, then chunk_id ascending, each with its text, metadata and vector from the same statement.

Plan choice for a filtered search (``plan_for``): the filtered rows are counted through the btree on
``package_path`` (or the metadata GIN index) up to a budget: :func:`~ragstore.search.filters.exact_max_rows`
(3,000 rows below 256 dimensions, 5,000 from 256), or 2% of a large family up to 25,000 rows
(:func:`~ragstore.search.filters.count_with_budget`: counted exactly up to the floor, estimated by the
planner between the floor and the 2% budget);
at or under it the search is exact over those rows (recall 1.0), above it HNSW with
``hnsw.iterative_scan = relaxed_order`` so the index keeps scanning until k rows pass the filter.
Without iterative scan a 1% filter returns ~0.4 rows of 10 (pgvector filters after the ef_search
candidates), which is why a filtered query never runs plain HNSW.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from pgvector import HalfVector, Vector
from psycopg import pq, sql

from ragstore.db.connection import db_errors, map_db_error
from ragstore.db.sqlfiles import query
from ragstore.families import Family
from ragstore.search.filters import Filter, count_up_to, count_with_budget, estimated_rows, exact_max_rows
from ragstore.search.types import Hit

Conn = psycopg.Connection[Any]

# hnsw.ef_search when the caller names none (pgvector's own default is 40). From the recall curve of
# benchmarks/query.py (docs/search.md), recall@10 on clustered 100k rows: 384-d ef 40 .936, 64 .969,
# 100 .976, 200 .985; 16-d saturates at .983 from ef 40. 100 clears 0.95 at 384-d with room.
DEFAULT_EF_SEARCH = 100
# hnsw.ef_search of a filtered query's iterative scan when the caller names none: relaxed_order keeps
# scanning until k rows pass the filter, but its recall is bounded by the ef_search-wide candidate list.
# Measured (benchmarks/query.py, 10% filter, recall@10 / p50): 16-d ef 100 .988 / 1.88 ms, ef 400
# .999 / 2.02 ms; 384-d ef 100 .976 / 4.55 ms, ef 400 .993 / 4.08 ms.
FILTERED_EF_SEARCH = 400
# pgvector's bound on hnsw.ef_search.
MAX_EF_SEARCH = 1000

PLAN_HNSW = "hnsw"
PLAN_ITERATIVE = "hnsw-iterative"
PLAN_EXACT_SUBSET = "exact-subset"


def ef_search_for(k: int, ef_search: int | None, *, filtered: bool = False) -> int:
    """``max(k, configured)``, capped at 1000; configured is ``ef_search`` when given, else
    :data:`FILTERED_EF_SEARCH` for a filtered (iterative) scan and :data:`DEFAULT_EF_SEARCH` otherwise."""
    default = FILTERED_EF_SEARCH if filtered else DEFAULT_EF_SEARCH
    return min(max(k, ef_search if ef_search is not None else default), MAX_EF_SEARCH)


def apply_settings(conn: Conn, *, ef_search: int, iterative: bool) -> None:
    """``SET LOCAL`` the HNSW settings inside the caller's transaction (they end with it).

    For callers that run their own statements in a transaction (hybrid search); :func:`hnsw_hits`
    sends settings and statement in one round trip instead.
    """
    with db_errors():
        conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', %s, true)",
            (str(int(ef_search)), "relaxed_order" if iterative else "off"),
        )


def plan_for(conn: Conn, family: Family, flt: Filter, threshold: int | None = None) -> str:
    """Which plan a query with ``flt`` takes: plain HNSW, exact over a small subset (at most ``threshold``
    rows; by default the budget of :func:`~ragstore.search.filters.count_with_budget`), or iterative HNSW."""
    if not flt.active:
        return PLAN_HNSW
    if threshold is None:
        rows, budget = count_with_budget(conn, family, flt)
        if rows <= exact_max_rows(family.dim):
            return PLAN_EXACT_SUBSET
        if budget > exact_max_rows(family.dim) and estimated_rows(conn, family, flt) <= budget:
            return PLAN_EXACT_SUBSET
        return PLAN_ITERATIVE
    if count_up_to(conn, family, flt, threshold) <= threshold:
        return PLAN_EXACT_SUBSET
    return PLAN_ITERATIVE


def query_param(family: Family, vector: npt.NDArray[np.float32]) -> Vector | HalfVector:
    """The query as the pgvector value the family's column compares with."""
    return HalfVector(vector) if family.vector_type == "halfvec" else Vector(vector)


def compose(family: Family, block: str, flt: Filter) -> sql.Composed:
    """Block ``block`` of ``ragstore/sql/search.sql`` with the family's names and the filter filled in."""
    return sql.SQL(query("search", block)).format(
        table=sql.Identifier(family.table),
        vtype=family.identifiers()["vector_type"],
        join=flt.join(),
        where=flt.where(),
    )


def run_block(conn: Conn, family: Family, block: str, flt: Filter, params: dict[str, Any]) -> list[Hit]:
    """Run block ``block`` for ``family`` (one statement, no settings) and turn its rows into hits."""
    with db_errors():
        rows = conn.execute(compose(family, block, flt), {**flt.params(), **params}, binary=True).fetchall()
    return [row_to_hit(row) for row in rows]


def run_with_settings(
    conn: Conn, statement: sql.Composed | str, params: dict[str, Any], *, ef_search: int, iterative: bool
) -> list[tuple[Any, ...]]:
    """Run ``statement``, which sets the HNSW settings itself, in ONE round trip; return its rows.

    The statement calls ``set_config('hnsw.ef_search', %(ragstore_ef)s, true)`` and
    ``set_config('hnsw.iterative_scan', %(ragstore_iterative)s, true)`` (filled in here), so the settings
    are transaction-local. In autocommit with no transaction open the statement is its own transaction:
    one message, and the settings end with it. Otherwise it runs in a pipeline
    ``SAVEPOINT; statement; ROLLBACK TO SAVEPOINT; RELEASE SAVEPOINT``, still one round trip, and the
    caller's transaction is left as it was. Raises the mapped RagstoreError of a failing statement, after
    which the connection is usable (the savepoint is rolled back).
    """
    values = {
        **params,
        "ragstore_ef": str(int(ef_search)),
        "ragstore_iterative": "relaxed_order" if iterative else "off",
    }
    if conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE:
        with db_errors():
            return conn.execute(statement, values, binary=True).fetchall()
    try:
        with conn.pipeline():
            conn.execute(_SAVEPOINT)
            cur = conn.execute(statement, values, binary=True)
            conn.execute(_ROLLBACK_TO)
            conn.execute(_RELEASE)
        return cur.fetchall()
    except psycopg.Error as exc:
        with contextlib.suppress(psycopg.Error):
            conn.execute(_ROLLBACK_TO)
            conn.execute(_RELEASE)
        map_db_error(exc)


_SAVEPOINT = sql.SQL("SAVEPOINT ragstore_search")
_ROLLBACK_TO = sql.SQL("ROLLBACK TO SAVEPOINT ragstore_search")
_RELEASE = sql.SQL("RELEASE SAVEPOINT ragstore_search")
# The hnsw block's LATERAL scan references its settings row, so the settings are made before the scan.
_SETTINGS_REF = sql.SQL("s.settings IS NOT NULL")


def hnsw_statement(family: Family, flt: Filter, k: int, *, vectors: bool = True) -> str:
    """The ``hnsw`` block for ``family``, ``flt`` and ``k`` (a literal, so the prepared statement keeps a
    generic plan), returning the rows' vectors when ``vectors``; its parameters are the filter's, ``q``
    and the two settings :func:`run_with_settings` fills in. Rendered once per
    shape (the hot path composes nothing)."""
    return _hnsw_text(
        family.table, family.vector_type, family.dim, int(k), bool(flt.package), bool(flt.metadata), vectors
    )


@functools.lru_cache(maxsize=512)
def _hnsw_text(table: str, vector_type: str, dim: int, k: int, package: bool, metadata: bool, vectors: bool) -> str:
    shape = Filter("x" if package else None, {"x": 1} if metadata else None)
    return (
        sql.SQL(query("search", "hnsw"))
        .format(
            k=sql.Literal(k),
            embedding=sql.SQL("t.embedding" if vectors else "NULL"),
            table=sql.Identifier(table),
            vtype=sql.SQL(f"{vector_type}({int(dim)})"),  # vector_type is checked by ragstore.families
            join=shape.join(),
            where=shape.where(extra=_SETTINGS_REF),
        )
        .as_string()
    )


def hnsw_hits(
    conn: Conn,
    family: Family,
    vector: npt.NDArray[np.float32],
    *,
    k: int,
    flt: Filter,
    ef_search: int,
    iterative: bool,
    vectors: bool = True,
) -> list[Hit]:
    """Top ``k`` through the HNSW index (``ORDER BY embedding <=> q LIMIT k``), re-sorted; one round trip.
    Hits carry their vectors when ``vectors`` (else ``Hit.vector`` is None).

    The statement does not re-read ``ragstore.families``: a ``family`` whose table was dropped (a model
    migration's swap) raises SchemaError caused by UndefinedTable, see :func:`stale_family_error`.
    """
    params = {**flt.params(), "q": query_param(family, vector)}
    statement = hnsw_statement(family, flt, k, vectors=vectors)
    rows = run_with_settings(conn, statement, params, ef_search=ef_search, iterative=iterative)
    return [row_to_hit(row) for row in rows]


def exact_subset_hits(conn: Conn, family: Family, vector: npt.NDArray[np.float32], *, k: int, flt: Filter) -> list[Hit]:
    """Exact top ``k`` over the rows ``flt`` keeps, computed by Postgres (meant for small subsets)."""
    return run_block(conn, family, "exact_subset", flt, {"q": query_param(family, vector), "k": k})


def zero_query_hits(conn: Conn, family: Family, *, k: int, flt: Filter) -> list[Hit]:
    """A zero-magnitude query: every row scores 0, so the first ``k`` rows by chunk_id."""
    return run_block(conn, family, "zero_query", flt, {"k": k})


def to_float32(value: Any) -> npt.NDArray[np.float32]:
    """A pgvector ``Vector``/``HalfVector`` (or sequence) as a float32 1-d array."""
    raw = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(raw, dtype=np.float32)


def row_to_hit(row: tuple[Any, ...]) -> Hit:
    """A ``chunk_id, package_path, score, text, metadata, embedding`` row as a Hit (embedding and metadata
    may be NULL: no vector, and ``{}``)."""
    chunk_id, package_path, score, text, metadata, embedding = row
    # Positional (the field order of Hit): this runs once per hit on the hot path.
    return Hit(
        chunk_id,
        package_path,
        score,  # float8, already a float
        text,
        None if embedding is None else to_float32(embedding),
        {} if metadata is None else metadata,  # a fresh dict from the JSON loader
    )


def stale_family_error(exc: BaseException) -> bool:
    """True when ``exc`` says the Family a statement was built from no longer matches the database: its
    table is gone (UndefinedTable: a model migration swapped the family's table and dropped the old one,
    or the family was dropped) or its column has another dimension (a family re-created under the same
    table name). The caller re-reads the family once and runs again."""
    cause = exc.__cause__
    if isinstance(cause, psycopg.errors.UndefinedTable):
        return True
    return isinstance(cause, psycopg.errors.DataException) and "dimensions" in str(cause)
