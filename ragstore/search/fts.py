"""The full-text leg: ``websearch_to_tsquery`` over the chunks' generated ``tsvector``.

Why this scoring: docs/decisions.md, "Full-text scoring".

Promises of :func:`fts_search`:

- The query is parsed by ``websearch_to_tsquery(config, text)``, so users may type ``"quoted phrases"``,
  ``or`` and ``-exclusions``. ``config`` is the family option ``fts_config`` (``english`` by default,
  ``simple`` available); the chunks' ``tsv`` column was built with the same configuration at index time.
- A query of plain words (no quote, no ``or``, no ``-``) matches chunks holding ANY of its words
  (``match="auto"``): on the manpages set the strict AND of ``websearch_to_tsquery`` finds nothing for
  about half the queries (docs/hybrid-eval.md). A query with operators keeps its strict meaning;
  ``match="all"`` forces the strict meaning for every query.
- Chunks are ranked by an IDF-weighted ``ts_rank_cd``: ``Σ over the query's words w that the chunk holds
  of idf(w) · (1 + cd/(cd + 1))`` where ``cd = ts_rank_cd(tsv, w, normalization)`` and
  ``idf(w) = ln(1 + (N − df + 0.5)/(df + 0.5))`` over the chunk table (BM25's idf); then chunk_id
  ascending. Plain ``ts_rank_cd`` of the whole query has no notion of rare words and ranked the manpages
  set at nDCG@10 0.51 at best; this reaches ~0.64 (BM25: 0.674). ``normalization`` is ts_rank_cd's flags
  (default :data:`DEFAULT_NORMALIZATION`, 2 = divide by the chunk length, chosen by measurement). Only
  the family's own chunks are read, returned and counted (N and df of the idf): another family's chunks
  never change a score here.
- An empty or stopword-only query gives ``[]``, never an error. ``package`` (a package_path prefix,
  LIKE wildcards escaped) and ``metadata`` (jsonb ``@>``) filter the chunks.

Hits carry the full-text score as ``score`` and in ``scores["fts"]``, the 1-based rank in
``ranks["fts"]``, and the family's vector (for MMR).
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from ragstore.db.connection import db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import InvalidInput
from ragstore.families import Family
from ragstore.search.filters import Filter, check_k, make_filter
from ragstore.search.types import Hit
from ragstore.search.vector import row_to_hit

__all__ = ["DEFAULT_FTS_CONFIG", "DEFAULT_NORMALIZATION", "MATCHES", "fts_config_of", "fts_search"]

Conn = psycopg.Connection[Any]

DEFAULT_FTS_CONFIG = "english"
# ts_rank_cd flags inside the IDF-weighted score: 2 divides by the chunk length. Measured on the first 300
# manpages queries (english): 0 → nDCG@10 0.628, 1 → 0.627, 2 → 0.643 (docs/hybrid-eval.md).
DEFAULT_NORMALIZATION = 2
MATCHES = ("auto", "all")
_OPERATORS = re.compile(r"""["']|(^|\s)-\S|(^|\s)or(\s|$)""", re.IGNORECASE)
_CONFIG_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def fts_config_of(family: Family) -> str:
    """The text-search configuration of ``family`` (option ``fts_config``, default ``english``).

    Raises InvalidInput when the option is not a plain configuration name.
    """
    config = family.options.get("fts_config", DEFAULT_FTS_CONFIG)
    if not isinstance(config, str) or not _CONFIG_NAME.fullmatch(config):
        raise InvalidInput(f"family {family.name!r} has an invalid fts_config option {config!r}")
    return config


def plain_words(text: str) -> bool:
    """True when ``text`` uses none of websearch's operators (quotes, ``or``, a ``-`` before a word)."""
    return _OPERATORS.search(text) is None


def check_normalization(normalization: int) -> int:
    """``normalization`` when it is a combination of ts_rank_cd's flags (0..63), else InvalidInput."""
    if isinstance(normalization, bool) or not isinstance(normalization, int) or not 0 <= normalization <= 63:
        raise InvalidInput(f"normalization must be ts_rank_cd flags between 0 and 63, got {normalization!r}")
    return normalization


def text_params(
    family: Family, query_text: str, *, normalization: int = DEFAULT_NORMALIZATION, match: str = "auto"
) -> dict[str, Any]:
    """The full-text parameters of the SQL blocks: family, query, fts_config, any, norm. Raises InvalidInput."""
    if not isinstance(query_text, str):
        raise InvalidInput(f"the query text must be a string, got {query_text!r}")
    if match not in MATCHES:
        raise InvalidInput(f"match must be one of {', '.join(MATCHES)}, got {match!r}")
    return {
        "family": family.name,
        "query": query_text,
        "fts_config": fts_config_of(family),
        "any": match == "auto" and plain_words(query_text),
        "norm": check_normalization(normalization),
    }


def statement(family: Family, block: str, flt: Filter) -> sql.Composed:
    """Block ``block`` of ``ragstore/sql/hybrid.sql`` with the family's names and the filter filled in."""
    return sql.SQL(query("hybrid", block)).format(
        query_terms=sql.SQL(query("hybrid", "query_terms")),
        table=sql.Identifier(family.table),
        vtype=family.identifiers()["vector_type"],
        where_fts=flt.where(extra=sql.SQL("c.family = %(family)s AND c.tsv @@ m.wide")),
        where_vec=flt.where(extra=sql.SQL("%(use_vector)s")),
    )


def fts_search(
    conn: Conn,
    family: Family,
    query_text: str,
    *,
    k: int,
    package: str | None = None,
    metadata: dict[str, Any] | None = None,
    normalization: int = DEFAULT_NORMALIZATION,
    match: str = "auto",
) -> list[Hit]:
    """The top ``k`` chunks of ``family`` for ``query_text`` by full text (see the module docstring).

    Raises InvalidInput (k, normalization, match, filters, a bad fts_config option) and the database
    errors of :func:`ragstore.db.connection.map_db_error`.
    """
    k = check_k(k)
    flt = make_filter(package, metadata)
    params = {**text_params(family, query_text, normalization=normalization, match=match), **flt.params(), "k": k}
    with db_errors():
        # prepare=False: planned with the actual values every time, so the planner sees the filters' values
        rows = conn.execute(statement(family, "fts", flt), params, prepare=False).fetchall()
    return [row_to_hit(row, ranks={"fts": int(row[7])}, scores={"fts": float(row[2])}) for row in rows]
