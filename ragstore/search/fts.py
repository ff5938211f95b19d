"""The full-text leg: BM25 over precomputed term statistics of the chunks' ``tsvector``.

Its statement is block ``fts`` of ``ragstore/sql/hybrid.sql``, rendered with the hybrid one by
:func:`ragstore.search.hybrid.statement` (one module renders every block of that file).

Why this scoring: docs/decisions.md, "Full-text scoring".

Promises of :func:`fts_search`:

- The query is parsed by ``websearch_to_tsquery(config, text)``, so users may type ``"quoted phrases"``,
  ``or`` and ``-exclusions``. ``config`` is the family option ``fts_config`` (``english`` by default,
  ``simple`` available); the chunks' ``tsv`` column was built with the same configuration at index time.
- A query of plain words (no quote, no ``or``, no ``-``) matches chunks holding ANY of its words
  (``match="auto"``): on the manpages set the strict AND of ``websearch_to_tsquery`` finds nothing for
  about half the queries. A query with operators keeps its strict meaning (the chunks it matches, through
  the GIN index); ``match="all"`` forces the strict meaning for every query.
- Chunks are ranked by BM25 (``k1`` :data:`ragstore.search.hybrid.BM25_K1`, ``b``
  :data:`~ragstore.search.hybrid.BM25_B`): ``Σ over the query's words w the chunk holds of idf(w) · tf ·
  (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))`` with ``idf(w) = ln(1 + (N − df + 0.5)/(df + 0.5))``, tf the
  word's occurrences in the chunk and dl the chunk's length (lexeme occurrences of its ``tsv``); then chunk_id
  ascending. tf, dl and df come from ``ragstore.chunk_terms`` (one row per chunk and lexeme, kept by triggers
  on the chunks); N and the average length from the family's ledger (``ragstore.family_chunk_deltas``). On
  Citus, where no trigger keeps either, the same numbers come from the chunks' ``tsv`` in the statement itself
  (``ragstore/sql/hybrid_citus.sql``): the same scores. Only the family's own chunks are read, returned and
  counted: another family's chunks never change a score here.
- An empty or stopword-only query gives ``[]``, never an error. ``package`` (a package_path prefix,
  LIKE wildcards escaped) and ``metadata`` (jsonb ``@>``) filter the chunks.

Hits carry the full-text score as ``score`` and in ``scores["fts"]``, the 1-based rank in
``ranks["fts"]``, and the family's vector (for MMR).
"""

from __future__ import annotations

from typing import Any

import psycopg

from ragstore.db.connection import db_errors
from ragstore.db.dialect import Dialect, dialect_of
from ragstore.families import Family
from ragstore.search.drive import Rows
from ragstore.search.hybrid import statement, text_params
from ragstore.search.request import Filter, Hit, check_k, make_filter, row_to_hit

__all__ = ["fts_search", "fts_step", "row_to_fts_hit"]

Conn = psycopg.Connection[Any]


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
