"""``SearchRequest``: what a search asks for, checked once, before any I/O; and :class:`Hit`, what it answers.

Every door (``search()``, ``Store.search``, ``AsyncStore.search``, ``ragstore search``) builds one; building it
runs every check that needs no database (InvalidInput naming the argument): ``k`` and ``fetch_k`` positive
integers of at most :data:`MAX_K`, ``min_score`` finite, ``ef_search`` a positive integer, ``mode`` one of
:data:`MODES`, ``rerank`` None, ``"mmr"`` or ``"cross"`` (which needs a ``reranker`` and a query text,
``rerank_depth`` up to MAX_K), HyDE a query text, ``fusion`` one of the fusions and fusion settings only with
a mode that can be hybrid, the filter (``package``, ``metadata``) and the query text's characters. What
needs the family (its dimension, its model, the mode ``auto`` resolves to, the declared filter keys) is
checked by the plan (:mod:`ragstore.search.plan`), once, after it read the family.

The filter is the request's too. A :class:`Filter` narrows a search to a ``package_path`` prefix (LIKE
wildcards in the prefix are escaped, so ``docs/a_b`` matches only that literal prefix) and/or a ``metadata``
containment (``metadata @> <json>`` on the family table's GIN-indexed copy of the chunks' metadata), or
operators (:mod:`ragstore.search.metafilter`). It is rendered once as a SQL fragment with parameters, and
every path (HNSW, exact over the filtered rows, numpy exact) uses that one fragment, over the family table
alone. The planner's estimate of the rows a filter keeps, which chooses the filtered plan, is
:mod:`ragstore.search.vector`'s.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from psycopg import sql
from psycopg.types.json import Jsonb

from ragstore.common.like import like_prefix
from ragstore.common.strictjson import check_json_value, loads_strict
from ragstore.common.text import text_problem
from ragstore.embed.base import Backend
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.search import metafilter
from ragstore.search.fusion import FUSIONS
from ragstore.search.metafilter import uses_operators

if TYPE_CHECKING:
    from ragstore.families import Family
    from ragstore.search.hyde import Hyde
    from ragstore.search.rerank import Reranker

__all__ = [
    "DEFAULT_DEPTH",
    "DEFAULT_EF_SEARCH",
    "MAX_EF_SEARCH",
    "MAX_K",
    "MODES",
    "RERANKS",
    "Filter",
    "Hit",
    "SearchRequest",
    "check_k",
    "check_min_score",
    "check_query_vector",
    "ef_search_for",
    "make_filter",
    "parse_where",
    "row_to_hit",
    "to_float32",
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

    def as_dict(self) -> dict[str, Any]:
        """The hit as JSON data (``ragstore search --json``, the HTTP API): the rank and score details only
        when the search made them."""
        data: dict[str, Any] = {
            "chunk_id": self.chunk_id,
            "package_path": self.package_path,
            "score": self.score,
            "citation": self.citation,
            "text": self.text,
            "metadata": self.metadata,
        }
        if self.ranks:
            data["ranks"] = self.ranks
        if self.scores:
            data["scores"] = self.scores
        if self.rerank_score is not None or self.first_rank is not None:
            data["rerank_score"] = self.rerank_score
            data["first_rank"] = self.first_rank
        return data

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


# -- the filter, and the checks of the inputs that are values ---------------------------------------
@dataclass(frozen=True)
class Filter:
    """A package_path prefix and/or a metadata filter (a containment, or operators as
    :mod:`ragstore.search.metafilter` describes); both empty means no filter. ``keys`` are the declared
    filter keys of the family it runs on (:meth:`for_family`): conditions on them are rendered with the
    expression their btree indexes (:mod:`ragstore.families.filter_keys`)."""

    package: str | None = None
    metadata: dict[str, Any] | None = None
    keys: frozenset[str] = field(default=frozenset(), kw_only=True)

    @property
    def active(self) -> bool:
        return bool(self.package) or bool(self.metadata)

    def for_family(self, family: Family) -> Filter:
        """This filter on ``family``: with its declared filter keys (the same filter when it has none)."""
        keys = frozenset(family.filter_keys)
        if keys == self.keys:
            return self
        return Filter(self.package, self.metadata, keys=keys)

    def where(self, alias: str = "e", *, extra: sql.Composable | None = None) -> sql.Composable:
        """``WHERE …`` (or nothing) over the family table ``alias``: both filters read it alone (it keeps a
        copy of each chunk's metadata, GIN-indexed, so a metadata filter is planned and read like a package
        filter, with no join to the chunks).

        ``extra`` is one more condition ANDed in (the HNSW statement's reference to its settings row).
        """
        parts: list[sql.Composable] = [] if extra is None else [extra]
        if self.package:
            parts.append(sql.SQL("{}.package_path LIKE %(package_like)s").format(sql.Identifier(alias)))
        shape = self.metadata_shape
        if shape is not None:
            parts.append(metadata_condition(shape, alias))
        if not parts:
            return sql.SQL("")
        return sql.SQL("WHERE ") + sql.SQL(" AND ").join(parts)

    def params(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        if self.package:
            values["package_like"] = like_prefix(self.package)
        node = self._tree
        if node is not None:
            values.update(metafilter.params(node))
        elif self.metadata:
            values["metadata"] = Jsonb(self.metadata)
        return values

    @functools.cached_property
    def _tree(self) -> metafilter.Node | None:
        """The metadata filter's condition tree, or None for a plain containment on no declared key (one
        ``@>`` with the whole object, as before filter keys)."""
        if not self.metadata:
            return None
        if uses_operators(self.metadata):
            node = metafilter.parse(self.metadata)
            return metafilter.declare(node, self.keys) if self.keys else node
        if not self.keys or self.keys.isdisjoint(self.metadata):
            return None
        return metafilter.declare(metafilter.containment(self.metadata), self.keys)

    @property
    def metadata_shape(self) -> metafilter.Shape | None:
        """What the metadata part of the SQL text depends on: None (no metadata filter), ``("@>",)`` (a
        containment) or the shape of an operator filter (:mod:`ragstore.search.metafilter`)."""
        if not self.metadata:
            return None
        node = self._tree
        return CONTAINMENT if node is None else metafilter.shape(node)


CONTAINMENT: metafilter.Shape = ("@>",)


@dataclass(frozen=True)
class ShapeFilter(Filter):
    """A filter given by its shape alone (no values): renders the SQL text a statement cache keeps."""

    shape: metafilter.Shape | None = None

    @property
    def metadata_shape(self) -> metafilter.Shape | None:
        return self.shape


def metadata_condition(shape: metafilter.Shape, alias: str = "e") -> sql.Composable:
    """The SQL condition of a metadata filter of ``shape`` (see :attr:`Filter.metadata_shape`) over the
    table ``alias`` that holds the ``metadata`` column."""
    if shape == CONTAINMENT:
        return sql.SQL("{}.metadata @> %(metadata)s").format(sql.Identifier(alias))
    return metafilter.render(shape, alias)


def make_filter(package: str | None, metadata: dict[str, Any] | None) -> Filter:
    """Validate the filter arguments; InvalidInput when ``package`` is not text or ``metadata`` is not a
    JSON object that ``jsonb`` can hold (see :func:`ragstore.common.strictjson.check_json_value`: no NaN or
    infinity, no NUL, no lone surrogate, at most :data:`MAX_WHERE_DEPTH` levels), before any database call."""
    if package is not None and not isinstance(package, str):
        raise InvalidInput(f"package must be a package_path prefix (text), got {package!r}")
    if package is not None:
        problem = text_problem(package)
        if problem is not None:
            raise InvalidInput(f"package holds {problem}")
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidInput(f"metadata must be a JSON object (dict) to match with @>, got {metadata!r}")
    if metadata:
        check_json_value(metadata, "metadata", max_depth=MAX_WHERE_DEPTH)
        if uses_operators(metadata):
            metafilter.parse(metadata)  # InvalidInput now for what the operators cannot express
    return Filter(package or None, dict(metadata) if metadata else None)


MAX_WHERE_DEPTH = 32


def parse_where(text: str, option: str = "--where") -> dict[str, Any]:
    """The metadata filter a ``--where`` value spells: one strict JSON object (no NaN or Infinity, no NUL,
    no lone surrogate, nested at most :data:`MAX_WHERE_DEPTH` deep). InvalidInput naming ``option``
    otherwise, so that nothing the server would refuse is ever sent to it."""
    value = loads_strict(text, option, max_depth=MAX_WHERE_DEPTH)
    if not isinstance(value, dict):
        raise InvalidInput(f'{option} must be a JSON object such as \'{{"lang": "en"}}\', got {_short(text)}')
    return value


def _short(text: str, limit: int = 60) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return repr(shown)


def check_k(k: int, name: str = "k") -> int:
    """``k`` when it is a positive integer (a bool is refused), else InvalidInput."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise InvalidInput(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def check_min_score(min_score: float | None) -> float | None:
    """``min_score`` as a float when finite (or None), else InvalidInput."""
    if min_score is None:
        return None
    if isinstance(min_score, bool) or not isinstance(min_score, int | float | np.floating | np.integer):
        raise InvalidInput(f"min_score must be a finite number, got {min_score!r}")
    value = float(min_score)
    if not math.isfinite(value):
        raise InvalidInput(f"min_score must be a finite number, got {min_score!r}")
    return value


