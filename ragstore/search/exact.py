"""The exact path: numpy cosine over a whole family, streamed, with a bounded top-k.

The family's vectors come from a server-side (named) cursor ``batch_size`` rows at a time; each batch is
scored against the query and merged into the best ``k`` so far with :func:`heapq.nsmallest`, so memory is
O(batch + k), never O(rows). Scoring is float64 and per row independent of the batch: the dot products
and norms are accumulated one dimension at a time over the batch, so a row gets the same bits whatever
batch it arrives in, and a tiny batch gives byte for byte the result of one batch holding everything.

Ranking: score descending, then chunk_id ascending (ties included); a zero-magnitude row or query scores 0.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import pq, sql

from ragstore.db.connection import Conn, db_errors
from ragstore.db.dialect import dialect_of
from ragstore.db.sqlfiles import query
from ragstore.families import Family
from ragstore.search.request import Filter, Hit, to_float32

F64 = npt.NDArray[np.float64]
Batch = tuple[list[str], npt.NDArray[np.float32]]
Ranked = list[tuple[float, str]]

# Rows per fetch: about 8 MB of float32 per batch, so memory stays O(batch) at any dimension.
BATCH_BYTES = 8 * 1024 * 1024


# How often the exact path runs its scan and fetch when a winner vanished between them (see exact_hits).
EXACT_ATTEMPTS = 3


def cosine_scores(matrix: npt.NDArray[np.float32], query_vector: npt.NDArray[np.float32]) -> F64:
    """Cosine of each row of ``matrix`` with ``query_vector`` in float64; 0 where either norm is 0.

    Accumulated one dimension at a time so that each row's bits do not depend on the other rows.
    """
    rows = np.asarray(matrix, dtype=np.float64)
    q = np.asarray(query_vector, dtype=np.float64)
    dot = np.zeros(rows.shape[0], dtype=np.float64)
    sq = np.zeros(rows.shape[0], dtype=np.float64)
    for j in range(rows.shape[1]):
        column = rows[:, j]
        dot += column * q[j]
        sq += column * column
    q_norm = float(np.sqrt(np.sum(q * q)))
    norms = np.sqrt(sq) * q_norm
    safe = np.where(norms > 0.0, norms, 1.0)
    scores: F64 = np.where(norms > 0.0, dot / safe, 0.0)
    return scores


def _rank_key(item: tuple[float, str]) -> tuple[float, str]:
    return (-item[0], item[1])


def merge_top_k(best: Ranked, ids: list[str], scores: F64, k: int) -> Ranked:
    """The ``k`` best of ``best`` and the batch (``ids``/``scores``) by (score desc, chunk_id asc)."""
    if len(best) >= k:
        # Only rows at least as good as the current k-th can enter; equal scores stay in for the tie-break.
        keep = np.nonzero(scores >= best[-1][0])[0]
    else:
        keep = np.arange(len(ids))
    if keep.size > k:
        kth = np.partition(scores[keep], keep.size - k)[keep.size - k]
        keep = keep[scores[keep] >= kth]
    candidates = best + [(float(scores[i]), ids[i]) for i in keep]
    return heapq.nsmallest(k, candidates, key=_rank_key)


def approx_scores(matrix: npt.NDArray[np.float32], query_vector: npt.NDArray[np.float32]) -> F64:
    """Cosine of each row with the query in float32 through one BLAS product: fast, within
    :func:`margin` of :func:`cosine_scores` (it may differ with the batch it is computed in). 0 where a
    norm is 0."""
    rows = np.asarray(matrix, dtype=np.float32)
    q = np.asarray(query_vector, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows)) * np.float32(np.sqrt(q @ q))
    safe = np.where(norms > 0.0, norms, np.float32(1.0))
    scores: F64 = np.where(norms > 0.0, (rows @ q) / safe, 0.0).astype(np.float64)
    return scores


def margin(dim: int) -> float:
    """A bound on |approx_scores - cosine_scores| with room to spare: float32 dot products and norms of
    ``dim`` terms err by about ``dim`` float32 ulps (2**-24) of the unit-scaled result."""
    return max(1e-6, 8.0 * dim * 2.0**-24)


def candidates(approx: F64, floor: float, k: int, slack: float) -> npt.NDArray[np.intp]:
    """Rows whose approximate score may put them in the exact top ``k``: at least ``floor - slack`` and
    at least the batch's own k-th approximate score ``- slack`` (``slack`` is :func:`margin`)."""
    bar = floor - slack
    if approx.size > k:
        bar = max(bar, float(np.partition(approx, approx.size - k)[approx.size - k]) - slack)
    return np.nonzero(approx >= bar)[0]


