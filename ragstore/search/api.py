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
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import pq

from ragstore.caches import Caches, caches_for
from ragstore.common.strictjson import text_problem
from ragstore.embed.base import Backend
from ragstore.errors import FingerprintVectorsWarning, InvalidInput, RagstoreError
from ragstore.families import Family, get_family
from ragstore.search import exact as _exact
from ragstore.search import hybrid as _hybrid
from ragstore.search import vector as _vector
from ragstore.search.filters import Filter, check_k, check_min_score, check_query_vector, make_filter
from ragstore.search.mmr import mmr
from ragstore.search.rerank import DEFAULT_DEPTH, Reranker, cross_rerank
from ragstore.search.types import Hit

__all__ = ["MAX_K", "MODES", "RERANKS", "default_mode", "fresh_family", "run_vector", "search", "search_options"]

if TYPE_CHECKING:
    from ragstore.search.hyde import Hyde

Conn = psycopg.Connection[Any]
MODES = ("auto", "hnsw", "exact", "fts", "hybrid")
# The most hits (and MMR candidates) one search returns, in every mode. Above it a search would be cut
# short by the index's candidate list (hnsw.ef_search stops at 1,000) rather than answer in full; a caller
# that wants a whole family reads it, it does not search it.
MAX_K = 1000
RERANKS = ("mmr", "cross")


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
    memo = caches if caches is not None else caches_for(conn)
    request = check_request(
        query=query,
        k=k,
        mode=mode,
        min_score=min_score,
        package=package,
        metadata=metadata,
        ef_search=ef_search,
        rerank=rerank,
        fetch_k=fetch_k,
        mmr_lambda=mmr_lambda,
        fusion=fusion,
        alpha=alpha,
        reranker=reranker,
        rerank_depth=rerank_depth,
        hyde=hyde,
    )
    k, floor, flt, want = request.k, request.floor, request.flt, request.want
    tuning = _Tuning(fusion, alpha, floor)
    hits: list[Hit] | None = None
    cached: tuple[Family, npt.NDArray[np.float32]] | None = None
    if mode in ("auto", "hnsw") and query is None:
        hits, cached = _cached_hnsw(conn, memo, family, vector, want, flt, ef_search, rerank == "mmr")
    elif mode in ("auto", "hybrid") and query is not None and rerank != "mmr" and hyde is None and floor is None:
        hits = _cached_hybrid(conn, memo, family, query, backend, mode, want, flt, tuning)
    if hits is None:
        try:
            hits = _fresh(
                conn, memo, family, query, vector, backend, mode, want, flt, ef_search, rerank, cached, tuning, hyde
            )
        except RagstoreError as exc:
            # The family changed between reading it and running the statement (a model migration swapped
            # its table): read it again and run once more; a second failure is real.
            if not _vector.stale_family_error(exc) or conn.info.transaction_status == pq.TransactionStatus.INERROR:
                raise
            hits = _fresh(
                conn, memo, family, query, vector, backend, mode, want, flt, ef_search, rerank, None, tuning, hyde
            )
    if floor is not None and not tuning.floored:
        hits = [hit for hit in hits if hit.score >= floor]
    note = fingerprint_note(memo.family(family), mode, query, rerank)
    if note is not None:
        warnings.warn(FingerprintVectorsWarning(note), stacklevel=2)
    if rerank == "mmr":
        hits = mmr(hits, k, mmr_lambda)
    elif rerank == "cross":
        assert reranker is not None and query is not None
        hits = cross_rerank(hits, query, reranker, k)
    return hits[:k]


# search()'s keyword arguments and their defaults, read from its signature: what the Store and AsyncStore
# methods take and pass on, so that the arguments are defined once (here, in search()).
SEARCH_DEFAULTS: dict[str, Any] = {
    name: p.default for name, p in inspect.signature(search).parameters.items() if p.kind is p.KEYWORD_ONLY
}


def search_options(options: dict[str, Any]) -> dict[str, Any]:
    """Every keyword argument of :func:`search`, ``options`` over the defaults; TypeError names an
    argument search() does not take (as a call to search() would)."""
    for name in options:
        if name not in SEARCH_DEFAULTS:
            raise TypeError(f"search() got an unexpected keyword argument {name!r}")
    return {**SEARCH_DEFAULTS, **options}


def check_options(query: str | None, options: dict[str, Any]) -> Request:
    """:func:`check_request` on the arguments of a search given as :func:`search_options` returns them."""
    return check_request(query=query, **{name: options[name] for name in _CHECKED})


