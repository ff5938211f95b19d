"""Hybrid search: the full-text leg and the vector leg fused in ONE SQL statement; and the statements of
``ragstore/sql/hybrid.sql`` (:func:`statement`: the full-text block of :mod:`ragstore.search.fts` and the
hybrid one, with their parameters, :func:`text_params`).

:func:`hybrid_search` runs block ``hybrid`` of ``ragstore/sql/hybrid.sql``: each leg takes its top
``per_leg`` chunks (the same package/metadata filter on both), ranks are 1-based, and the union is fused
as :mod:`ragstore.search.fusion` says: convex combination of normalised scores (``cc``, the default) or
Reciprocal Rank Fusion (``rrf``, ``Σ w_leg / (rrf_k + rank_leg)``, exactly :func:`ragstore.search.fusion.fuse`).
The settings are the family's stored ones (``ragstore family tune``) unless the caller passes others.
Hits are ordered by fused score descending, then chunk_id ascending; each carries ``ranks`` and
``scores`` for ``"fts"`` (the full-text score) and ``"vector"`` (cosine), ``None`` for the leg that missed
it, the family's vector (for MMR) and ``cosine`` (the statement's cosine to the query). One statement
sets ``hnsw.ef_search`` (at least ``per_leg``) with ``set_config(..., true)`` and runs both legs, in one
round trip, as its own transaction or between a savepoint and its rollback, so nothing leaks to the session;
filtered queries use pgvector's iterative index scan so the vector leg still fills its N.

A zero-magnitude query vector has no cosine to anything: its vector leg is empty and the result is the
full-text leg's order. :func:`blended_search` re-ranks the hybrid candidates with
:func:`ragstore.search.blend.blend` (semantic, lexical, temporal from ``chunks.created_at``).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ragstore.db.dialect import POSTGRES, Dialect, dialect_of
from ragstore.db.hybrid_text import assemble
from ragstore.errors import InvalidInput, ModelMismatch, RagstoreError
from ragstore.families import Family
from ragstore.families.storage import order_expression
from ragstore.search import metafilter
from ragstore.search.blend import DEFAULT_COSINE_FLOOR, DEFAULT_HALF_LIFE_DAYS, DEFAULT_WEIGHTS, Candidate, blend
from ragstore.search.drive import Rows, hnsw_step, run_with_settings
from ragstore.search.fusion import DEFAULT_FUSION, FusionSettings
from ragstore.search.fusion import Candidate as FusionCandidate
from ragstore.search.request import (
    MAX_EF_SEARCH,
    Filter,
    Hit,
    ShapeFilter,
    check_k,
    ef_search_for,
    make_filter,
    row_to_hit,
)

__all__ = [
    "BM25_B",
    "BM25_K1",
    "DEFAULT_PER_LEG",
    "LEGS",
    "MATCHES",
    "blended_search",
    "fusion_candidates",
    "hybrid_search",
    "hybrid_search_if_current",
    "parse_weights",
    "resolve_settings",
    "statement",
    "text_params",
]

Conn = psycopg.Connection[Any]
LEGS = ("fts", "vector")
DEFAULT_PER_LEG = DEFAULT_FUSION.per_leg
MAX_PER_LEG = MAX_EF_SEARCH  # ef_search must reach N, and pgvector caps it at 1,000


# -- the statements of ragstore/sql/hybrid.sql: the full-text block and the hybrid one ------------
# BM25's term-frequency saturation and length normalisation (the SQL functions use the same numbers).
BM25_K1 = 1.2
BM25_B = 0.75
MATCHES = ("auto", "all")
_OPERATORS = re.compile(r"""["']|(^|\s)-\S|(^|\s)or(\s|$)""", re.IGNORECASE)


def plain_words(text: str) -> bool:
    """True when ``text`` uses none of websearch's operators (quotes, ``or``, a ``-`` before a word)."""
    return _OPERATORS.search(text) is None


