"""The search plan: a :class:`~ragstore.search.request.SearchRequest` turned into the steps that answer it.

:func:`plan_search` is a generator of :mod:`ragstore.search.drive` (psycopg's ``generators.py`` shape):
it holds no connection, so the sync driver (:mod:`ragstore.search.drive`: ``search()``, ``Store.search``,
``ragstore search``) and the async one (:mod:`ragstore.search.drive_async`: ``AsyncStore.search``) run the same
plan, and ``ragstore search --explain`` prints the statements it yields. ``dialect``
(:class:`~ragstore.db.dialect.Dialect`, chosen once per connection by the driver) picks the statement texts
and says what the database can do. The contracts are the module
docstring of :mod:`ragstore.search.api`'s.

The route, in order:

- a remembered family (:class:`~ragstore.caches.Caches`) is searched in one round trip: HNSW by vector,
  or hybrid by text with the family's row checked in the same statement (the block ``guard``); any doubt
  (no hits, an error, another row) falls back to
- the fresh route: read the family, resolve ``auto`` (:func:`default_mode`), embed the query, run the mode's
  statement: ``hnsw`` (plain, iterative, or exact over a small filtered subset, chosen from the planner's
  remembered estimate; an iterative scan that comes back short is answered exactly), ``exact`` (numpy over
  the streamed family), ``fts`` or ``hybrid``; a family swapped between its read and its statement (a model
  migration) is read again, once;
- then the ``min_score`` floor, MMR or a cross-encoder.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ragstore.caches import Caches
from ragstore.db.dialect import BY_CITUS, IS_CITUS, Dialect
from ragstore.embed.base import Backend
from ragstore.errors import InvalidInput, RagstoreError
from ragstore.families import GET_FAMILY, Family, backend_for, check_name, family_not_found, row_to_family
from ragstore.search import exact as _exact
from ragstore.search import fts as _fts
from ragstore.search import hybrid as _hybrid
from ragstore.search import vector as _vector
from ragstore.search.drive import Call, InError, Pipeline, Plan, Rows, Step, WithConnection, hnsw_step
from ragstore.search.mmr import mmr
from ragstore.search.request import (
    MAX_EF_SEARCH,
    Filter,
    Hit,
    SearchRequest,
    check_query_vector,
    ef_search_for,
    row_to_hit,
)
from ragstore.search.rerank import cross_rerank

__all__ = ["Answer", "default_mode", "fingerprint_note", "learn_dialect", "plan_search", "plan_vector", "read_family"]

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Answer:
    """A search's hits, and the note its caller issues as a FingerprintVectorsWarning (or None)."""

    hits: list[Hit]
    note: str | None


class _Tuning:
    """The per-call fusion overrides and score floor a search carries to its hybrid leg."""

    __slots__ = ("alpha", "floor", "floored", "fusion")

    def __init__(self, fusion: str | None, alpha: float | None, floor: float | None) -> None:
        self.fusion, self.alpha, self.floor = fusion, alpha, floor
        self.floored = False  # set when the hybrid path applied the floor (to the cosine) itself


def plan_search(req: SearchRequest, memo: Caches, dialect: Dialect) -> Plan[Answer]:
    """The steps of ``req`` (module docstring), with ``memo`` the families and estimates remembered."""
    tuning = _Tuning(req.fusion, req.alpha, req.floor)
    hits: list[Hit] | None = None
    cached: tuple[Family, Vector] | None = None
    if req.mode in ("auto", "hnsw") and req.query is None:
        hits, cached = yield from _cached_hnsw(req, memo, dialect)
    elif (
        req.mode in ("auto", "hybrid")
        and req.query is not None
        and req.rerank != "mmr"
        and req.hyde is None
        and req.floor is None
    ):
        hits = yield from _cached_hybrid(req, memo, dialect, tuning)
    if hits is None:
        try:
            hits = yield from _fresh(req, memo, dialect, cached, tuning)
        except RagstoreError as exc:
            # The family changed between reading it and running the statement (a model migration swapped
            # its table): read it again and run once more; a second failure is real.
            if not _vector.stale_family_error(exc) or (yield InError()):
                raise
            hits = yield from _fresh(req, memo, dialect, None, tuning)
    if req.floor is not None and not tuning.floored:
        hits = [hit for hit in hits if hit.score >= req.floor]
    note = fingerprint_note(memo.family(req.family), req.mode, req.query, req.rerank)
    if req.rerank == "mmr":
        hits = mmr(hits, req.k, req.mmr_lambda)
    elif req.rerank == "cross":
        reranker, text, first = req.reranker, req.query, hits
        assert reranker is not None and text is not None
        hits = yield Call(lambda: cross_rerank(first, text, reranker, req.k), "rerank with the cross-encoder")
    return Answer(hits[: req.k], note)