@dataclass(frozen=True)
class Request:
    """A search's checked arguments: ``k``, the ``min_score`` floor, the filter, and ``want`` (the hits
    to fetch: ``max(fetch_k, k)`` for MMR, else ``k``)."""

    k: int
    floor: float | None
    flt: Filter
    want: int
    ef_search: int | None


def check_request(
    *,
    query: str | None,
    k: int,
    mode: str,
    min_score: float | None,
    package: str | None,
    metadata: dict[str, Any] | None,
    ef_search: int | None,
    rerank: str | None,
    fetch_k: int,
    mmr_lambda: float,
    fusion: str | None = None,
    alpha: float | None = None,
    reranker: Reranker | None = None,
    rerank_depth: int = DEFAULT_DEPTH,
    hyde: Hyde | None = None,
) -> Request:
    """Every check :func:`search` makes before any I/O (InvalidInput naming the argument)."""
    k = _at_most(check_k(k), "k")
    floor = check_min_score(min_score)
    if mode not in MODES:
        raise InvalidInput(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
    if rerank is not None and rerank not in RERANKS:
        raise InvalidInput(f"unknown rerank {rerank!r}: use 'mmr', 'cross' or none")
    if rerank == "cross":
        if reranker is None:
            raise InvalidInput("rerank='cross' needs a reranker (e.g. --reranker-url)")
        if query is None:
            raise InvalidInput("rerank='cross' needs a query text: a reranker reads the query with each hit")
        rerank_depth = _at_most(check_k(rerank_depth, "rerank_depth"), "rerank_depth")
    if hyde is not None and query is None:
        raise InvalidInput("HyDE needs a query text (it asks a chat model to answer it)")
    if rerank == "mmr":
        fetch_k = _at_most(check_k(fetch_k, "fetch_k"), "fetch_k")
        float(mmr_lambda)  # validated by mmr(); a non-number fails here before any I/O
    if ef_search is not None:
        check_k(ef_search, "ef_search")
    flt = make_filter(package, metadata)
    if isinstance(query, str) and (problem := text_problem(query)) is not None:
        raise InvalidInput(f"the query holds {problem}")
    want = max(fetch_k, k) if rerank == "mmr" else max(rerank_depth, k) if rerank == "cross" else k
    if fusion is not None or alpha is not None:
        from ragstore.search.fusion import FUSIONS

        if fusion is not None and fusion not in FUSIONS:
            raise InvalidInput(f"unknown fusion {fusion!r}: use one of {', '.join(FUSIONS)}")
        if mode not in ("auto", "hybrid"):
            raise InvalidInput(f"fusion and alpha apply to the hybrid mode, not to mode {mode!r}")
    return Request(k, floor, flt, want, ef_search)


_CHECKED = [name for name in inspect.signature(check_request).parameters if name != "query"]


class _Tuning:
    """The per-call fusion overrides and score floor a search carries to its hybrid leg."""

    __slots__ = ("alpha", "floor", "floored", "fusion")

    def __init__(self, fusion: str | None, alpha: float | None, floor: float | None) -> None:
        self.fusion, self.alpha, self.floor = fusion, alpha, floor
        self.floored = False  # set when the hybrid path applied the floor (to the cosine) itself


def _at_most(value: int, name: str) -> int:
    if value > MAX_K:
        raise InvalidInput(f"{name} must be at most {MAX_K} (a search returns at most {MAX_K} hits), got {value}")
    return value


def fingerprint_note(family: Family | None, mode: str, query: str | None, rerank: str | None) -> str | None:
    """The note a search on ``family`` carries when it ranks by offline fingerprint vectors (mode hnsw or
    exact, hybrid's vector leg, MMR's diversity; ``auto`` as :func:`default_mode` resolves it), else None.
    :func:`search` issues it as a :class:`~ragstore.errors.FingerprintVectorsWarning`."""
    if family is None or family.backend != "offline":
        return None
    resolved = default_mode(family, query) if mode == "auto" else mode
    if resolved == "fts" and rerank != "mmr":
        return None
    return (
        f"family {family.name} uses offline fingerprint vectors (no meaning); {resolved} ranks by them, by how "
        "alike the texts' characters are, not by what they mean: use mode fts, or a semantic backend "
        "(family create --backend minilm, or family migrate)"
    )


def default_mode(family: Family, query: str | None) -> str:
    """What ``mode="auto"`` runs, chosen from the manpages measurements
    (docs/decisions.md, "The default search mode").

    hybrid for a semantic family (nDCG@10 0.749 against 0.720 vector-only and 0.660 full-text with
    MiniLM); fts for the offline fingerprint, whose vectors carry no meaning (vector-only sits at chance
    and fusing it drags full text down from 0.660 to 0.464); hnsw when only a vector is given.
    """
    if query is None:
        return "hnsw"
    return "fts" if family.backend == "offline" else "hybrid"


def _fresh(
    conn: Conn,
    memo: Caches,
    family: str,
    query: str | None,
    vector: Any,
    backend: Backend | None,
    mode: str,
    want: int,
    flt: Filter,
    ef_search: int | None,
    rerank: str | None,
    cached: tuple[Family, npt.NDArray[np.float32]] | None,
    tuning: _Tuning | None = None,
    hyde: Hyde | None = None,
) -> list[Hit]:
    """The search on family ``family`` read now (one lookup round trip, then the search itself)."""
    fam = fresh_family(conn, family, memo)
    if rerank == "mmr" and query is not None and backend is None and fam.backend == "offline":
        # A text query embeds through the family's own fingerprint: diversity by it means nothing.
        raise InvalidInput(
            f"--rerank mmr cannot run on family {fam.name!r}: its offline vectors are fingerprints of the "
            "text, not meanings, so diversity by them would drop relevant hits; use a semantic family"
        )
    mode = default_mode(fam, query) if mode == "auto" else mode
    tuning = tuning or _Tuning(None, None, None)
    if mode != "hybrid" and (tuning.fusion is not None or tuning.alpha is not None):
        raise InvalidInput(
            f"fusion and alpha apply to hybrid search; family {fam.name!r} runs mode {mode!r} for this query"
        )
    if hyde is not None and mode == "fts":
        raise InvalidInput(
            "HyDE changes the query vector and full text has none: use it with --mode hybrid, hnsw or exact"
            + (
                " (this family's default is full text: its offline vectors carry no meaning)"
                if fam.backend == "offline"
                else ""
            )
        )
    if hyde is not None and backend is None and query is not None:
        from ragstore.ingest.run import backend_for

        backend = backend_for(fam, memo)  # one backend for the query and the hypothetical answer
    query_vector: npt.NDArray[np.float32] | None
    if cached is not None and cached[0] == fam:
        text, query_vector = query, cached[1]
    else:
        text, query_vector = _query(fam, query, vector, backend, memo, needs_vector=mode != "fts" or rerank == "mmr")
    if hyde is not None and text is not None and query_vector is not None:
        assert backend is not None
        query_vector = check_query_vector(hyde.vector(conn, backend, text, query_vector), fam)
    if mode in ("fts", "hybrid"):
        hits = _text_modes(conn, fam, mode, text, query_vector, want, flt, tuning, vectors=rerank == "mmr")
        if rerank == "mmr" and query_vector is not None:
            hits = _with_cosine_relevance(hits, query_vector)
    else:
        assert query_vector is not None
        hits = run_vector(
            conn,
            fam,
            query_vector,
            k=want,
            flt=flt,
            exact=mode == "exact",
            ef_search=ef_search,
            vectors=rerank == "mmr",
            caches=memo,
        )
    return hits


def _with_cosine_relevance(hits: list[Hit], query_vector: npt.NDArray[np.float32]) -> list[Hit]:
    """Hits whose ``score`` is their cosine to the query, for MMR after a full-text or hybrid search.

    MMR weighs relevance against cosine similarity between hits, so relevance must be a cosine too
    (an RRF score of 0.03 or a text rank of 6 would drown or be drowned by it). The order stays the
    search's; MMR's first pick is then the hit nearest the query.
    """
    if hits and all(hit.cosine is not None for hit in hits):  # hybrid: the statement's own cosine
        return [replace(hit, score=hit.cosine) for hit in hits if hit.cosine is not None]
    with_vectors = [i for i, hit in enumerate(hits) if hit.vector is not None]
    if not with_vectors:
        return hits  # mmr() names the problem: it needs the hits' vectors
    matrix = np.stack([np.asarray(hits[i].vector, dtype=np.float32) for i in with_vectors])
    scores = _exact.cosine_scores(matrix, query_vector)
    out = list(hits)
    for i, score in zip(with_vectors, scores, strict=True):
        out[i] = replace(hits[i], score=float(score))
    return out


# The families remembered in a Caches: the HNSW search by vector, filtered or not (the hot path), runs on
# the remembered Family with no lookup round trip and no check of ragstore.families in its statement: what
# it relies on is the table name and the dimension, and the server checks both (a swapped-out table is
# UndefinedTable, another dimension a DataError), after which the family is read again. A text query
# embeds with the family's model (a family dropped and re-created under the same table name with another
# model must not be served from the cache): a hybrid search on a remembered family reads the family's row
# in the same round trip as its statement and keeps the hits only if the row is the one remembered
# (_cached_hybrid); otherwise, and in the other text modes, the family is read first.


def fresh_family(conn: Conn, name: str, caches: Caches | None = None) -> Family:
    """Read family ``name`` (NotFound when there is none) and remember it in ``caches`` (by default the
    connection's)."""
    fam = get_family(conn, name)
    (caches if caches is not None else caches_for(conn)).remember_family(fam)
    return fam


def _cached_hnsw(
    conn: Conn,
    memo: Caches,
    name: str,
    vector: Any,
    k: int,
    flt: Filter,
    ef_search: int | None,
    vectors: bool,
) -> tuple[list[Hit] | None, tuple[Family, npt.NDArray[np.float32]] | None]:
    """The HNSW search by ``vector`` on the cached Family, in one round trip (a filter repeated within a
    minute plans from its remembered estimate, see :func:`~ragstore.search.vector.plan_for`); hits carry
    vectors if ``vectors``.

    Returns ``(None, …)`` whenever the answer must come from the fresh path instead: no cached family, a
    zero query, an error (raised again there if real: a dropped or swapped table, another dimension), or no
    rows from an unfiltered search (an empty family; a filter that keeps no row is answered ``[]`` here).
    The second item is the cached family with the query vector, reused by the fresh path when the family
    has not changed.
    """
    fam = memo.family(name)
    if fam is None:
        return None, None
    try:
        query_vector = check_query_vector(vector, fam)
    except RagstoreError:
        return None, None
    assert query_vector is not None
    if not np.any(query_vector):
        return None, (fam, query_vector)
    try:
        hits = run_vector(conn, fam, query_vector, k=k, flt=flt, ef_search=ef_search, vectors=vectors, caches=memo)
    except RagstoreError:
        memo.forget_family(name)
        return None, None
    if not hits and not flt.active:
        return None, (fam, query_vector)  # an empty family, or one re-created since: the fresh path says
    return hits, (fam, query_vector)  # a filter that keeps no row is an answer: [] (not a second search)


def _cached_hybrid(
    conn: Conn,
    memo: Caches,
    name: str,
    query: str,
    backend: Backend | None,
    mode: str,
    k: int,
    flt: Filter,
    tuning: _Tuning,
) -> list[Hit] | None:
    """A hybrid search by text on the cached Family, the family's row read again in the statement's round
    trip (:func:`ragstore.search.hybrid.hybrid_search_if_current`): a text query embeds with the family's
    model, so the hits count only if the row is still the one remembered.

    Returns None whenever the fresh path must answer: no cached family, a family whose mode for this query
    is not hybrid, an error (raised again there if real), or a family row that changed (the fresh path
    reads it, embeds with its model and searches again).
    """
    fam = memo.family(name)
    if fam is None or (default_mode(fam, query) if mode == "auto" else mode) != "hybrid":
        return None
    try:
        _, query_vector = _query(fam, query, None, backend, memo, needs_vector=True)
        settings = _hybrid.resolve_settings(fam, fusion=tuning.fusion, alpha=tuning.alpha)
        hits = _hybrid.hybrid_search_if_current(
            conn, fam, query, query_vector, k=k, settings=replace(settings, per_leg=max(settings.per_leg, k)), flt=flt
        )
    except RagstoreError:
        return None
    if hits is None:
        memo.forget_family(name)
    return hits


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
    """Run a vector search; its settings never outlive it (see :func:`ragstore.db.connection.run_isolated`).

    ``plan`` forces one of ``vector.PLAN_*`` (benchmarks and check-recall use it); None chooses.
    ``vectors=False`` lets the SQL plans (HNSW and exact over a subset) leave ``Hit.vector`` None (less to
    send); the numpy exact path (``exact=True``) always fills it. Raises DatabaseUnavailable (and
    InvalidInput for a statement the server refuses).
    """
    flt = flt.for_family(family)  # conditions on its declared filter keys read their btree
    if exact:
        hits: list[Hit] = []
        top_level = conn.info.transaction_status == pq.TransactionStatus.IDLE
        with conn.transaction():  # the server-side cursor needs one; rolled back, as the search only reads
            if top_level:
                # The scan and the fetch of the winners' text are two statements: one snapshot for both,
                # or a chunk pruned between them would leave the answer short.
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            hits = _exact.exact_hits(conn, family, query_vector, k=k, flt=flt)
            raise psycopg.Rollback()
        return hits
    if not np.any(query_vector):
        return _vector.zero_query_hits(conn, family, k=k, flt=flt)
    chosen = plan or _vector.plan_for(conn, family, flt, caches=caches)
    if chosen == _vector.PLAN_EXACT_SUBSET:
        return _vector.exact_subset_hits(conn, family, query_vector, k=k, flt=flt, vectors=vectors)
    iterative = chosen == _vector.PLAN_ITERATIVE
    hits = _vector.hnsw_hits(
        conn,
        family,
        query_vector,
        k=k,
        flt=flt,
        ef_search=_vector.ef_search_for(k, ef_search),
        iterative=iterative,
        vectors=vectors,
    )
    if iterative and len(hits) < k:
        # The scan came back short: the filter keeps fewer rows than the estimate said (stale statistics),
        # or the scan stopped at hnsw.max_scan_tuples. Exact over the filtered rows gives every row it keeps.
        hits = _vector.exact_subset_hits(conn, family, query_vector, k=k, flt=flt, vectors=vectors)
    return hits


def _query(
    family: Family, text: str | None, vector: Any, backend: Backend | None, memo: Caches, *, needs_vector: bool
) -> tuple[str | None, npt.NDArray[np.float32] | None]:
    if (text is None) == (vector is None):
        raise InvalidInput("give exactly one of a query text or a query vector")
    if vector is not None:
        return None, check_query_vector(vector, family)
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("the query text is empty")
    if backend is not None:
        family.check_backend(backend)  # a backend of another space is refused whatever the mode
    if not needs_vector:
        return text, None
    if backend is None:
        from ragstore.ingest.run import backend_for

        backend = backend_for(family, memo)
    matrix = backend.embed([text])
    return text, check_query_vector(matrix[0], family)


def _text_modes(
    conn: Conn,
    family: Family,
    mode: str,
    text: str | None,
    query_vector: npt.NDArray[np.float32] | None,
    k: int,
    flt: Filter,
    tuning: _Tuning,
    *,
    vectors: bool,
) -> list[Hit]:
    if text is None:
        raise InvalidInput(f"mode {mode!r} needs a query text (full text has nothing to match a vector with)")
    hits: list[Hit]
    if mode == "fts":
        hits = _hybrid.fts_search(conn, family, text, k=k, package=flt.package, metadata=flt.metadata)
    else:
        settings = _hybrid.resolve_settings(family, fusion=tuning.fusion, alpha=tuning.alpha)
        # Each leg brings at least k candidates (20 per leg by default would fuse at most 40 for k = 300).
        per_leg = max(settings.per_leg, k)
        hits = _hybrid.hybrid_search(
            conn, family, text, query_vector, k=k, per_leg=per_leg, package=flt.package, metadata=flt.metadata,
            settings=settings, vectors=vectors,
        )  # fmt: skip
        if tuning.floor is not None and query_vector is not None:
            # min_score means cosine in hybrid: each hit's cosine to the query as the statement computed it
            # (the vector leg's misses included) against the floor; the hits keep their fused score and order.
            cosines = hit_cosines(hits, query_vector)
            hits = [hit for hit, cos in zip(hits, cosines, strict=True) if cos >= tuning.floor]
            tuning.floored = True
    return hits


def hit_cosines(hits: list[Hit], query_vector: npt.NDArray[np.float32]) -> list[float]:
    """Each hit's cosine to the query: the hybrid statement's (``Hit.cosine``), else computed from the
    hits' vectors (0 for a hit without a vector or a zero query)."""
    if all(hit.cosine is not None for hit in hits):
        return [float(hit.cosine) for hit in hits if hit.cosine is not None]
    if not hits or not np.any(query_vector) or any(hit.vector is None for hit in hits):
        return [0.0] * len(hits)
    matrix = np.stack([np.asarray(hit.vector, dtype=np.float32) for hit in hits])
    return [float(x) for x in _exact.cosine_scores(matrix, query_vector)]