def text_params(family: Family, query_text: str, *, match: str = "auto") -> dict[str, Any]:
    """The full-text parameters of the SQL blocks: family, query, fts_config, any, k1, b. Raises InvalidInput."""
    if not isinstance(query_text, str):
        raise InvalidInput(f"the query text must be a string, got {query_text!r}")
    if match not in MATCHES:
        raise InvalidInput(f"match must be one of {', '.join(MATCHES)}, got {match!r}")
    return {
        "family": family.name,
        "query": query_text,
        "fts_config": family.fts_config,
        "any": match == "auto" and plain_words(query_text),
        "k1": BM25_K1,
        "b": BM25_B,
    }


def statement(
    family: Family,
    block: str,
    flt: Filter,
    *,
    any_words: bool,
    fts_n: int,
    vec_n: int = 0,
    k: int = 0,
    dialect: Dialect = POSTGRES,
    fusion: tuple[str, str] = ("cc", "tmm"),
    vectors: bool = True,
    guard: bool = False,
) -> str:
    """Block ``block`` of ``ragstore/sql/hybrid.sql`` for ``family`` and the shape of ``flt``, with the
    match mode (``any_words``), the legs' depths and ``k`` as literals; rendered once per shape, in the
    ``dialect``'s statement set (on Citus the form it pushes to the shards: ``ragstore/sql/hybrid_citus.sql``).
    ``fusion`` (the hybrid statement's): the fusion and the normalisation, checked settings
    (:class:`~ragstore.search.fusion.FusionSettings`), which pick the blocks fuse_<fusion> and
    norm_<normalization>. ``vectors`` (the hybrid statement's): whether the hits carry their vector (else
    NULL: less to send and decode when nothing reads it). ``guard`` (the hybrid statement's, one node): the
    hits come back only while the family's row is still ``family`` (the block ``guard``; its parameters
    from :func:`guard_params`)."""
    # vector_type is checked by families; the storage and its factor pick the vector leg's order and depth
    table = (family.table, family.vector_type, int(family.dim), family.storage, family.candidates(int(vec_n)))
    literals = (bool(any_words), int(fts_n), int(vec_n), int(k))
    shape = (bool(flt.package), flt.metadata_shape)
    return _statement_text(block, table, shape, literals, dialect, fusion, vectors, guard)


def guard_params(family: Family) -> dict[str, Any]:
    """The parameter of the block ``guard``: ``family``'s row as the caller remembers it."""
    row = [family.backend, family.model, int(family.dim), family.vector_type, family.table, family.state]
    return {"g_row": Jsonb([*row, family.options])}


@functools.lru_cache(maxsize=512)
def _statement_text(
    block: str,
    table: tuple[str, str, int, str, int],
    shape: tuple[bool, metafilter.Shape | None],
    literals: tuple[Any, ...],
    dialect: Dialect = POSTGRES,
    fusion: tuple[str, str] = ("cc", "tmm"),
    vectors: bool = True,
    guard: bool = False,
) -> str:
    flt = ShapeFilter("x" if shape[0] else None, None, shape[1])
    table_name, vector_type, dim, storage, vec_candidates = table
    text = assemble(
        block, dialect=dialect, bit=storage == "bit", candidates="any" if literals[0] else "all", guard=guard,
        fusion=fusion, vectors=vectors,
    )  # fmt: skip
    # literals[0], the match mode, picked the candidates block above: no placeholder of its own.
    values = dict(zip(("fts_n", "vec_n", "k"), map(sql.Literal, literals[1:]), strict=True))
    values["fts_head"] = sql.Literal(2 * int(literals[1]))
    values["vec_candidates"] = sql.Literal(vec_candidates)
    vec_order = sql.SQL(order_expression(storage, vector_type, dim, "e.embedding", "%(q)s"))
    # One node: the vector leg's scan references its settings row (the settings are made first); Citus
    # sets them with SET LOCAL before the statement instead.
    use_vector = "%(use_vector)s AND s.settings IS NOT NULL" if dialect.settings_in_statement else "%(use_vector)s"
    return (
        sql.SQL(text)
        .format(
            table=sql.Identifier(table_name),
            vtype=sql.SQL(f"{vector_type}({int(dim)})"),
            vec_order=vec_order,
            where_fts=flt.where(extra=sql.SQL("c.family = %(family)s AND c.chunk_id = f.chunk_id")),
            where_vec=flt.where(extra=sql.SQL(use_vector)),
            **values,
        )
        .as_string()
    )


