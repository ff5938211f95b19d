"""Search filters and the checks every search input goes through at the edge.

A :class:`Filter` narrows a search to a ``package_path`` prefix (LIKE wildcards in the prefix are
escaped, so ``docs/a_b`` matches only that literal prefix) and/or a ``metadata`` containment
(``metadata @> <json>`` on the family table's GIN-indexed copy of the chunks' metadata). The same filter
is rendered once as a SQL fragment with parameters, and every path (HNSW, exact over the filtered rows,
numpy exact) uses that one fragment, over the family table alone.

What the filtered-plan choice (:func:`ragstore.search.vector.plan_for`) reads lives here too: the
planner's estimate of the rows a filter keeps (:func:`estimate_rows`, one ``EXPLAIN``: statistics, no
scan), remembered for :data:`ragstore.caches.ESTIMATE_TTL_SECONDS` (:func:`cached_estimate`), and the
budget of rows an exact search may read (:meth:`RowEstimate.budget`). An estimate costs no scan whatever
the filter keeps; counting the filtered rows through the btree (the earlier plan) cost up to 0.2 ms at
100k rows, a fifth of the iterative scan it chose.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql
from psycopg.types.json import Jsonb

from ragstore.caches import Caches, caches_for
from ragstore.common.like import like_prefix
from ragstore.common.strictjson import check_json_value, loads_strict, text_problem
from ragstore.db.connection import Conn, run_isolated
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.families import Family
from ragstore.search import metafilter
from ragstore.search.metafilter import uses_operators

# A filtered query whose filter keeps at most this many rows (estimated) runs exact in SQL over those rows (recall 1.0);
# a wider filter runs HNSW with iterative scan. Measured with benchmarks/query.py (docs/search.md), p50 of
# exact-over-subset / iterative scan (ef 100), with the un-materialized exact plan: 16-d 1,000 rows 0.37,
# 2,000 rows 0.74, 5,000 rows 1.64, 10,000 rows 2.92; 384-d 1,000 rows 1.04, 2,000 rows 0.53, 5,000 rows
# 0.51, 10,000 rows 2.42. Crossover: ~3,000 rows at 16-d, between 5,000 and 10,000 at 384-d.
FILTER_EXACT_MAX_ROWS = 3_000
FILTER_EXACT_MAX_ROWS_WIDE = 5_000
WIDE_DIM = 256
# On a large family a filter that keeps a small FRACTION of it also goes exact, up to SELECTIVE_MAX_ROWS:
# an iterative scan walks about k / selectivity graph entries before k of them pass the filter, while the
# exact subset reads only the rows it keeps (from contiguous pages: a bulk load clusters the family by
# package_path). Measured at 1M x 16-d (benchmarks/query.py, exact subset vs iterative ef 100, p50):
# 1% = 10,000 rows 3.2 vs 12.4 ms; 2% = 20,000 rows 6.1 vs 8.1 ms; 5% = 50,000 rows 15.1 vs 5.3 ms.
SELECTIVE_FRACTION = 0.02
SELECTIVE_MAX_ROWS = 25_000


def exact_max_rows(dim: int) -> int:
    """The exact-over-subset threshold for vectors of ``dim`` dimensions (see the figures above)."""
    return FILTER_EXACT_MAX_ROWS_WIDE if dim >= WIDE_DIM else FILTER_EXACT_MAX_ROWS


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


@dataclass(frozen=True)
class RowEstimate:
    """The planner's estimates for a filtered search: rows passing the filter, and rows in the family."""

    rows: float
    total: float

    def budget(self, dim: int) -> int:
        """The most filtered rows an exact search should read: :func:`exact_max_rows`, or on a large family
        ``SELECTIVE_FRACTION`` of its rows up to ``SELECTIVE_MAX_ROWS``."""
        floor = exact_max_rows(dim)
        return max(floor, min(SELECTIVE_MAX_ROWS, math.floor(SELECTIVE_FRACTION * max(self.total, 0.0))))


def estimate_statements(family: Family, flt: Filter) -> list[tuple[sql.Composed | str, dict[str, Any]]]:
    """The two read-only statements of an estimate: ``EXPLAIN`` of the filtered scan, and the family's
    ``pg_class.reltuples``."""
    explain = sql.SQL("EXPLAIN (FORMAT JSON) SELECT 1 FROM ragstore.{table} AS e {where}").format(
        table=sql.Identifier(family.table), where=flt.where()
    )
    relation = f'ragstore."{family.table}"'  # family.table is a checked name: [a-z][a-z0-9_]*
    total_sql = "SELECT greatest(reltuples, 0)::float8 FROM pg_class WHERE oid = %(relation)s::regclass"
    return [(explain, flt.params()), (total_sql, {"relation": relation})]


def read_estimate(plan_rows: list[tuple[Any, ...]], total_rows: list[tuple[Any, ...]]) -> RowEstimate:
    """The RowEstimate the rows of :func:`estimate_statements` say."""
    plan_row = plan_rows[0] if plan_rows else None
    total_row = total_rows[0] if total_rows else None
    plan = plan_row[0] if plan_row else None
    if isinstance(plan, str):
        plan = json.loads(plan)
    try:
        rows = float(plan[0]["Plan"]["Plan Rows"])  # type: ignore[index]
    except (TypeError, KeyError, IndexError, ValueError):
        rows = math.inf  # no estimate: the iterative plan, whose short answers fall back to exact
    return RowEstimate(rows, float(total_row[0]) if total_row else 0.0)


def estimate_rows(conn: Conn, family: Family, flt: Filter) -> RowEstimate:
    """The planner's estimate of the rows passing ``flt`` (``EXPLAIN``: statistics, no scan) and of the
    family's rows (``pg_class.reltuples``, 0 before the first ANALYZE), in one round trip."""
    plan_rows, total_rows = run_isolated(conn, estimate_statements(family, flt))
    return read_estimate(plan_rows, total_rows)


def estimate_key(family: Family, flt: Filter) -> tuple[str, str | None, str | None] | None:
    """What an estimate is remembered under; None when the metadata cannot be keyed (keys of mixed types)."""
    try:
        metadata = None if flt.metadata is None else json.dumps(flt.metadata, sort_keys=True)
    except TypeError:
        return None
    if metadata is not None and flt.keys:  # another statement, another estimate
        metadata += " declared " + json.dumps(sorted(flt.keys))
    return (family.table, flt.package, metadata)


def cached_estimate(conn: Conn, family: Family, flt: Filter, caches: Caches | None = None) -> RowEstimate:
    """:func:`estimate_rows`, remembered in ``caches`` (by default the connection's, see
    :func:`ragstore.caches.caches_for`) during :data:`ragstore.caches.ESTIMATE_TTL_SECONDS`."""
    key = estimate_key(family, flt)
    if key is None:  # keys of mixed types cannot be sorted: estimate, but do not remember
        return estimate_rows(conn, family, flt)
    store = caches if caches is not None else caches_for(conn)
    hit = store.estimate(key)
    if hit is not None:
        return hit
    estimate = estimate_rows(conn, family, flt)
    store.remember_estimate(key, estimate)
    return estimate
