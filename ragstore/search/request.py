"""``SearchRequest``: what a search asks for, checked once, before any I/O; and :class:`Hit`, what it answers.

Every door (``search()``, ``Store.search``, ``AsyncStore.search``, ``ragstore search``) builds one; building it
runs every check that needs no database (InvalidInput naming the argument): ``k`` and ``fetch_k`` positive
integers of at most :data:`MAX_K`, ``min_score`` finite, ``ef_search`` a positive integer, ``mode`` one of
:data:`MODES`, ``rerank`` None, ``"mmr"`` or ``"cross"`` (which needs a ``reranker`` and a query text,
``rerank_depth`` up to MAX_K), HyDE a query text, ``fusion`` one of the fusions and fusion settings only with
a mode that can be hybrid, the filter (``package``, ``metadata``) and the query text's characters. What
needs the family (its dimension, its model, the mode ``auto`` resolves to, the declared filter keys) is
checked by the plan (:mod:`ragstore.search.plan`), once, after it read the family.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ragstore.common.strictjson import text_problem
from ragstore.embed.base import Backend
from ragstore.errors import InvalidInput
from ragstore.search.filters import Filter, check_k, check_min_score, make_filter, to_float32
from ragstore.search.fusion import FUSIONS

if TYPE_CHECKING:
    from ragstore.search.hyde import Hyde
    from ragstore.search.rerank import Reranker

__all__ = [
    "DEFAULT_DEPTH",
    "DEFAULT_EF_SEARCH",
    "MAX_EF_SEARCH",
    "MAX_K",
    "MODES",
    "RERANKS",
    "Hit",
    "SearchRequest",
    "ef_search_for",
    "row_to_hit",
]

MODES = ("auto", "hnsw", "exact", "fts", "hybrid")
# The most hits (and MMR candidates) one search returns, in every mode. Above it a search would be cut
# short by the index's candidate list (hnsw.ef_search stops at 1,000) rather than answer in full; a caller
# that wants a whole family reads it, it does not search it.
MAX_K = 1000
# hnsw.ef_search when the caller names none (pgvector's own default is 40), filtered or not. From the
# recall curve of benchmarks/query.py (benchmarks/README.md, "Queries"), recall@10 on clustered 100k rows at 384-d:
# ef 40 .951, 64 .982, 100 .990 (.927/.959/.969 with ef_construction 64): 100 is the first value with a
# clear margin over 0.95. An iterative scan over a 10% filter gains little from more: 384-d ef 40/100/200/
# 400 gave recall .995/.995/.999/1.0 at p50 2.17/2.20/2.47/2.67 ms, and 1M x 16-d ef 100/400 .990/.990 at
# 3.04/5.73 ms: when fewer than k of the first ef_search candidates pass the filter, relaxed_order scans
# on, which costs less than a wider candidate list for every query.
DEFAULT_EF_SEARCH = 100
# pgvector's bound on hnsw.ef_search.
MAX_EF_SEARCH = 1000
RERANKS = ("mmr", "cross")
# First-stage hits a cross-encoder reranker reorders, unless the request says.
DEFAULT_DEPTH = 50


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result.

    ``score`` is cosine similarity (``1 - (a <=> b)``) for vector modes, the fused score for hybrid.
    ``vector`` is filled when the caller asked for vectors (MMR needs them). ``ranks`` holds each leg's
    1-based rank in hybrid mode (``{"fts": 3, "vector": None}``); ``scores`` each leg's raw score.
    After a cross-encoder rerank (``rerank="cross"``) ``score`` is still the first stage's, ``first_rank``
    the hit's 1-based first-stage rank and ``rerank_score`` the reranker's relevance score. ``cosine`` is
    a hybrid hit's cosine to the query as the search statement computed it (for either leg's hits; None
    in the other modes, whose vector-mode ``score`` is that cosine already).
    """

    chunk_id: str
    package_path: str
    score: float
    text: str
    vector: npt.NDArray[np.float32] | None = field(default=None, compare=False, repr=False)
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)
    ranks: dict[str, int | None] = field(default_factory=dict, compare=False)
    scores: dict[str, float | None] = field(default_factory=dict, compare=False)
    first_rank: int | None = field(default=None, compare=False)
    rerank_score: float | None = field(default=None, compare=False)
    cosine: float | None = field(default=None, compare=False)

    @property
    def citation(self) -> str:
        """``[package_path#chunk_id]``, the form a model is asked to cite; ``[chunk_id]`` when the id names
        its package already (a document's chunks are ``<package_path>#<n>``: ``[docs/fs.md#15]``)."""
        if self.chunk_id.startswith(f"{self.package_path}#"):
            return f"[{self.chunk_id}]"
        return f"[{self.package_path}#{self.chunk_id}]"


