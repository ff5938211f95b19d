"""The SQL paths of a vector search: HNSW, exact over a filtered subset, and the zero query.

Every function here runs ONE statement (settings included, transaction-local) and returns hits ordered
by score descending, then chunk_id ascending, each with its text, metadata and vector from the same
statement.

Plan choice for a filtered search (:func:`plan_for`), from the planner's estimate of the rows the filter
keeps (:func:`cached_estimate`: one ``EXPLAIN``, statistics and no scan, remembered per Store or connection for a
minute): at most :meth:`RowEstimate.budget` rows (3,000 below 256 dimensions,
5,000 from 256, or on a large family 2% of its rows up to 25,000) -> exact over those rows in SQL (recall
1.0); more -> HNSW with ``hnsw.iterative_scan = relaxed_order`` so the index keeps scanning until k rows
pass the filter (the caller, :func:`ragstore.search.api.run_vector`, answers exactly over the filtered rows
should the scan still come back short: a stale estimate), so k hits come back whenever k rows pass.
Without iterative scan a 1% filter
returns ~0.4 rows of 10 (pgvector filters after the ef_search candidates): a filtered query never runs
plain HNSW.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from ragstore.caches import Caches, caches_for
from ragstore.db.connection import Conn, run_isolated
from ragstore.db.dialect import POSTGRES, Dialect, dialect_of
from ragstore.db.sqlfiles import query
from ragstore.families import Family
from ragstore.families.storage import order_expression
from ragstore.search import drive, metafilter
from ragstore.search.request import MAX_EF_SEARCH, Filter, Hit, ShapeFilter, row_to_hit

# A filtered query whose filter keeps at most this many rows (estimated) runs exact in SQL over those rows (recall 1.0);
# a wider filter runs HNSW with iterative scan. Measured with benchmarks/query.py (docs/search.md), p50 of
# exact-over-subset / iterative scan (ef 100), with the un-materialized exact plan: 16-d 1,000 rows 0.37,
# 2,000 rows 0.74, 5,000 rows 1.64, 10,000 rows 2.92; 384-d 1,000 rows 1.04, 2,000 rows 0.53, 5,000 rows
# 0.51, 10,000 rows 2.42. Crossover: ~3,000 rows at 16-d, between 5,000 and 10,000 at 384-d.
FILTER_EXACT_MAX_ROWS = 3_000
FILTER_EXACT_MAX_ROWS_WIDE = 5_000
WIDE_DIM = 256
# On a large family a filter that keeps a small FRACTION of it also goes exact, up to SELECTIVE_MAX_ROWS:
# an iterative scan walks about k / selectivity graph entries before k of them pass the filter, while the
# exact subset reads only the rows it keeps (from contiguous pages: a bulk load clusters the family by
# package_path). Measured at 1M x 16-d (benchmarks/query.py, exact subset vs iterative ef 100, p50):
# 1% = 10,000 rows 3.2 vs 12.4 ms; 2% = 20,000 rows 6.1 vs 8.1 ms; 5% = 50,000 rows 15.1 vs 5.3 ms.
SELECTIVE_FRACTION = 0.02
SELECTIVE_MAX_ROWS = 25_000


def exact_max_rows(dim: int) -> int:
    """The exact-over-subset threshold for vectors of ``dim`` dimensions (see the figures above)."""
    return FILTER_EXACT_MAX_ROWS_WIDE if dim >= WIDE_DIM else FILTER_EXACT_MAX_ROWS


PLAN_HNSW = "hnsw"
PLAN_ITERATIVE = "hnsw-iterative"
PLAN_EXACT_SUBSET = "exact-subset"


def plan_for(
    conn: Conn, family: Family, flt: Filter, threshold: int | None = None, caches: Caches | None = None
) -> str:
    """Which plan a query with ``flt`` takes: plain HNSW (no filter), exact over the filtered rows when the
    planner estimates at most ``threshold`` of them (by default :meth:`RowEstimate.budget
    <RowEstimate.budget>`), else iterative HNSW. The estimate is remembered per
    connection (:func:`cached_estimate`), so a repeated filter plans with no round trip."""
    if not flt.active:
        return PLAN_HNSW
    estimate = cached_estimate(conn, family, flt, caches)
    limit = estimate.budget(family.dim) if threshold is None else threshold
    return PLAN_EXACT_SUBSET if estimate.rows <= limit else PLAN_ITERATIVE


# The hnsw block's LATERAL scan references its settings row, so the settings are made before the scan.
_SETTINGS_REF = sql.SQL("s.settings IS NOT NULL")


def hnsw_statement(family: Family, flt: Filter, k: int, *, vectors: bool = True, dialect: Dialect = POSTGRES) -> str:
    """The ``hnsw`` block for ``family``, ``flt`` and ``k``, returning the rows' vectors when ``vectors``;
    its parameters are the filter's, ``q`` and the two settings :func:`ragstore.search.drive.settings_params`
    fills in. With the ``dialect``'s statement set (on Citus the form it pushes to the shards:
    ``ragstore/sql/search_citus.sql``)."""
    return _statement_text(
        "hnsw", family.table, family.vector_type, family.dim, k, *_shape(flt), vectors, dialect, *_storage(family, k)
    )


def exact_subset_statement(
    family: Family, flt: Filter, k: int, *, vectors: bool = True, dialect: Dialect = POSTGRES
) -> str:
    """The ``exact_subset`` block for ``family``, ``flt`` and ``k``; its parameters are the filter's and ``q``."""
    return _statement_text(
        "exact_subset", family.table, family.vector_type, family.dim, k, *_shape(flt), vectors, dialect
    )