def top_k(batches: Iterable[Batch], query_vector: npt.NDArray[np.float32], k: int) -> Ranked:
    """Exact top ``k`` ``(score, chunk_id)`` over streamed batches; pure, memory O(batch + k).

    Each batch is screened with :func:`approx_scores`; only the rows that may enter the top k are scored
    by :func:`cosine_scores`, whose bits do not depend on the batch, so the result is the same byte for
    byte whatever the batch size.
    """
    best: Ranked = []
    for ids, matrix in batches:
        if not ids:
            continue
        floor = best[-1][0] if len(best) >= k else -math.inf
        keep = candidates(approx_scores(matrix, query_vector), floor, k, margin(matrix.shape[1]))
        if keep.size:
            best = merge_top_k(best, [ids[i] for i in keep], cosine_scores(matrix[keep], query_vector), k)
    return best


def top_k_many(batches: Iterable[Batch], queries: npt.NDArray[np.float32], k: int) -> list[Ranked]:
    """Exact top ``k`` for each row of ``queries`` in one pass over the batches (check-recall's truth).

    Uses one matrix product per batch (BLAS): scores may differ from :func:`cosine_scores` in the last
    ulp, which does not matter for measuring recall.
    """
    q = np.asarray(queries, dtype=np.float64)
    q_norms = np.linalg.norm(q, axis=1)
    q_unit = q / np.where(q_norms > 0.0, q_norms, 1.0)[:, None]
    best: list[Ranked] = [[] for _ in range(q.shape[0])]
    for ids, matrix in batches:
        if not ids:
            continue
        rows = np.asarray(matrix, dtype=np.float64)
        norms = np.linalg.norm(rows, axis=1)
        unit = rows / np.where(norms > 0.0, norms, 1.0)[:, None]
        scores = unit @ q_unit.T
        for j in range(q.shape[0]):
            best[j] = merge_top_k(best[j], ids, scores[:, j], k)
    return best


