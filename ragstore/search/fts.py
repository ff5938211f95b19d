"""The full-text leg: BM25 over precomputed term statistics of the chunks' ``tsvector``.

Why this scoring: docs/decisions.md, "Full-text scoring".

Promises of :func:`fts_search`:

- The query is parsed by ``websearch_to_tsquery(config, text)``, so users may type ``"quoted phrases"``,
  ``or`` and ``-exclusions``. ``config`` is the family option ``fts_config`` (``english`` by default,
  ``simple`` available); the chunks' ``tsv`` column was built with the same configuration at index time.
- A query of plain words (no quote, no ``or``, no ``-``) matches chunks holding ANY of its words
  (``match="auto"``): on the manpages set the strict AND of ``websearch_to_tsquery`` finds nothing for
  about half the queries. A query with operators keeps its strict meaning (the chunks it matches, through
  the GIN index); ``match="all"`` forces the strict meaning for every query.
- Chunks are ranked by BM25 (``k1`` :data:`BM25_K1`, ``b`` :data:`BM25_B`): ``Σ over the query's words w
  the chunk holds of idf(w) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))`` with
  ``idf(w) = ln(1 + (N − df + 0.5)/(df + 0.5))``, tf the word's occurrences in the chunk and dl the
  chunk's length (lexeme occurrences of its ``tsv``); then chunk_id ascending. tf, dl and df come from
  ``ragstore.chunk_terms`` (one row per chunk and lexeme, kept by triggers on the chunks); N and the
  average length from the family's ledger (``ragstore.family_chunk_deltas``). On Citus, where no trigger
  keeps either, the same numbers come from the chunks' ``tsv`` in the statement itself
  (``ragstore/sql/hybrid_citus.sql``): the same scores. Only the family's own chunks are read, returned
  and counted: another family's chunks never change a score here.
- An empty or stopword-only query gives ``[]``, never an error. ``package`` (a package_path prefix,
  LIKE wildcards escaped) and ``metadata`` (jsonb ``@>``) filter the chunks.

Hits carry the full-text score as ``score`` and in ``scores["fts"]``, the 1-based rank in
``ranks["fts"]``, and the family's vector (for MMR).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ragstore.db.connection import db_errors
from ragstore.db.dialect import POSTGRES, Dialect, dialect_of
from ragstore.db.hybrid_text import assemble
from ragstore.errors import InvalidInput
from ragstore.families import Family
from ragstore.families.storage import order_expression
from ragstore.search import metafilter
from ragstore.search.drive import Rows
from ragstore.search.filters import Filter, ShapeFilter, check_k, make_filter
from ragstore.search.request import Hit
from ragstore.search.vector import row_to_hit

__all__ = ["BM25_B", "BM25_K1", "MATCHES", "fts_search"]

Conn = psycopg.Connection[Any]

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


def fts_search(
    conn: Conn,
    family: Family,
    query_text: str,
    *,
    k: int,
    package: str | None = None,
    metadata: dict[str, Any] | None = None,
    match: str = "auto",
) -> list[Hit]:
    """The top ``k`` chunks of ``family`` for ``query_text`` by full text (see the module docstring).

    Raises InvalidInput (k, match, filters, a bad fts_config option) and the database
    errors of :func:`ragstore.db.connection.map_db_error`.
    """
    flt = make_filter(package, metadata)
    step = fts_step(family, query_text, k=k, flt=flt, match=match, dialect=dialect_of(conn))
    with db_errors():
        rows = conn.execute(step.statement, step.params).fetchall()
    return [row_to_fts_hit(row) for row in rows]


def fts_step(family: Family, query_text: str, *, k: int, flt: Filter, match: str = "auto", dialect: Dialect) -> Rows:
    """The plan's step of the full-text statement (its rows: :func:`row_to_fts_hit`); the filter gets the
    family's declared keys, so conditions on them read their btree. Raises InvalidInput."""
    k = check_k(k)
    flt = flt.for_family(family)
    params = {**text_params(family, query_text, match=match), **flt.params()}
    text = statement(family, "fts", flt, any_words=params.pop("any"), fts_n=k, dialect=dialect)
    return Rows(text, params, "fts", isolated=False, binary=False)


def row_to_fts_hit(row: tuple[Any, ...]) -> Hit:
    """A row of the full-text statement as a Hit."""
    return row_to_hit(row, ranks={"fts": int(row[7])}, scores={"fts": float(row[2])})
