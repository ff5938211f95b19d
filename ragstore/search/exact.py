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
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from ragstore.db.connection import db_errors
from ragstore.db.sqlfiles import query
from ragstore.families import Family
from ragstore.search.filters import Filter
from ragstore.search.types import Hit
from ragstore.search.vector import to_float32

Conn = psycopg.Connection[Any]
F64 = npt.NDArray[np.float64]
Batch = tuple[list[str], npt.NDArray[np.float32]]
Ranked = list[tuple[float, str]]

DEFAULT_BATCH = 4096


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


def top_k(batches: Iterable[Batch], query_vector: npt.NDArray[np.float32], k: int) -> Ranked:
    """Exact top ``k`` ``(score, chunk_id)`` over streamed batches; pure, memory O(batch + k)."""
    best: Ranked = []
    for ids, matrix in batches:
        if ids:
            best = merge_top_k(best, ids, cosine_scores(matrix, query_vector), k)
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


def _statement(family: Family, block: str, flt: Filter) -> sql.Composed:
    return sql.SQL(query("search", block)).format(
        table=sql.Identifier(family.table), join=flt.join(), where=flt.where()
    )


def stream_batches(conn: Conn, family: Family, flt: Filter, batch_size: int = DEFAULT_BATCH) -> Iterator[Batch]:
    """Yield ``(chunk_ids, float32 matrix)`` batches of the family's rows passing ``flt``.

    Reads through a server-side cursor, so the caller must be inside a transaction.
    """
    with db_errors(), conn.cursor(name="ragstore_exact_stream", binary=True) as cur:
        cur.itersize = batch_size
        cur.execute(_statement(family, "stream_vectors", flt), flt.params())
        while rows := cur.fetchmany(batch_size):
            ids = [row[0] for row in rows]
            matrix = np.stack([to_float32(row[1]) for row in rows])
            yield ids, matrix


def exact_hits(
    conn: Conn,
    family: Family,
    query_vector: npt.NDArray[np.float32],
    *,
    k: int,
    flt: Filter,
    batch_size: int = DEFAULT_BATCH,
) -> list[Hit]:
    """Exact top ``k`` hits of ``family`` (rows passing ``flt``), with text, metadata and vectors.

    Two statements whatever k: the streamed scan, then one fetch of the k winners' chunks.
    The caller must be inside a transaction (server-side cursor). Raises DatabaseUnavailable.
    """
    ranked = top_k(stream_batches(conn, family, flt, batch_size), query_vector, k)
    if not ranked:
        return []
    statement = sql.SQL(query("search", "hits_by_ids")).format(table=sql.Identifier(family.table))
    with db_errors():
        rows = conn.execute(statement, {"ids": [chunk_id for _, chunk_id in ranked]}).fetchall()
    by_id = {row[0]: row for row in rows}
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