def default_batch(family: Family) -> int:
    """Rows per batch for ``family``: :data:`BATCH_BYTES` of float32, between 1,024 and 50,000 rows."""
    return max(1024, min(50_000, BATCH_BYTES // (4 * family.dim)))


def pages_per_batch(family: Family, batch_rows: int) -> int:
    """Heap pages holding about ``batch_rows`` rows of ``family`` (a row is its vector plus ~150 bytes)."""
    rows_per_page = max(1, 8192 // (family.dim * (2 if family.vector_type == "halfvec" else 4) + 150))
    return max(1, batch_rows // rows_per_page)


def decode(blob: bytes, rows: int, family: Family) -> npt.NDArray[np.float32]:
    """``rows`` concatenated ``vector_send``/``halfvec_send`` values of ``family`` as a float32 matrix.

    The binary form is int16 dim, int16 unused, then ``dim`` big-endian float32 (float16 for halfvec): the
    4-byte header is one float32 slot (two float16 slots), dropped after reading the whole batch at once.
    """
    dtype, head = (">f2", 2) if family.vector_type == "halfvec" else (">f4", 1)
    raw = np.frombuffer(blob, dtype=dtype).reshape(rows, family.dim + head)
    return raw[:, head:].astype(np.float32)


_PAGE_RANGE = sql.SQL(
    "e.ctid >= ('(' || g.first_page || ',0)')::tid AND e.ctid < ('(' || g.first_page + %(step)s || ',0)')::tid"
)


def stream_batches(conn: Conn, family: Family, flt: Filter, batch_size: int | None = None) -> Iterator[Batch]:
    """Yield ``(chunk_ids, float32 matrix)`` batches of the family's rows passing ``flt``.

    One statement through a binary server-side cursor: each fetched row is a batch of about
    ``batch_size`` rows (a range of heap pages, see the ``stream_vectors`` block), decoded by
    :func:`decode` with no Python step per row. The caller must be inside a transaction.
    Raises DatabaseUnavailable.
    """
    send = "halfvec_send" if family.vector_type == "halfvec" else "vector_send"
    if not dialect_of(conn).page_ranges:
        yield from _stream_rows(conn, family, flt, batch_size or default_batch(family), send)
        return
    step = pages_per_batch(family, batch_size or default_batch(family))
    statement = sql.SQL(query("search", "stream_vectors")).format(
        table=sql.Identifier(family.table), where=flt.where(extra=_PAGE_RANGE), send=sql.SQL(send)
    )
    relation = sql.Identifier("ragstore", family.table).as_string(conn)
    with db_errors(), conn.cursor(name="ragstore_exact_stream", binary=True) as cur:
        cur.itersize = 1
        cur.execute(statement, {**flt.params(), "relation": relation, "step": step})
        while row := cur.fetchone():
            ids, blob = row
            yield list(ids), decode(blob, len(ids), family)


def _stream_rows(conn: Conn, family: Family, flt: Filter, batch_rows: int, send: str) -> Iterator[Batch]:
    """:func:`stream_batches` on Citus: rows (not heap-page ranges: a ctid means nothing across shards)
    through a server-side cursor, ``batch_rows`` at a time, decoded a batch at once."""
    statement = sql.SQL(dialect_of(conn).block("search", "stream_vectors")).format(
        table=sql.Identifier(family.table), where=flt.where(), send=sql.SQL(send)
    )
    with db_errors(), conn.cursor(name="ragstore_exact_stream", binary=True) as cur:
        cur.itersize = batch_rows
        cur.execute(statement, flt.params())
        while rows := cur.fetchmany(batch_rows):
            yield [row[0] for row in rows], decode(b"".join(row[1] for row in rows), len(rows), family)


def exact_search(
    conn: Conn, family: Family, query_vector: npt.NDArray[np.float32], *, k: int, flt: Filter
) -> list[Hit]:
    """:func:`exact_hits` in a transaction of its own (or a savepoint of the caller's), rolled back: the
    search only reads. At the top level the scan and the fetch of the winners' text share one REPEATABLE READ
    snapshot, or a chunk pruned between them would leave the answer short."""
    hits: list[Hit] = []
    top_level = conn.info.transaction_status == pq.TransactionStatus.IDLE
    with conn.transaction():  # the server-side cursor needs one
        if top_level:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        hits = exact_hits(conn, family, query_vector, k=k, flt=flt)
        raise psycopg.Rollback()
    return hits


def exact_hits(
    conn: Conn,
    family: Family,
    query_vector: npt.NDArray[np.float32],
    *,
    k: int,
    flt: Filter,
    batch_size: int | None = None,
) -> list[Hit]:
    """Exact top ``k`` hits of ``family`` (rows passing ``flt``), with text, metadata and vectors.

    Two statements whatever k: the streamed scan, then one fetch of the k winners' chunks (both again,
    at most :data:`EXACT_ATTEMPTS` times, when a winner vanished between them).
    The caller must be inside a transaction (server-side cursor). Raises DatabaseUnavailable.
    """
    statement = sql.SQL(query("search", "hits_by_ids")).format(table=sql.Identifier(family.table))
    for _attempt in range(EXACT_ATTEMPTS):
        ranked = top_k(stream_batches(conn, family, flt, batch_size), query_vector, k)
        if not ranked:
            return []
        with db_errors():
            rows = conn.execute(statement, {"ids": [chunk_id for _, chunk_id in ranked]}).fetchall()
        by_id = {row[0]: row for row in rows}
        # Inside a caller's READ COMMITTED transaction the two statements see two snapshots: a winner
        # deleted (pruned) in between is missing from the fetch. The scan is then run again, so the answer
        # is never short; a top-level search runs both in one REPEATABLE READ snapshot and never retries.
        if len(by_id) == len(ranked):
            break
    hits: list[Hit] = []
    for score, chunk_id in ranked:
        row = by_id.get(chunk_id)
        if row is None:  # deleted between the scan and the fetch
            continue
        _, package_path, text, metadata, embedding = row
        hits.append(
            Hit(
                chunk_id=chunk_id,
                package_path=package_path,
                score=score,
                text=text,
                vector=to_float32(embedding),
                metadata=dict(metadata or {}),
            )
        )
    return hits