def row_to_hit(
    row: Sequence[Any],
    ranks: dict[str, int | None] | None = None,
    scores: dict[str, float | None] | None = None,
    cosine: float | None = None,
) -> Hit:
    """A ``chunk_id, package_path, score, text, metadata, embedding`` row as a Hit (embedding and metadata
    may be NULL: no vector, and ``{}``), with the legs' ``ranks`` and ``scores`` and the ``cosine`` of a
    full-text or hybrid hit."""
    chunk_id, package_path, score, text, metadata, embedding = row[:6]
    # Positional (the field order of Hit): this runs once per hit on the hot path.
    return Hit(
        chunk_id,
        package_path,
        score,  # float8, already a float
        text,
        None if embedding is None else to_float32(embedding),
        {} if metadata is None else metadata,  # a fresh dict from the JSON loader
        {} if ranks is None else ranks,
        {} if scores is None else scores,
        None,
        None,
        cosine,
    )


def ef_search_for(k: int, ef_search: int | None) -> int:
    """``max(k, configured)``, capped at 1000; configured is ``ef_search`` when given, else
    :data:`DEFAULT_EF_SEARCH`."""
    return min(max(k, ef_search if ef_search is not None else DEFAULT_EF_SEARCH), MAX_EF_SEARCH)


@dataclass(frozen=True)
class SearchRequest:
    """One search, checked when built (see the module docstring). ``floor``, ``flt`` and ``want`` are
    derived: the ``min_score`` floor, the filter (without the family's keys: the plan adds them), and the hits
    to fetch (``max(fetch_k, k)`` for MMR, ``max(rerank_depth, k)`` for a cross-encoder, else ``k``)."""

    family: str
    query: str | None = None
    vector: Any = None
    k: int = 10
    mode: str = "auto"
    min_score: float | None = None
    package: str | None = None
    metadata: dict[str, Any] | None = None
    ef_search: int | None = None
    rerank: str | None = None
    mmr_lambda: float = 0.5
    fetch_k: int = 50
    backend: Backend | None = None
    fusion: str | None = None
    alpha: float | None = None
    reranker: Reranker | None = None
    rerank_depth: int = DEFAULT_DEPTH
    hyde: Hyde | None = None
    floor: float | None = field(init=False, repr=False, compare=False)
    flt: Filter = field(init=False, repr=False, compare=False)
    want: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        k = _at_most(check_k(self.k), "k")
        floor = check_min_score(self.min_score)
        mode, rerank, query = self.mode, self.rerank, self.query
        if mode not in MODES:
            raise InvalidInput(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
        if rerank is not None and rerank not in RERANKS:
            raise InvalidInput(f"unknown rerank {rerank!r}: use 'mmr', 'cross' or none")
        depth, fetch_k = self.rerank_depth, self.fetch_k
        if rerank == "cross":
            if self.reranker is None:
                raise InvalidInput("rerank='cross' needs a reranker (e.g. --reranker-url)")
            if query is None:
                raise InvalidInput("rerank='cross' needs a query text: a reranker reads the query with each hit")
            depth = _at_most(check_k(depth, "rerank_depth"), "rerank_depth")
        if self.hyde is not None and query is None:
            raise InvalidInput("HyDE needs a query text (it asks a chat model to answer it)")
        if rerank == "mmr":
            fetch_k = _at_most(check_k(fetch_k, "fetch_k"), "fetch_k")
            float(self.mmr_lambda)  # validated by mmr(); a non-number fails here before any I/O
        if self.ef_search is not None:
            check_k(self.ef_search, "ef_search")
        flt = make_filter(self.package, self.metadata)
        if isinstance(query, str) and (problem := text_problem(query)) is not None:
            raise InvalidInput(f"the query holds {problem}")
        want = max(fetch_k, k) if rerank == "mmr" else max(depth, k) if rerank == "cross" else k
        if self.fusion is not None or self.alpha is not None:
            if self.fusion is not None and self.fusion not in FUSIONS:
                raise InvalidInput(f"unknown fusion {self.fusion!r}: use one of {', '.join(FUSIONS)}")
            if mode not in ("auto", "hybrid"):
                raise InvalidInput(f"fusion and alpha apply to the hybrid mode, not to mode {mode!r}")
        for name, value in (("k", k), ("floor", floor), ("flt", flt), ("want", want)):
            object.__setattr__(self, name, value)

    @classmethod
    def of(cls, family: str, query: str | None = None, **options: Any) -> SearchRequest:
        """The request of ``search(conn, family, query, **options)``; TypeError names an argument a search
        does not take (as a call to search() would)."""
        for name in options:
            if name not in OPTIONS:
                raise TypeError(f"search() got an unexpected keyword argument {name!r}")
        return cls(family, query, **options)


def _at_most(value: int, name: str) -> int:
    if value > MAX_K:
        raise InvalidInput(f"{name} must be at most {MAX_K} (a search returns at most {MAX_K} hits), got {value}")
    return value


#: The options a search takes after the family and the query (the request's other fields, with their defaults).
OPTIONS: dict[str, Any] = {
    f.name: f.default for f in fields(SearchRequest) if f.init and f.name not in ("family", "query")
}
