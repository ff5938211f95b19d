"""The SQL paths of a vector search: HNSW, exact over a filtered subset, and the zero query.

Every function here runs ONE statement on a connection the caller has put inside a transaction (the
``SET LOCAL`` settings of :func:`apply_settings` end with it), and returns hits ordered by score
descending, then chunk_id ascending, each with its text, metadata and vector from the same statement.

Plan choice for a filtered search (``plan_for``): the filtered rows are counted through the btree on
``package_path`` (or the metadata GIN index) up to :data:`~ragstore.search.filters.FILTER_EXACT_MAX_ROWS`;
at or under it the search is exact over those rows (recall 1.0), above it HNSW with
``hnsw.iterative_scan = relaxed_order`` so the index keeps scanning until k rows pass the filter.
Without iterative scan a 1% filter returns ~0.4 rows of 10 (pgvector filters after the ef_search
candidates), which is why a filtered query never runs plain HNSW.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from pgvector import HalfVector, Vector
from psycopg import pq, sql

from ragstore.db.connection import db_errors, map_db_error
from ragstore.db.sqlfiles import query
from ragstore.families import Family
from ragstore.search.filters import FILTER_EXACT_MAX_ROWS, Filter, count_up_to
from ragstore.search.types import Hit

Conn = psycopg.Connection[Any]

# hnsw.ef_search when the caller names none (pgvector's own default is 40). Chosen from the recall
# curve of benchmarks/query.py (docs/search.md): 40 gave recall@10 ~0.95 on clustered 384-d, 100 gave
# ~0.99 for ~1.3x the latency.
DEFAULT_EF_SEARCH = 100
# pgvector's bound on hnsw.ef_search.
MAX_EF_SEARCH = 1000

PLAN_HNSW = "hnsw"
PLAN_ITERATIVE = "hnsw-iterative"
PLAN_EXACT_SUBSET = "exact-subset"


def ef_search_for(k: int, ef_search: int | None) -> int:
    """``max(k, configured)`` where configured is ``ef_search`` or :data:`DEFAULT_EF_SEARCH`, capped at 1000."""
    return min(max(k, ef_search if ef_search is not None else DEFAULT_EF_SEARCH), MAX_EF_SEARCH)


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


def plan_for(conn: Conn, family: Family, flt: Filter, threshold: int = FILTER_EXACT_MAX_ROWS) -> str:
    """Which plan a query with ``flt`` takes: plain HNSW, exact over a small subset, or iterative HNSW."""
    if not flt.active:
        return PLAN_HNSW
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
        rows = conn.execute(compose(family, block, flt), {**flt.params(), **params}).fetchall()
    return [row_to_hit(row) for row in rows]


def run_with_settings(
    conn: Conn, statement: sql.Composable, params: dict[str, Any], *, ef_search: int, iterative: bool
) -> list[tuple[Any, ...]]:
    """Run ``statement`` with the HNSW settings ``SET LOCAL``, in ONE round trip, and return its rows.

    The script is ``BEGIN`` (or ``SAVEPOINT`` inside the caller's transaction), the ``set_config(…, true)``,
    the statement, then ``ROLLBACK`` (or ``ROLLBACK TO SAVEPOINT``): the settings end with it and never
    reach the session. Values are bound client-side (the only way to send several statements at once).
    """
    nested = not conn.autocommit or conn.info.transaction_status != pq.TransactionStatus.IDLE
    begin, end = (
        (
            sql.SQL("SAVEPOINT ragstore_search"),
            sql.SQL("ROLLBACK TO SAVEPOINT ragstore_search; RELEASE SAVEPOINT ragstore_search"),
        )
        if nested
        else (sql.SQL("BEGIN"), sql.SQL("ROLLBACK"))
    )
    settings = sql.SQL(
        "SELECT set_config('hnsw.ef_search', %(ragstore_ef)s, true), "
        "set_config('hnsw.iterative_scan', %(ragstore_iterative)s, true)"
    )
    script = sql.SQL("; ").join([begin, settings, statement, end])
    values = {
        **params,
        "ragstore_ef": str(int(ef_search)),
        "ragstore_iterative": "relaxed_order" if iterative else "off",
    }
    cur = psycopg.ClientCursor(conn)
    try:
        cur.execute(script, values)
        for _ in range(2):  # BEGIN/SAVEPOINT, then the settings: the statement's rows are the third result
            cur.nextset()
        return cur.fetchall()
    except psycopg.Error as exc:
        with contextlib.suppress(psycopg.Error):
            conn.execute(end if nested else sql.SQL("ROLLBACK"))
        map_db_error(exc)
    finally:
        cur.close()


def hnsw_hits(
    conn: Conn,
    family: Family,
    vector: npt.NDArray[np.float32],
    *,
    k: int,
    flt: Filter,
    ef_search: int,
    iterative: bool,
) -> list[Hit]:
    """Top ``k`` through the HNSW index (``ORDER BY embedding <=> q LIMIT k``), re-sorted; settings SET LOCAL."""
    params = {**flt.params(), "q": query_param(family, vector), "k": k}
    rows = run_with_settings(conn, compose(family, "hnsw", flt), params, ef_search=ef_search, iterative=iterative)
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
    chunk_id, package_path, score, text, metadata, embedding = row
    return Hit(
        chunk_id=chunk_id,
        package_path=package_path,
        score=float(score),
        text=text,
        vector=None if embedding is None else to_float32(embedding),
        metadata=dict(metadata or {}),
    )