def read_family(name: str, memo: Caches) -> Generator[Step, Any, Family]:
    """Family ``name`` read now (NotFound when there is none), remembered in ``memo``."""
    check_name(name)
    rows = yield Rows(GET_FAMILY, {"name": name}, "family", isolated=False, binary=False)
    if not rows:
        raise family_not_found(name)
    fam = row_to_family(rows[0])
    memo.remember_family(fam)
    return fam


def learn_dialect() -> Plan[Dialect]:
    """The dialect of the database (:mod:`ragstore.db.dialect`), as one step: what a Store asks once, on
    its first search, and keeps."""
    rows = yield Rows(IS_CITUS, {}, "the dialect", isolated=False, binary=False)
    return BY_CITUS[bool(rows and rows[0][0])]


def fingerprint_note(family: Family | None, mode: str, query: str | None, rerank: str | None) -> str | None:
    """The note a search on ``family`` carries when it ranks by offline fingerprint vectors (mode hnsw or
    exact, hybrid's vector leg, MMR's diversity; ``auto`` as :func:`default_mode` resolves it), else None."""
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
    req: SearchRequest, memo: Caches, dialect: Dialect, cached: tuple[Family, Vector] | None, tuning: _Tuning
) -> Plan[list[Hit]]:
    """The search on the family read now (one lookup round trip, then the search itself)."""
    fam = yield from read_family(req.family, memo)
    query, backend, rerank, hyde = req.query, req.backend, req.rerank, req.hyde
    if rerank == "mmr" and query is not None and backend is None and fam.backend == "offline":
        # A text query embeds through the family's own fingerprint: diversity by it means nothing.
        raise InvalidInput(
            f"--rerank mmr cannot run on family {fam.name!r}: its offline vectors are fingerprints of the "
            "text, not meanings, so diversity by them would drop relevant hits; use a semantic family"
        )
    mode = default_mode(fam, query) if req.mode == "auto" else req.mode
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
        backend = backend_for(fam, memo)  # one backend for the query and the hypothetical answer
    query_vector: Vector | None
    if cached is not None and cached[0] == fam:
        text, query_vector = query, cached[1]
    else:
        needs_vector = mode != "fts" or rerank == "mmr"
        text, query_vector = yield from _query(fam, query, req.vector, backend, memo, needs_vector=needs_vector)
    if hyde is not None and text is not None and query_vector is not None:
        assert backend is not None
        chosen, plain, words = backend, query_vector, text
        combined = yield WithConnection(lambda conn: hyde.vector(conn, chosen, words, plain), "HyDE")
        query_vector = check_query_vector(combined, fam)
    if mode in ("fts", "hybrid"):
        hits = yield from _text_modes(fam, mode, text, query_vector, req, tuning, dialect)
        if rerank == "mmr" and query_vector is not None:
            hits = _with_cosine_relevance(hits, query_vector)
        return hits
    assert query_vector is not None
    return (
        yield from plan_vector(
            fam,
            query_vector,
            k=req.want,
            flt=req.flt,
            exact=mode == "exact",
            ef_search=req.ef_search,
            vectors=rerank == "mmr",
            memo=memo,
            dialect=dialect,
        )
    )


def _cached_hnsw(
    req: SearchRequest, memo: Caches, dialect: Dialect
) -> Generator[Step, Any, tuple[list[Hit] | None, tuple[Family, Vector] | None]]:
    """The HNSW search by vector on the remembered Family, in one round trip (a filter repeated within a
    minute plans from its remembered estimate).

    Returns ``(None, …)`` whenever the answer must come from the fresh route instead: no remembered family, a
    zero query, an error (raised again there if real: a dropped or swapped table, another dimension), or no
    rows from an unfiltered search (an empty family; a filter that keeps no row is answered ``[]`` here).
    The second item is the remembered family with the query vector, reused by the fresh route when the
    family has not changed.
    """
    fam = memo.family(req.family)
    if fam is None:
        return None, None
    try:
        query_vector = check_query_vector(req.vector, fam)
    except RagstoreError:
        return None, None
    assert query_vector is not None
    if not np.any(query_vector):
        return None, (fam, query_vector)
    try:
        hits = yield from plan_vector(
            fam, query_vector, k=req.want, flt=req.flt, ef_search=req.ef_search, vectors=req.rerank == "mmr",
            memo=memo, dialect=dialect,
        )  # fmt: skip
    except RagstoreError:
        memo.forget_family(req.family)
        return None, None
    if not hits and not req.flt.active:
        return None, (fam, query_vector)  # an empty family, or one re-created since: the fresh route says
    return hits, (fam, query_vector)  # a filter that keeps no row is an answer: [] (not a second search)