# -- hybrid search ------------------------------------------------------------------------------
def parse_weights(text: str) -> dict[str, float]:
    """``"fts=0.5,vector=1"`` as ``{"fts": 0.5, "vector": 1.0}``; InvalidInput for anything else."""
    weights: dict[str, float] = {}
    for part in text.split(","):
        leg, sep, value = part.partition("=")
        leg = leg.strip()
        if not sep or leg not in LEGS:
            raise InvalidInput(f"weights look like fts=0.5,vector=1 (legs: {', '.join(LEGS)}), got {text!r}")
        try:
            weights[leg] = float(value)
        except ValueError:
            raise InvalidInput(f"weight of leg {leg!r} must be a number, got {value.strip()!r}") from None
    return check_weights(weights)


def check_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    """Both legs' weights (1.0 unless given); InvalidInput for an unknown leg or a negative/non-finite weight."""
    resolved = dict.fromkeys(LEGS, 1.0)
    for leg, weight in (weights or {}).items():
        if leg not in LEGS:
            raise InvalidInput(f"unknown leg {leg!r} in weights: the legs are {', '.join(LEGS)}")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
            raise InvalidInput(f"weight of leg {leg!r} must be a finite number, got {weight!r}")
        if weight < 0:
            raise InvalidInput(f"weight of leg {leg!r} must be non-negative, got {weight!r}")
        resolved[leg] = float(weight)
    return resolved


def _check_vector(family: Family, query_vector: Any) -> npt.NDArray[np.float32]:
    array = np.asarray(query_vector, dtype=np.float32)
    if array.ndim != 1 or array.shape[0] != family.dim:
        raise ModelMismatch(
            f"the query vector has shape {array.shape}; family {family.name!r} holds {family.dim}-d vectors"
        )
    if not np.isfinite(array).all():
        raise InvalidInput("the query vector has a non-finite component (NaN or infinity)")
    return array


def _run(conn: Conn, prepared: tuple[str, dict[str, Any], int, bool]) -> list[tuple[Any, ...]]:
    """The rows of a statement of :func:`prepare`: one statement sets ef_search and runs both legs,
    isolated so that no setting outlives it."""
    text, params, ef_search, iterative = prepared
    rows: list[tuple[Any, ...]] = run_with_settings(conn, text, params, ef_search=ef_search, iterative=iterative)
    return rows


def prepare(
    dialect: Dialect,
    family: Family,
    query_text: str,
    query_vector: Any,
    *,
    k: int,
    settings: FusionSettings,
    weights: Mapping[str, float] | None,
    flt: Filter,
    match: str,
    vectors: bool = True,
    guard: bool = False,
) -> tuple[str, dict[str, Any], int, bool]:
    """The hybrid statement, its parameters, its ef_search and whether it scans iteratively, for the checked
    filter ``flt`` (:func:`~ragstore.search.request.make_filter`, the request's); the hits carry their vectors
    when ``vectors``, and come back only while the family's row is ``family`` with ``guard``."""
    k = check_k(k)
    per_leg = settings.per_leg
    leg_weights = check_weights(weights)
    vector = _check_vector(family, query_vector)
    flt = flt.for_family(family)  # conditions on its declared keys read their btree
    params: dict[str, Any] = {
        **text_params(family, query_text, match=match),
        **flt.params(),
        "q": family.query_param(vector),
        "use_vector": bool(np.any(vector)),
        "w_fts": leg_weights["fts"],
        "w_vec": leg_weights["vector"],
        "rrf_k": settings.rrf_k,
        "alpha": settings.alpha,
        **(guard_params(family) if guard else {}),
    }
    text = statement(
        family, "hybrid", flt, any_words=params.pop("any"), fts_n=per_leg, vec_n=per_leg, k=k,
        dialect=dialect, fusion=(settings.fusion, settings.normalization), vectors=vectors, guard=guard,
    )  # fmt: skip
    ef_search = ef_search_for(family.candidates(per_leg), None)
    return text, params, ef_search, flt.active


