"""``check_recall``: how well a family's HNSW index finds the true top k (``ragstore check-recall``).

Queries are a seeded sample of the family's own stored vectors (of the filtered rows when a filter is
given) plus Gaussian noise of ``noise`` times each vector's norm, or the embeddings of given query texts.
For each query the HNSW search (exactly as :func:`ragstore.search.search` runs it, filtered plan choice
included) is compared with the exact top k, computed for all queries in one streamed pass over the family.
recall@k = |HNSW ∩ exact| / |exact|, averaged over queries with a non-empty truth. When no query has
one (an empty family, a filter that keeps no row) nothing was measured: InvalidInput says so, never a
recall of 1.0 that a CI gate would pass.

The HNSW search reads the family's index in its storage (``vector``, ``halfvec``, or ``bit`` with its
re-rank: ragstore.families.storage), so the figure is that of the storage as configured; it is recorded on
the family (option ``recall``, shown by ``ragstore family show``) when the role may update the registry,
and forgotten when the storage or the model changes. The reads of a call made outside any transaction are
committed before that write; on Citus, a call inside the caller's transaction records nothing (Citus refuses
a registry write after parallel reads of the shards in one transaction).

Latency: every HNSW query is timed; the exact path (:func:`ragstore.search.exact.exact_hits`, a full
scan per query) is timed on the first ``exact_timings`` queries only, and the report says how many.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from ragstore.common.stats import p95
from ragstore.db.citus import on_citus
from ragstore.db.connection import Conn, db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import InvalidInput
from ragstore.families import Family, get_family
from ragstore.search import exact as _exact
from ragstore.search.api import MAX_K, run_vector
from ragstore.search.request import Filter, check_k, ef_search_for, make_filter, to_float32


@dataclass(frozen=True)
class RecallReport:
    """What check-recall measured. Latencies in milliseconds; ``passed`` is None without a minimum."""

    family: str
    k: int
    queries: int
    ef_search: int
    recall: float
    hnsw_mean_ms: float
    hnsw_p95_ms: float
    exact_mean_ms: float
    exact_p95_ms: float
    exact_timed: int
    min_recall: float | None
    passed: bool | None
    storage: str = "vector"
    rerank_factor: int | None = None
    recorded: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {key: (round(v, 4) if isinstance(v, float) else v) for key, v in asdict(self).items()}


def recall_at_k(found: Sequence[str], truth: Sequence[str]) -> float:
    """|found ∩ truth| / |truth| (1.0 when the truth is empty: nothing could be missed)."""
    if not truth:
        return 1.0
    return len(set(found) & set(truth)) / len(truth)


def _sample_queries(
    conn: Conn, family: Family, flt: Filter, samples: int, noise: float, seed: int
) -> npt.NDArray[np.float32]:
    statement = sql.SQL(query("search", "sample_vectors")).format(table=sql.Identifier(family.table), where=flt.where())
    with conn.transaction(), db_errors():
        rows = conn.execute(statement, {**flt.params(), "seed": seed, "n": samples}).fetchall()
        raise psycopg.Rollback()
    if not rows:
        return np.zeros((0, family.dim), dtype=np.float32)
    base = np.stack([to_float32(r[0]) for r in rows]).astype(np.float64)
    rng = np.random.default_rng(seed)
    norms = np.linalg.norm(base, axis=1, keepdims=True)
    noisy = base + noise * norms * rng.standard_normal(base.shape) / np.sqrt(family.dim)
    return noisy.astype(np.float32)


def check_recall(
    conn: Conn,
    family: str,
    *,
    k: int = 10,
    samples: int = 200,
    ef_search: int | None = None,
    package: str | None = None,
    metadata: dict[str, Any] | None = None,
    queries: Sequence[str] | None = None,
    noise: float = 0.05,
    seed: int = 0,
    min_recall: float | None = None,
    exact_timings: int = 20,
    record: bool = True,
) -> RecallReport:
    """Measure HNSW recall@k against the exact top k; see the module docstring.

    With ``record``, the result is written on the family (:func:`record_recall`) where the role may.
    Raises NotFound (family), InvalidInput (k, samples, min_recall outside [0, 1], no query evaluated),
    DatabaseUnavailable.
    """
    k = check_k(k)
    if k > MAX_K:  # the exact top k and the HNSW search it is compared with return at most MAX_K
        raise InvalidInput(f"k must be at most {MAX_K} (a search returns at most {MAX_K} hits), got {k}")
    samples = check_k(samples, "samples")
    if ef_search is not None:
        check_k(ef_search, "ef_search")
    if min_recall is not None and not 0.0 <= float(min_recall) <= 1.0:
        raise InvalidInput(f"min_recall must be in [0, 1], got {min_recall!r}")
    flt = make_filter(package, metadata)
    ours = conn.info.transaction_status == TransactionStatus.IDLE  # no transaction of the caller's is open
    fam = get_family(conn, family)
    if queries:
        from ragstore.caches import caches_for
        from ragstore.families import backend_for

        matrix = backend_for(fam, caches_for(conn)).embed(list(queries))
    else:
        matrix = _sample_queries(conn, fam, flt, samples, noise, seed)
    with conn.transaction():
        truth = _exact.top_k_many(_exact.stream_batches(conn, fam, flt), matrix, k)
        raise psycopg.Rollback()
    recalls: list[float] = []
    hnsw_ms: list[float] = []
    exact_ms: list[float] = []
    for i, q in enumerate(matrix):
        started = time.perf_counter()
        hits = run_vector(conn, fam, q, k=k, flt=flt, ef_search=ef_search)
        hnsw_ms.append((time.perf_counter() - started) * 1000)
        if truth[i]:
            recalls.append(recall_at_k([h.chunk_id for h in hits], [cid for _, cid in truth[i]]))
        if i < exact_timings:
            started = time.perf_counter()
            run_vector(conn, fam, q, k=k, flt=flt, exact=True)
            exact_ms.append((time.perf_counter() - started) * 1000)
    if not recalls:
        where = "" if not flt.active else " that the filter (--package/--where) keeps"
        raise InvalidInput(
            f"check-recall evaluated no query: family {fam.name!r} has no rows{where}, so there is no true top "
            f"{k} to compare with; nothing was measured"
        )
    recall = float(np.mean(recalls))
    report = RecallReport(
        family=fam.name,
        k=k,
        queries=len(matrix),
        ef_search=ef_search_for(k, ef_search),
        recall=recall,
        hnsw_mean_ms=float(np.mean(hnsw_ms)) if hnsw_ms else 0.0,
        hnsw_p95_ms=p95(hnsw_ms),
        exact_mean_ms=float(np.mean(exact_ms)) if exact_ms else 0.0,
        exact_p95_ms=p95(exact_ms),
        exact_timed=len(exact_ms),
        min_recall=min_recall,
        passed=None if min_recall is None else recall >= min_recall,
        storage=fam.storage,
        rerank_factor=fam.rerank_factor if fam.storage == "bit" else None,
    )
    if not record:
        return report
    if ours and conn.info.transaction_status == TransactionStatus.INTRANS:
        conn.commit()  # the reads this call began: on Citus a registry write may not follow them in one transaction
    elif on_citus(conn) and not ours:
        return report  # the caller's transaction read the shards in parallel: Citus refuses the registry write
    return replace(report, recorded=record_recall(conn, fam, report, filtered=flt.active, texts=bool(queries)))


def record_recall(conn: Conn, family: Family, report: RecallReport, *, filtered: bool, texts: bool) -> bool:
    """Write ``report``'s figure on ``family`` as option ``recall`` (what ``family show`` prints): recall,
    k, ef_search, the number of queries, whether they were filtered or query texts, the storage and rerank
    factor, and the time. Only for a role that may update the registry, and only while the family has the
    storage it was measured in; True when written."""
    measured = {
        "recall": round(report.recall, 4),
        "k": report.k,
        "ef_search": report.ef_search,
        "queries": report.queries,
        "filtered": filtered,
        "texts": texts,
        "storage": report.storage,
        "rerank_factor": report.rerank_factor,
    }
    params = {
        "recall": Jsonb(measured),
        "name": family.name,
        "table": family.table,
        "storage": None if "storage" not in family.options else Jsonb(family.options["storage"]),
        "rerank_factor": None if "rerank_factor" not in family.options else Jsonb(family.options["rerank_factor"]),
    }
    with conn.transaction(), db_errors():
        may = conn.execute(query("search", "may_record_recall")).fetchone()
        if not (may and may[0]):
            return False
        return conn.execute(query("search", "record_recall"), params).fetchone() is not None


def sweep_recall(conn: Conn, family: str, ef_values: Sequence[int], **options: Any) -> list[RecallReport]:
    """:func:`check_recall` at each ``ef_search`` in ``ef_values`` (same samples and seed each time), for the
    recall-against-ef_search curve. ``options`` are check_recall's; ``min_recall`` is not applied here."""
    if not ef_values:
        raise InvalidInput("give at least one ef_search value to sweep")
    options.pop("min_recall", None)
    options.pop("ef_search", None)
    return [check_recall(conn, family, ef_search=ef, exact_timings=0, record=False, **options) for ef in ef_values]