def _cached_hybrid(req: SearchRequest, memo: Caches, dialect: Dialect, tuning: _Tuning) -> Plan[list[Hit] | None]:
    """A hybrid search by text on the remembered Family, the family's row read again in the statement's
    round trip (the block ``guard``; one node only): a text query embeds with the family's model, so the
    hits count only if the row is still the one remembered. None whenever the fresh route must answer."""
    fam = memo.family(req.family)
    query = req.query
    if fam is None or query is None or (default_mode(fam, query) if req.mode == "auto" else req.mode) != "hybrid":
        return None
    if not dialect.guard:
        return None
    try:
        _, query_vector = yield from _query(fam, query, None, req.backend, memo, needs_vector=True)
        settings = _hybrid.resolve_settings(fam, fusion=tuning.fusion, alpha=tuning.alpha)
        settings = _hybrid.resolve_settings(fam, replace(settings, per_leg=max(settings.per_leg, req.want)))
        prepared = _hybrid.prepare(
            dialect, fam, query, query_vector, k=req.want, settings=settings, weights=None, flt=req.flt, match="auto",
            vectors=False, guard=True,
        )  # fmt: skip
    except RagstoreError:
        return None
    try:
        rows = yield _hybrid.rows_step(prepared, dialect, "hybrid, while the family's row is the one remembered")
    except RagstoreError:
        rows = []
    hits = [_hybrid.row_to_hybrid_hit(row) for row in rows] or None
    if hits is None:
        memo.forget_family(req.family)
    return hits


def plan_vector(
    family: Family,
    query_vector: Vector,
    *,
    k: int,
    flt: Filter,
    exact: bool = False,
    ef_search: int | None = None,
    plan: str | None = None,
    vectors: bool = True,
    memo: Caches,
    dialect: Dialect,
) -> Plan[list[Hit]]:
    """A vector search; its settings never outlive it. ``plan`` forces one of ``vector.PLAN_*`` (benchmarks
    and check-recall use it); None chooses. ``vectors=False`` lets the SQL plans leave ``Hit.vector`` None;
    the numpy exact path (``exact=True``) always fills it."""
    flt = flt.for_family(family)  # conditions on its declared filter keys read their btree
    if exact:
        hits: list[Hit] = yield WithConnection(
            lambda conn: _exact.exact_search(conn, family, query_vector, k=k, flt=flt), "exact (numpy, streamed)"
        )
        return hits
    if not np.any(query_vector):
        rows = yield Rows(_vector.zero_query_statement(family, flt, k, dialect=dialect), flt.params(), "zero query")
        return [row_to_hit(row) for row in rows]
    chosen = plan or (yield from plan_choice(family, flt, memo))
    params = {**flt.params(), "q": family.query_param(query_vector)}
    if chosen == _vector.PLAN_EXACT_SUBSET:
        return (yield from _exact_subset(family, flt, k, params, vectors, dialect))
    iterative = chosen == _vector.PLAN_ITERATIVE
    ef = min(max(ef_search_for(k, ef_search), family.candidates(k)), MAX_EF_SEARCH)
    statement = _vector.hnsw_statement(family, flt, k, vectors=vectors, dialect=dialect)
    what = "hnsw, iterative scan" if iterative else "hnsw"
    rows = yield hnsw_step(statement, params, what, ef_search=ef, iterative=iterative, dialect=dialect)
    hits = [row_to_hit(row) for row in rows]
    if iterative and len(hits) < k:
        # The scan came back short: the filter keeps fewer rows than the estimate said (stale statistics),
        # or the scan stopped at hnsw.max_scan_tuples. Exact over the filtered rows gives every row it keeps.
        hits = yield from _exact_subset(family, flt, k, params, vectors, dialect)
    return hits