def rows_step(prepared: tuple[str, dict[str, Any], int, bool], dialect: Dialect, what: str = "hybrid") -> Rows:
    """The plan's step of a statement of :func:`prepare` in ``dialect`` (its rows: :func:`row_to_hybrid_hit`)."""
    text, params, ef_search, iterative = prepared
    return hnsw_step(text, params, what, ef_search=ef_search, iterative=iterative, dialect=dialect)


def resolve_settings(
    family: Family,
    settings: FusionSettings | None = None,
    *,
    per_leg: int | None = None,
    rrf_k: int | None = None,
    fusion: str | None = None,
    alpha: float | None = None,
) -> FusionSettings:
    """The fusion settings a search runs with: ``settings`` or the family's stored ones, with any of
    ``per_leg``, ``rrf_k``, ``fusion`` and ``alpha`` given overriding them. Raises InvalidInput."""
    chosen = settings if settings is not None else family.fusion
    if per_leg is not None:
        chosen = replace(chosen, per_leg=check_k(per_leg, "per_leg"))
    if rrf_k is not None:
        chosen = replace(chosen, rrf_k=check_k(rrf_k, "rrf_k"))
    if fusion is not None:
        chosen = replace(chosen, fusion=fusion)
    if alpha is not None:
        chosen = replace(chosen, alpha=alpha)
    if isinstance(chosen.per_leg, int) and chosen.per_leg > MAX_PER_LEG:
        raise InvalidInput(f"per_leg must be at most {MAX_PER_LEG} (pgvector's ef_search bound), got {chosen.per_leg}")
    return chosen.checked()


def hybrid_search(
    conn: Conn,
    family: Family,
    query_text: str,
    query_vector: Any,
    *,
    k: int,
    per_leg: int | None = None,
    rrf_k: int | None = None,
    weights: Mapping[str, float] | None = None,
    package: str | None = None,
    metadata: dict[str, Any] | None = None,
    match: str = "auto",
    settings: FusionSettings | None = None,
    vectors: bool = True,
) -> list[Hit]:
    """The top ``k`` chunks by fusion of the full-text and vector legs (see the module docstring); with
    ``vectors=False`` their ``Hit.vector`` is None (less to send when nothing reads it).

    ``settings`` (default: the family's stored settings, else
    :data:`~ragstore.search.fusion.DEFAULT_FUSION`) say how to fuse; ``per_leg`` and ``rrf_k`` override
    theirs. ``weights`` are RRF's: ``"fts"``/``"vector"`` to non-negative weights (1.0 when absent); a leg
    of weight 0 still reports its ranks. ``match`` goes to the full-text leg
    (:mod:`ragstore.search.fts`). Raises InvalidInput (k, per_leg over 1,000, rrf_k, weights, fusion
    settings, filters), ModelMismatch (a query vector of another dimension), and the mapped database errors.
    """
    chosen = resolve_settings(family, settings, per_leg=per_leg, rrf_k=rrf_k)
    rows = _run(conn, prepare(
        dialect_of(conn), family, query_text, query_vector, k=k, settings=chosen, weights=weights,
        flt=make_filter(package, metadata), match=match, vectors=vectors,
    ))  # fmt: skip
    return [row_to_hybrid_hit(row) for row in rows]


def hybrid_search_if_current(
    conn: Conn,
    family: Family,
    query_text: str,
    query_vector: Any,
    *,
    settings: FusionSettings,
    flt: Filter,
    k: int,
    vectors: bool = False,
) -> list[Hit] | None:
    """:func:`hybrid_search` on ``family`` as the caller remembers it, checked in the SAME statement (one
    node only): the hits while the family's row is still ``family`` (the statement's guard, read in its
    snapshot), else None: the row changed or is gone, the statement failed on it (its table was swapped), or
    no hit came back (an empty family cannot be told from a changed one), and the caller reads the family
    and searches again. Saves a search on a remembered family a second statement for the family's row."""
    if not dialect_of(conn).guard:
        return None
    chosen = resolve_settings(family, settings)
    prepared = prepare(
        dialect_of(conn), family, query_text, query_vector, k=k, settings=chosen, weights=None, flt=flt,
        match="auto", vectors=vectors, guard=True,
    )  # fmt: skip
    try:
        rows = _run(conn, prepared)
    except RagstoreError:
        return None
    return [row_to_hybrid_hit(row) for row in rows] or None