def to_float32(value: Any) -> npt.NDArray[np.float32]:
    """A pgvector ``Vector``/``HalfVector`` (or a sequence of numbers) as a float32 array."""
    raw = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(raw, dtype=np.float32)


F32_MAX = float(np.finfo(np.float32).max)


def check_query_vector(vector: Any, family: Family) -> npt.NDArray[np.float32]:
    """The query as a float32 ``(dim,)`` array; ModelMismatch for another dimension, InvalidInput if not finite."""
    try:
        wide = np.asarray(vector.to_numpy() if hasattr(vector, "to_numpy") else vector, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInput(f"the query vector is not a list of numbers: {exc}") from exc
    # Checked before the float32 cast, which would warn on stderr and make the value an infinity.
    beyond = np.flatnonzero(np.isfinite(wide) & (np.abs(wide) > F32_MAX)) if wide.ndim == 1 else np.zeros(0)
    if beyond.size:
        at = int(beyond[0])
        raise InvalidInput(f"the query vector's value {float(wide[at])!r} at position {at} is beyond float32")
    array = wide.astype(np.float32)
    if array.ndim != 1:
        raise InvalidInput(f"the query vector must be one-dimensional, got shape {array.shape}")
    if array.shape[0] != family.dim:
        raise ModelMismatch(
            f"the query vector has {array.shape[0]} dimensions; family {family.name!r} holds "
            f"{family.dim}-d {family.backend}/{family.model} vectors"
        )
    if not np.isfinite(array).all():
        raise InvalidInput("the query vector has a non-finite component (NaN or infinity)")
    return array
