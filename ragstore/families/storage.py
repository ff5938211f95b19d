"""How a family's HNSW index holds its vectors: ``vector``, ``halfvec`` or ``bit`` (the family option ``storage``).

The family table always keeps the full-precision column (``vector(d)``, or ``halfvec(d)`` above pgvector's
2,000-dimension limit): the exact path, MMR and the ``bit`` re-rank read it, and switching storage is an index
swap, never a rewrite of the table or a re-embedding (``ragstore family migrate --storage``).

- ``vector``: the index is on the column itself (``embedding vector_cosine_ops``).
- ``halfvec``: an expression index on ``(embedding::halfvec(d)) halfvec_cosine_ops``, half the index size.
- ``bit``: an expression index on ``(binary_quantize(embedding)::bit(d)) bit_hamming_ops`` (one bit per
  dimension); a search reads ``k × rerank_factor`` candidates by Hamming distance and re-ranks them exactly
  by cosine on the full vectors.

A search orders by the same expression the index is built on, so the planner uses the index; this module
is the one place where that expression is written (:func:`order_expression`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragstore.errors import InvalidInput

STORAGES = ("vector", "halfvec", "bit")
# The bit storage's default candidate multiplier: the index returns k × this many rows by Hamming distance,
# re-ranked exactly by cosine. From benchmarks/storage.py (benchmarks/README.md, "Index storage"): on MiniLM
# passages recall@10 was .902 / .970 / .988 / .996 at factors 4 / 10 / 20 / 40, at p50 0.92 / 1.04 / 3.09 /
# 4.20 times vector's: 10 is the first factor over 0.95, at vector's latency.
DEFAULT_RERANK_FACTOR = 10
MAX_RERANK_FACTOR = 100
# pgvector's HNSW dimension limits per indexed type.
_HNSW_LIMIT = {"vector": 2000, "halfvec": 4000, "bit": 64000}


def check_storage(storage: object, dim: int, vector_type: str) -> str:
    """``storage`` when it is one of :data:`STORAGES` and can index ``dim`` dimensions, else InvalidInput."""
    if storage not in STORAGES:
        raise InvalidInput(f"invalid storage {storage!r}: use one of {', '.join(STORAGES)}")
    assert isinstance(storage, str)
    limit = _HNSW_LIMIT[vector_type if storage == "vector" else storage]
    if dim > limit:
        raise InvalidInput(f"storage {storage} indexes at most {limit:,} dimensions; this family has {dim:,}")
    return storage


def check_rerank_factor(factor: object) -> int:
    """``factor`` when it is an integer from 1 to :data:`MAX_RERANK_FACTOR`, else InvalidInput."""
    if isinstance(factor, bool) or not isinstance(factor, int) or not 1 <= factor <= MAX_RERANK_FACTOR:
        raise InvalidInput(f"invalid rerank factor {factor!r}: use an integer from 1 to {MAX_RERANK_FACTOR}")
    return factor


def storage_options(storage: str | None, rerank_factor: int | None) -> dict[str, Any]:
    """The family options recording ``storage`` and ``rerank_factor`` (none for the defaults left unsaid);
    InvalidInput for a rerank factor without the bit storage."""
    options: dict[str, Any] = {}
    if storage is not None and storage != "vector":
        options["storage"] = storage
    if rerank_factor is not None:
        if storage != "bit":
            raise InvalidInput("a rerank factor applies to the bit storage only (give storage bit)")
        options["rerank_factor"] = check_rerank_factor(rerank_factor)
    return options


def kept_options(options: dict[str, Any]) -> dict[str, Any]:
    """The storage options a family keeps when a model migration replaces its table (the new table's index
    is built in the same storage)."""
    return {key: options[key] for key in ("storage", "rerank_factor") if key in options}


def index_expression(storage: str, vector_type: str, dim: int, column: str = "embedding") -> str:
    """What the HNSW index is built on (and what a search orders by), for ``column``: constant SQL text from
    checked parts (``storage`` one of STORAGES, ``vector_type`` vector/halfvec, ``dim`` an int)."""
    d = int(dim)
    if storage == "halfvec":
        return f"({column}::halfvec({d}))"
    if storage == "bit":
        return f"(binary_quantize({column})::bit({d}))"
    assert storage == "vector" and vector_type in ("vector", "halfvec")
    return column


def opclass(storage: str, vector_type: str) -> str:
    if storage == "halfvec":
        return "halfvec_cosine_ops"
    if storage == "bit":
        return "bit_hamming_ops"
    return f"{vector_type}_cosine_ops"


def order_expression(storage: str, vector_type: str, dim: int, column: str, param: str) -> str:
    """The distance a search orders by so the HNSW index serves it: ``column`` (e.g. ``e.embedding``) against
    the query ``param`` (a placeholder such as ``%(q)s`` or ``$1``), both as the index holds them."""
    d = int(dim)
    query = f"{param}::{vector_type}({d})"
    if storage == "halfvec":
        return f"{index_expression(storage, vector_type, d, column)} <=> {param}::halfvec({d})"
    if storage == "bit":
        return f"{index_expression(storage, vector_type, d, column)} <~> binary_quantize({query})::bit({d})"
    return f"{column} <=> {query}"


@dataclass(frozen=True)
class Measured:
    """One row of benchmarks/storage.py's table: recall@10 of ``storage`` (default ef_search and rerank
    factor) on ``data`` of ``dim`` dimensions, embedded by ``model`` (None: synthetic vectors)."""

    storage: str
    data: str
    dim: int
    model: str | None
    recall: float


# Recall below this is what `family create` warns of.
MEASURED_FLOOR = 0.95
# benchmarks/README.md, "Index storage" (one run each, the same rows for each storage).
MEASURED = (
    Measured("halfvec", "clustered synthetic vectors, 100k", 384, None, 0.989),
    Measured("halfvec", "MiniLM passages of local documentation, 18.7k", 384, "all-MiniLM-L6-v2", 0.998),
    Measured("bit", "clustered synthetic vectors, 100k", 384, None, 0.340),
    Measured("bit", "MiniLM passages of local documentation, 18.7k", 384, "all-MiniLM-L6-v2", 0.970),
    Measured("halfvec", "clustered synthetic vectors, 30k", 768, None, 0.996),
    Measured("bit", "clustered synthetic vectors, 30k", 768, None, 0.619),
)


def measured_caveat(storage: str, model: str, dim: int) -> str | None:
    """What ``family create`` says of ``storage`` for a family of ``model`` and ``dim``: None where every
    measurement of it kept recall@10 over MEASURED_FLOOR, else the figures, and whether this model is one
    of them."""
    rows = [m for m in MEASURED if m.storage == storage]
    if not rows or all(m.recall >= MEASURED_FLOOR for m in rows):
        return None
    figures = "; ".join(f"{m.recall:.2f} on {m.data} ({m.dim}-d)" for m in rows)
    own = [m for m in rows if m.model == model and m.dim == dim]
    if own and all(m.recall >= MEASURED_FLOOR for m in own):
        verdict = f"this model ({model}) measured well, but your data is not the benchmark's"
    else:
        verdict = f"not measured for {model} ({dim}-d); raise --rerank-factor or use halfvec if it falls short"
    return (
        f"{storage} storage measured recall@10 {figures} at the default rerank factor {DEFAULT_RERANK_FACTOR} "
        f"(benchmarks/README.md); {verdict}: run `ragstore check-recall` on this family once loaded"
    )