def fusion_candidates(
    conn: Conn, family: Family, query_text: str, query_vector: Any, *, per_leg: int
) -> list[FusionCandidate]:
    """Every hybrid candidate (the union of both legs' top ``per_leg``, unfiltered) with its ranks and both
    scores, for :func:`ragstore.search.fusion.fuse` (the tuner fetches once and fuses many ways)."""
    chosen = resolve_settings(family, FusionSettings(fusion="rrf"), per_leg=per_leg)
    rows = _run(conn, prepare(
        dialect_of(conn), family, query_text, query_vector, k=2 * chosen.per_leg, settings=chosen, weights=None,
        flt=Filter(), match="auto",
    ))  # fmt: skip
    return [
        FusionCandidate(
            chunk_id=row[0],
            fts_rank=None if row[7] is None else int(row[7]),
            vector_rank=None if row[9] is None else int(row[9]),
            lexical=float(row[12]),
            cosine=float(row[11]),
        )
        for row in rows
    ]


def row_to_hybrid_hit(row: tuple[Any, ...]) -> Hit:
    """A row of the hybrid statement as a Hit with both legs' ranks and scores and its cosine."""
    f_rank, f_score, v_rank, v_score, cosine = row[7:12]
    return row_to_hit(
        row,
        ranks={"fts": None if f_rank is None else int(f_rank), "vector": None if v_rank is None else int(v_rank)},
        scores={
            "fts": None if f_score is None else float(f_score),
            "vector": None if v_score is None else float(v_score),
        },
        cosine=float(cosine),
    )


def blended_search(
    conn: Conn,
    family: Family,
    query_text: str,
    query_vector: Any,
    *,
    k: int,
    now: datetime,
    per_leg: int = DEFAULT_PER_LEG,
    blend_weights: tuple[float, float, float] = DEFAULT_WEIGHTS,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    cosine_floor: float = DEFAULT_COSINE_FLOOR,
    package: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> list[Hit]:
    """Blended ranking over every hybrid candidate (the union of both legs' top ``per_leg``).

    Each candidate's cosine to the query, its full-text score (0 when it does not match) and its
    ``chunks.created_at`` go to :func:`ragstore.search.blend.blend` with ``now`` passed in (no clock here);
    the top ``k`` come back with the blended score as ``score``, the signals in ``scores`` (``semantic``,
    ``lexical``, ``temporal``, normalised) and the legs' ranks in ``ranks``. Raises as
    :func:`hybrid_search` and :func:`ragstore.search.blend.blend` do.
    """
    k = check_k(k)
    chosen = resolve_settings(family, FusionSettings(fusion="rrf", rrf_k=DEFAULT_FUSION.rrf_k), per_leg=per_leg)
    rows = _run(conn, prepare(
        dialect_of(conn), family, query_text, query_vector, k=2 * chosen.per_leg, settings=chosen, weights=None,
        flt=make_filter(package, metadata), match="auto",
    ))  # fmt: skip
    by_id = {row[0]: row for row in rows}
    candidates = [Candidate(row[0], float(row[11]), float(row[12]), row[6]) for row in rows]
    blended = blend(candidates, blend_weights, now=now, half_life_days=half_life_days, cosine_floor=cosine_floor)
    hits: list[Hit] = []
    for item in blended[:k]:
        base = row_to_hybrid_hit(by_id[item.chunk_id])
        signals: dict[str, float | None] = {
            "semantic": item.semantic,
            "lexical": item.lexical,
            "temporal": item.temporal,
        }
        hits.append(replace(base, score=item.score, scores=signals))
    return hits