def _exact_subset(
    family: Family, flt: Filter, k: int, params: dict[str, Any], vectors: bool, dialect: Dialect
) -> Plan[list[Hit]]:
    # Isolated like the hnsw statement: it may run on a remembered Family whose table is gone (a model
    # migration's swap), and that failure must not abort the caller's transaction.
    statement = _vector.exact_subset_statement(family, flt, k, vectors=vectors, dialect=dialect)
    rows = yield Rows(statement, params, "exact over the filtered rows")
    return [row_to_hit(row) for row in rows]


def plan_choice(family: Family, flt: Filter, memo: Caches) -> Plan[str]:
    """:func:`ragstore.search.vector.plan_for` as steps: the planner's estimate, remembered in ``memo``."""
    if not flt.active:
        return _vector.PLAN_HNSW
    key = _vector.estimate_key(family, flt)
    estimate = memo.estimate(key) if key is not None else None
    if estimate is None:
        plan_rows, total_rows = yield Pipeline(_vector.estimate_statements(family, flt), "the filter's estimate")
        estimate = _vector.read_estimate(plan_rows, total_rows)
        if key is not None:
            memo.remember_estimate(key, estimate)
    return _vector.PLAN_EXACT_SUBSET if estimate.rows <= estimate.budget(family.dim) else _vector.PLAN_ITERATIVE


def _query(
    family: Family, text: str | None, vector: Any, backend: Backend | None, memo: Caches, *, needs_vector: bool
) -> Generator[Step, Any, tuple[str | None, Vector | None]]:
    """The query text and vector (checked against the family; the text embedded with its backend)."""
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
    chosen = backend if backend is not None else backend_for(family, memo)
    words = text
    matrix = yield Call(lambda: chosen.embed([words]), "embed the query")
    return text, check_query_vector(matrix[0], family)


def _text_modes(
    family: Family,
    mode: str,
    text: str | None,
    query_vector: Vector | None,
    req: SearchRequest,
    tuning: _Tuning,
    dialect: Dialect,
) -> Plan[list[Hit]]:
    if text is None:
        raise InvalidInput(f"mode {mode!r} needs a query text (full text has nothing to match a vector with)")
    k, flt = req.want, req.flt
    if mode == "fts":
        rows = yield _fts.fts_step(family, text, k=k, flt=flt, dialect=dialect)
        return [_fts.row_to_fts_hit(row) for row in rows]
    settings = _hybrid.resolve_settings(family, fusion=tuning.fusion, alpha=tuning.alpha)
    # Each leg brings at least k candidates (20 per leg by default would fuse at most 40 for k = 300).
    settings = _hybrid.resolve_settings(family, settings, per_leg=max(settings.per_leg, k))
    prepared = _hybrid.prepare(
        dialect, family, text, query_vector, k=k, settings=settings, weights=None, flt=flt, match="auto",
        vectors=req.rerank == "mmr",
    )  # fmt: skip
    rows = yield _hybrid.rows_step(prepared, dialect)
    hits = [_hybrid.row_to_hybrid_hit(row) for row in rows]
    if tuning.floor is not None and query_vector is not None:
        # min_score means cosine in hybrid: each hit's cosine to the query as the statement computed it
        # (the vector leg's misses included) against the floor; the hits keep their fused score and order.
        cosines = hit_cosines(hits, query_vector)
        hits = [hit for hit, cos in zip(hits, cosines, strict=True) if cos >= tuning.floor]
        tuning.floored = True
    return hits


def _with_cosine_relevance(hits: list[Hit], query_vector: Vector) -> list[Hit]:
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


def hit_cosines(hits: list[Hit], query_vector: Vector) -> list[float]:
    """Each hit's cosine to the query: the hybrid statement's (``Hit.cosine``), else computed from the
    hits' vectors (0 for a hit without a vector or a zero query)."""
    if all(hit.cosine is not None for hit in hits):
        return [float(hit.cosine) for hit in hits if hit.cosine is not None]
    if not hits or not np.any(query_vector) or any(hit.vector is None for hit in hits):
        return [0.0] * len(hits)
    matrix = np.stack([np.asarray(hit.vector, dtype=np.float32) for hit in hits])
    return [float(x) for x in _exact.cosine_scores(matrix, query_vector)]
