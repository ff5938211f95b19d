"""``search()``: one call for every read mode (vector top-k, exact, full text, hybrid, MMR).

Contracts (all fail closed, InvalidInput unless said otherwise):

- ``family`` must exist (NotFound); exactly one of ``query`` (text, embedded with the family's own backend)
  or ``vector`` is given. A vector of another dimension, or a ``backend`` of another model than the
  family's, is ModelMismatch; a non-finite vector component is refused.
- ``k`` and ``fetch_k`` are positive integers (a bool is not) of at most :data:`MAX_K` (1,000), and up to
  that bound every mode returns ``min(k, rows that match)`` hits; ``min_score`` is finite; ``ef_search``
  a positive integer; ``mode`` one of :data:`MODES`; ``rerank`` None, ``"mmr"`` or ``"cross"`` (which
  needs a ``reranker`` and a query text; ``rerank_depth`` is a positive integer of at most MAX_K).
- ``min_score`` has one meaning per mode, the score a user can read a threshold on: ``hnsw`` and
  ``exact`` keep hits whose cosine to the query is at least ``min_score``; ``hybrid`` keeps hits whose
  COSINE to the query is at least it (the fused score has no fixed scale: RRF stays below 0.04, a
  z-score fusion is centred on 0), while the hits keep their fused ``score`` and order; ``fts`` keeps
  hits whose full-text score (an idf sum, 0 to about 10 per word) is at least it.
- ``rerank="mmr"`` with a text query on a family of the offline backend is refused: the query's and
  the chunks' vectors are fingerprints of the text, so "diverse" by them means nothing and MMR would
  drop relevant hits. (A caller searching by its own vector, or passing its own backend, chose what
  the vectors mean.)
- ``fusion`` (``"rrf"``/``"cc"``) and ``alpha`` override the family's fusion settings
  (:mod:`ragstore.search.fusion`) for a hybrid search; with any other mode they are refused.
- An empty family returns ``[]``. Hits are ordered by score descending, then chunk_id ascending
  (MMR returns its pick order). A zero-magnitude query or row scores 0.
- HNSW settings are transaction-local (``set_config(..., true)``), made by the search statement itself,
  which runs as its own transaction in autocommit and inside a savepoint rolled back at the end
  otherwise: nothing leaks to the connection.

Modes: ``auto`` (the default) is what :func:`default_mode` picks: ``hybrid`` for a text query on a
family with a semantic backend, ``fts`` for the offline fingerprint, ``hnsw`` for a bare vector.
``hnsw`` uses the index, choosing exact-over-subset or iterative scan for filtered queries (see
:mod:`ragstore.search.vector`); ``exact`` is the streamed numpy path; ``fts`` and ``hybrid`` are
:mod:`ragstore.search.fts`'s and :mod:`ragstore.search.hybrid`'s.

The request is checked once (:class:`~ragstore.search.request.SearchRequest`), planned once
(:func:`ragstore.search.plan.plan_search`) and run by a driver: :mod:`ragstore.search.drive` here and in
``Store.search``, :mod:`ragstore.search.drive_async` in ``AsyncStore.search``.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import psycopg

from ragstore.caches import Caches, caches_for
from ragstore.embed.base import Backend
from ragstore.errors import FingerprintVectorsWarning
from ragstore.families import Family, get_family
from ragstore.search import drive
from ragstore.search.plan import default_mode, fingerprint_note, hit_cosines, plan_search, plan_vector
from ragstore.search.request import MAX_K, MODES, RERANKS, Filter, Hit, SearchRequest
from ragstore.search.rerank import DEFAULT_DEPTH, Reranker

__all__ = [
    "MAX_K",
    "MODES",
    "RERANKS",
    "default_mode",
    "fingerprint_note",
    "fresh_family",
    "hit_cosines",
    "run_vector",
    "search",
    "search_request",
]

if TYPE_CHECKING:
    from ragstore.search.hyde import Hyde

Conn = psycopg.Connection[Any]


def search(
    conn: Conn,
    family: str,
    query: str | None = None,
    *,
    vector: Any = None,
    k: int = 10,
    mode: str = "auto",
    min_score: float | None = None,
    package: str | None = None,
    metadata: dict[str, Any] | None = None,
    ef_search: int | None = None,
    rerank: str | None = None,
    mmr_lambda: float = 0.5,
    fetch_k: int = 50,
    backend: Backend | None = None,
    caches: Caches | None = None,
    fusion: str | None = None,
    alpha: float | None = None,
    reranker: Reranker | None = None,
    rerank_depth: int = DEFAULT_DEPTH,
    hyde: Hyde | None = None,
) -> list[Hit]:
    """The top ``k`` hits of ``family`` for ``query`` (text) or ``vector``; see the module docstring.

    With ``rerank="mmr"`` the top ``max(fetch_k, k)`` are fetched with their vectors and re-ranked by
    :func:`~ragstore.search.mmr.mmr` with ``mmr_lambda``; without it, HNSW and hybrid hits leave
    ``Hit.vector`` None (the exact and full-text modes fill it). ``min_score`` drops hits below it, by the
    mode's own measure (module docstring). ``fusion``/``alpha`` override the family's hybrid fusion for this call.
    ``caches`` holds the families, filter estimates and backends remembered between calls (a
    :class:`ragstore.Store` passes its own); by default the connection's (:func:`ragstore.caches.caches_for`).

    With ``rerank="cross"`` the top ``max(rerank_depth, k)`` first-stage hits (after ``min_score``) go to
    ``reranker`` with the query text, and the best ``k`` come back in its order, each keeping its
    first-stage ``score`` and gaining ``first_rank`` and ``rerank_score``
    (:func:`~ragstore.search.rerank.cross_rerank`).

    With ``hyde`` (a text query, in a mode with a vector leg) the query vector is combined with the
    vector of a hypothetical answer (:class:`~ragstore.search.hyde.Hyde`); ``hyde.last`` says what was
    done, including a fall back to the plain query. The full-text leg keeps the query text.
    Raises InvalidInput, ModelMismatch, NotFound, DatabaseUnavailable.
    """
    request = SearchRequest(
        family, query, vector=vector, k=k, mode=mode, min_score=min_score, package=package, metadata=metadata,
        ef_search=ef_search, rerank=rerank, mmr_lambda=mmr_lambda, fetch_k=fetch_k, backend=backend, fusion=fusion,
        alpha=alpha, reranker=reranker, rerank_depth=rerank_depth, hyde=hyde,
    )  # fmt: skip
    return search_request(conn, request, caches, stacklevel=3)


def search_request(
    conn: Conn, request: SearchRequest, caches: Caches | None = None, *, stacklevel: int = 2
) -> list[Hit]:
    """The hits of ``request`` on ``conn`` (its plan run by the sync driver); a search on offline fingerprint
    vectors issues a :class:`~ragstore.errors.FingerprintVectorsWarning`."""
    memo = caches if caches is not None else caches_for(conn)
    answer = drive.run(conn, plan_search(request, memo, drive.dialect_of(conn)))
    if answer.note is not None:
        warnings.warn(FingerprintVectorsWarning(answer.note), stacklevel=stacklevel)
    return answer.hits


def fresh_family(conn: Conn, name: str, caches: Caches | None = None) -> Family:
    """Read family ``name`` (NotFound when there is none) and remember it in ``caches`` (by default the
    connection's)."""
    fam = get_family(conn, name)
    (caches if caches is not None else caches_for(conn)).remember_family(fam)
    return fam


def run_vector(
    conn: Conn,
    family: Family,
    query_vector: npt.NDArray[np.float32],
    *,
    k: int,
    flt: Filter,
    exact: bool = False,
    ef_search: int | None = None,
    plan: str | None = None,
    vectors: bool = True,
    caches: Caches | None = None,
) -> list[Hit]:
    """Run a vector search (:func:`ragstore.search.plan.plan_vector`); its settings never outlive it.

    ``plan`` forces one of ``vector.PLAN_*`` (benchmarks and check-recall use it); None chooses.
    ``vectors=False`` lets the SQL plans (HNSW and exact over a subset) leave ``Hit.vector`` None (less to
    send); the numpy exact path (``exact=True``) always fills it. Raises DatabaseUnavailable (and
    InvalidInput for a statement the server refuses).
    """
    memo = caches if caches is not None else caches_for(conn)
    steps = plan_vector(
        family, query_vector, k=k, flt=flt, exact=exact, ef_search=ef_search, plan=plan, vectors=vectors,
        memo=memo, dialect=drive.dialect_of(conn),
    )  # fmt: skip
    return drive.run(conn, steps)