def _storage(family: Family, k: int) -> tuple[str, int]:
    """The storage of ``family`` and the rows its index reads for ``k`` hits (more than k for ``bit``)."""
    return family.storage, family.candidates(k)


def _shape(flt: Filter) -> tuple[bool, metafilter.Shape | None]:
    return bool(flt.package), flt.metadata_shape


# The parts of search.sql's hnsw and exact_subset blocks that differ on Citus: the block named
# "<block>_<part>" of search.sql on one node, of search_citus.sql on Citus (nothing when that file has none).
_PARTS = ("settings", "lateral", "distance")


def _block_text(block: str, dialect: Dialect) -> str:
    """Block ``block`` of search.sql with the ``dialect``'s parts filled in (constant SQL texts of the
    package, never input)."""
    text = query("search", block)
    for part in _PARTS:
        marker = "{" + part + "}"
        if marker in text:
            name = "hnsw_settings" if part == "settings" else f"{block}_{part}"
            found = dialect.part("search", name)
            text = text.replace(marker, found + "\n" if found and part == "settings" else found)
    return text


@functools.lru_cache(maxsize=512)
def _statement_text(
    block: str,
    table: str,
    vector_type: str,
    dim: int,
    k: int,
    package: bool,
    metadata: metafilter.Shape | None,
    vectors: bool,
    dialect: Dialect = POSTGRES,
    storage: str = "vector",
    candidates: int = 0,
) -> str:
    """Block ``block`` of search.sql rendered for one shape of query: ``k`` is a literal (so a prepared
    statement keeps its plan), the filter's parameters are named. Rendered once per shape: the hot path
    composes nothing."""
    shape = ShapeFilter("x" if package else None, None, metadata)
    return (
        sql.SQL(_block_text(block, dialect))
        .format(
            k=sql.Literal(int(k)),
            embedding=sql.SQL("t.embedding" if vectors else "NULL"),
            table=sql.Identifier(table),
            vtype=sql.SQL(f"{vector_type}({int(dim)})"),  # vector_type is checked by ragstore.families
            order=sql.SQL(order_expression(storage, vector_type, dim, "e.embedding", "%(q)s")),
            candidates=sql.Literal(int(candidates or k)),
            where=shape.where(extra=_SETTINGS_REF if block == "hnsw" and dialect.settings_in_statement else None),
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
    params = {**flt.params(), "q": family.query_param(vector)}
    statement = hnsw_statement(family, flt, k, vectors=vectors, dialect=dialect_of(conn))
    # the bit storage reads k × rerank_factor candidates: the graph search keeps at least that many
    ef_search = min(max(ef_search, family.candidates(k)), MAX_EF_SEARCH)
    rows = drive.run_with_settings(conn, statement, params, ef_search=ef_search, iterative=iterative)
    return [row_to_hit(row) for row in rows]


def exact_subset_hits(
    conn: Conn, family: Family, vector: npt.NDArray[np.float32], *, k: int, flt: Filter, vectors: bool = True
) -> list[Hit]:
    """Exact top ``k`` over the rows ``flt`` keeps, computed by Postgres (meant for small subsets); hits
    carry their vectors when ``vectors``."""
    statement = exact_subset_statement(family, flt, k, vectors=vectors, dialect=dialect_of(conn))
    params = {**flt.params(), "q": family.query_param(vector)}
    # Isolated like the hnsw statement: it may run on a cached Family whose table is gone (a model
    # migration's swap), and that failure must not abort the caller's transaction.
    rows = run_isolated(conn, [(statement, params)], binary=True)[0]
    return [row_to_hit(row) for row in rows]


def zero_query_statement(family: Family, flt: Filter, k: int, *, dialect: Dialect = POSTGRES) -> str:
    """The ``zero_query`` block for ``family``, ``flt`` and ``k``; its parameters are the filter's."""
    return _statement_text("zero_query", family.table, family.vector_type, family.dim, k, *_shape(flt), True, dialect)


def zero_query_hits(conn: Conn, family: Family, *, k: int, flt: Filter) -> list[Hit]:
    """A zero-magnitude query: every row scores 0, so the first ``k`` rows by chunk_id."""
    statement = zero_query_statement(family, flt, k, dialect=dialect_of(conn))
    rows = run_isolated(conn, [(statement, flt.params())], binary=True)[0]
    return [row_to_hit(row) for row in rows]


def stale_family_error(exc: BaseException) -> bool:
    """True when ``exc`` says the Family a statement was built from no longer matches the database: its
    table is gone (UndefinedTable: a model migration swapped the family's table and dropped the old one,
    or the family was dropped) or its column has another dimension (a family re-created under the same
    table name). The caller re-reads the family once and runs again."""
    cause = exc.__cause__
    if isinstance(cause, psycopg.errors.UndefinedTable):
        return True
    return isinstance(cause, psycopg.errors.DataException) and "dimensions" in str(cause)


# -- the planner's estimate of the rows a filter keeps ----------------------------------------
@dataclass(frozen=True)
class RowEstimate:
    """The planner's estimates for a filtered search: rows passing the filter, and rows in the family."""

    rows: float
    total: float

    def budget(self, dim: int) -> int:
        """The most filtered rows an exact search should read: :func:`exact_max_rows`, or on a large family
        ``SELECTIVE_FRACTION`` of its rows up to ``SELECTIVE_MAX_ROWS``."""
        floor = exact_max_rows(dim)
        return max(floor, min(SELECTIVE_MAX_ROWS, math.floor(SELECTIVE_FRACTION * max(self.total, 0.0))))


def estimate_statements(family: Family, flt: Filter) -> list[tuple[sql.Composed | str, dict[str, Any]]]:
    """The two read-only statements of an estimate: ``EXPLAIN`` of the filtered scan, and the family's
    ``pg_class.reltuples``."""
    explain = sql.SQL("EXPLAIN (FORMAT JSON) SELECT 1 FROM ragstore.{table} AS e {where}").format(
        table=sql.Identifier(family.table), where=flt.where()
    )
    relation = f'ragstore."{family.table}"'  # family.table is a checked name: [a-z][a-z0-9_]*
    total_sql = "SELECT greatest(reltuples, 0)::float8 FROM pg_class WHERE oid = %(relation)s::regclass"
    return [(explain, flt.params()), (total_sql, {"relation": relation})]


def read_estimate(plan_rows: list[tuple[Any, ...]], total_rows: list[tuple[Any, ...]]) -> RowEstimate:
    """The RowEstimate the rows of :func:`estimate_statements` say."""
    plan_row = plan_rows[0] if plan_rows else None
    total_row = total_rows[0] if total_rows else None
    plan = plan_row[0] if plan_row else None
    if isinstance(plan, str):
        plan = json.loads(plan)
    try:
        rows = float(plan[0]["Plan"]["Plan Rows"])  # type: ignore[index]
    except (TypeError, KeyError, IndexError, ValueError):
        rows = math.inf  # no estimate: the iterative plan, whose short answers fall back to exact
    return RowEstimate(rows, float(total_row[0]) if total_row else 0.0)


def estimate_rows(conn: Conn, family: Family, flt: Filter) -> RowEstimate:
    """The planner's estimate of the rows passing ``flt`` (``EXPLAIN``: statistics, no scan) and of the
    family's rows (``pg_class.reltuples``, 0 before the first ANALYZE), in one round trip."""
    plan_rows, total_rows = run_isolated(conn, estimate_statements(family, flt))
    return read_estimate(plan_rows, total_rows)


def estimate_key(family: Family, flt: Filter) -> tuple[str, str | None, str | None] | None:
    """What an estimate is remembered under; None when the metadata cannot be keyed (keys of mixed types)."""
    try:
        metadata = None if flt.metadata is None else json.dumps(flt.metadata, sort_keys=True)
    except TypeError:
        return None
    if metadata is not None and flt.keys:  # another statement, another estimate
        metadata += " declared " + json.dumps(sorted(flt.keys))
    return (family.table, flt.package, metadata)


def cached_estimate(conn: Conn, family: Family, flt: Filter, caches: Caches | None = None) -> RowEstimate:
    """:func:`estimate_rows`, remembered in ``caches`` (by default the connection's, see
    :func:`ragstore.caches.caches_for`) during :data:`ragstore.caches.ESTIMATE_TTL_SECONDS`."""
    key = estimate_key(family, flt)
    if key is None:  # keys of mixed types cannot be sorted: estimate, but do not remember
        return estimate_rows(conn, family, flt)
    store = caches if caches is not None else caches_for(conn)
    hit = store.estimate(key)
    if hit is not None:
        return hit
    estimate = estimate_rows(conn, family, flt)
    store.remember_estimate(key, estimate)
    return estimate
