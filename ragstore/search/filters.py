"""Search filters and the checks every search input goes through at the edge.

A :class:`Filter` narrows a search to a ``package_path`` prefix (LIKE wildcards in the prefix are
escaped, so ``docs/a_b`` matches only that literal prefix) and/or a ``metadata`` containment
(``chunks.metadata @> <json>``). The same filter is rendered once as a SQL fragment with parameters,
and every path (HNSW, exact over the filtered rows, numpy exact) uses that one fragment.

The filtered-plan choice lives here too: :func:`count_up_to` counts the filtered rows through the
``package_path`` btree (or the metadata GIN index) but stops at ``limit + 1``, so deciding costs at most
:func:`exact_max_rows` index entries whatever the family's size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ragstore.db.connection import db_errors
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.families import Family

Conn = psycopg.Connection[Any]

# A filtered query whose filter keeps at most this many rows runs exact in SQL over those rows (recall 1.0);
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
    """A package_path prefix and/or a metadata containment; both empty means no filter."""

    package: str | None = None
    metadata: dict[str, Any] | None = None

    @property
    def active(self) -> bool:
        return bool(self.package) or bool(self.metadata)

    @property
    def needs_chunks(self) -> bool:
        """True when the filter reads ``ragstore.chunks`` (metadata lives there, not in the family table)."""
        return bool(self.metadata)

    def where(
        self, alias: str = "e", chunks_alias: str = "c", *, extra: sql.Composable | None = None
    ) -> sql.Composable:
        """``WHERE …`` (or nothing) over the family table ``alias`` joined to chunks ``chunks_alias``.

        ``extra`` is one more condition ANDed in (the HNSW statement's reference to its settings row).
        """
        parts: list[sql.Composable] = [] if extra is None else [extra]
        if self.package:
            parts.append(sql.SQL("{}.package_path LIKE %(package_like)s").format(sql.Identifier(alias)))
        if self.metadata:
            parts.append(sql.SQL("{}.metadata @> %(metadata)s").format(sql.Identifier(chunks_alias)))
        if not parts:
            return sql.SQL("")
        return sql.SQL("WHERE ") + sql.SQL(" AND ").join(parts)

    def params(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        if self.package:
            values["package_like"] = like_prefix(self.package)
        if self.metadata:
            values["metadata"] = Jsonb(self.metadata)
        return values

    def join(self, alias: str = "e", chunks_alias: str = "c") -> sql.Composable:
        """The join to chunks the filter needs (nothing for a package-only filter)."""
        if not self.needs_chunks:
            return sql.SQL("")
        return sql.SQL("JOIN ragstore.chunks AS {c} ON {c}.chunk_id = {e}.chunk_id").format(
            c=sql.Identifier(chunks_alias), e=sql.Identifier(alias)
        )


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching strings that start with ``prefix`` literally (``\\``, ``%`` and ``_`` escaped)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def make_filter(package: str | None, metadata: dict[str, Any] | None) -> Filter:
    """Validate the filter arguments; InvalidInput when ``package`` is not text or ``metadata`` not a dict."""
    if package is not None and not isinstance(package, str):
        raise InvalidInput(f"package must be a package_path prefix (text), got {package!r}")
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidInput(f"metadata must be a JSON object (dict) to match with @>, got {metadata!r}")
    return Filter(package or None, dict(metadata) if metadata else None)


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


def check_query_vector(vector: Any, family: Family) -> npt.NDArray[np.float32]:
    """The query as a float32 ``(dim,)`` array; ModelMismatch for another dimension, InvalidInput if not finite."""
    try:
        array = np.asarray(vector.to_numpy() if hasattr(vector, "to_numpy") else vector, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"the query vector is not a list of numbers: {exc}") from exc
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


def count_with_budget(conn: Conn, family: Family, flt: Filter) -> tuple[int, int]:
    """``(filtered rows counted up to the row floor + 1, budget)`` in one statement.

    The floor is :func:`exact_max_rows`; the budget ``max(floor, min(SELECTIVE_MAX_ROWS, SELECTIVE_FRACTION
    x the family's rows))``, the family's rows being the planner's estimate (``pg_class.reltuples``, no
    scan). Counting stops at the floor so that a wide filter costs little to rule out; between the floor
    and the budget, :func:`estimated_rows` decides.
    """
    statement = sql.SQL(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM ragstore.{table} AS e {join} {where} LIMIT %(limit)s) AS s),"
        " (SELECT greatest(%(floor)s, least(%(cap)s, floor(%(fraction)s * greatest(c.reltuples, 0))))::bigint"
        "  FROM pg_class AS c WHERE c.oid = %(relation)s::regclass)"
    ).format(table=sql.Identifier(family.table), join=flt.join(), where=flt.where())
    floor = exact_max_rows(family.dim)
    params = {
        **flt.params(),
        "limit": floor + 1,
        "floor": floor,
        "cap": SELECTIVE_MAX_ROWS,
        "fraction": SELECTIVE_FRACTION,
        "relation": sql.Identifier("ragstore", family.table).as_string(conn),
    }
    with db_errors():
        row = conn.execute(statement, params).fetchone()
    if row is None or row[1] is None:
        return (0 if row is None else int(row[0])), floor
    return int(row[0]), int(row[1])


def estimated_rows(conn: Conn, family: Family, flt: Filter) -> float:
    """The planner's estimate of the rows passing ``flt`` (``EXPLAIN``: statistics, no scan)."""
    statement = sql.SQL("EXPLAIN (FORMAT JSON) SELECT 1 FROM ragstore.{table} AS e {join} {where}").format(
        table=sql.Identifier(family.table), join=flt.join(), where=flt.where()
    )
    with db_errors():
        row = conn.execute(statement, flt.params()).fetchone()
    plan = row[0] if row else None
    if isinstance(plan, str):
        import json

        plan = json.loads(plan)
    try:
        return float(plan[0]["Plan"]["Plan Rows"])  # type: ignore[index]
    except (TypeError, KeyError, IndexError, ValueError):
        return math.inf


def count_up_to(conn: Conn, family: Family, flt: Filter, limit: int) -> int:
    """How many rows of ``family`` pass ``flt``, counted no further than ``limit + 1``."""
    statement = sql.SQL(
        "SELECT count(*) FROM (SELECT 1 FROM ragstore.{table} AS e {join} {where} LIMIT %(cap)s) AS s"
    ).format(table=sql.Identifier(family.table), join=flt.join(), where=flt.where())
    with db_errors():
        row = conn.execute(statement, {**flt.params(), "cap": limit + 1}).fetchone()
    return int(row[0]) if row else 0
