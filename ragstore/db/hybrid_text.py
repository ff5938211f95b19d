"""The one text of full-text and hybrid search: the blocks of ``ragstore/sql/hybrid.sql`` put together.

:func:`assemble` fills a statement block (``fts`` or ``hybrid``) with the blocks it is made of, as
``ragstore search`` runs it in a :class:`~ragstore.db.dialect.Dialect` (on Citus with
``ragstore/sql/hybrid_citus.sql``'s forms of the blocks that file has); :mod:`ragstore.search.fts` then
fills the identifiers, the filter and the literals through ``psycopg.sql``.

:func:`function_form` renders the same assembled text for the SQL function ``ragstore.hybrid_search``
(``ragstore/sql/functions/hybrid_search.sql``, whose markers ``{{hybrid_statement}}`` and
``{{hybrid_block:<name>}}`` :func:`expand` replaces when ``ragstore migrate`` applies the file): the
parameters as the function's ``$n``, the family's table, vector type and index order as ``format()``'s
``%1$I``/``%2$s``/``%3$s``, and the three choices the library makes in Python (candidates, normalisation,
fusion) as ``%4$s``/``%5$s``/``%6$s``, filled at run time from the blocks :func:`expand` also inserts. So
a change of ``hybrid.sql`` is a change of the function too (its file's hash changes and ``migrate``
re-applies it), and no second text of the statement exists.
"""

from __future__ import annotations

import re

from ragstore.db.dialect import POSTGRES, Dialect
from ragstore.db.sqlfiles import query

__all__ = ["PARTS", "assemble", "expand", "function_form"]

# The blocks a statement of hybrid.sql is made of, in the order they are filled in: on Citus each is
# hybrid_citus.sql's block of that name where that file has one. {cosine} (in fts_top) is the cosine
# block in the hybrid statement and NULL in the full-text one, which has no query vector.
PARTS = ("query_terms", "bm25", "bm25_weights", "bm25_sum", "fts_top", "hits", "vec_top", "vec_scan")


def assemble(
    block: str,
    *,
    dialect: Dialect,
    bit: bool,
    candidates: str | None,
    guard: bool,
    fusion: tuple[str, str] | None,
    vectors: bool,
) -> str:
    """Block ``block`` with its parts filled in: ``bit`` wraps the vector scan in its re-rank,
    ``candidates`` (``any``/``all``; None leaves ``{candidates}``), ``fusion`` (the fusion and the
    normalisation; None leaves ``{fuse}``/``{norm}``), ``vectors`` (whether the hits carry their vector).
    Placeholders of identifiers, filters and literals are left for the caller. Constant texts of the
    package only, never input."""
    text = query("hybrid", block)
    for name in PARTS:
        part = dialect.block("hybrid", name)
        if name == "vec_scan" and bit:
            part = query("hybrid", "vec_scan_rerank").replace("{vec_scan}", part)
        text = text.replace("{" + name + "}", part)
    if candidates is not None:
        text = text.replace("{candidates}", query("hybrid", f"candidates_{candidates}"))
    text = text.replace("{guard}", query("hybrid", "guard") if guard else "")
    text = text.replace("{cosine}", query("hybrid", "cosine") if block == "hybrid" else "NULL::float8")
    if block == "hybrid":
        if fusion is not None:
            text = text.replace("{fuse}", query("hybrid", f"fuse_{fusion[0]}"))
            text = text.replace("{norm}", query("hybrid", f"norm_{fusion[1]}"))
        text = text.replace("{hit_row}", query("hybrid", "hit_row_vector" if vectors else "hit_row_plain"))
        text = text.replace("{hit_vector}", "e.embedding" if vectors else "NULL::{vtype}")
    return text


# The function's arguments and local values, as ragstore/sql/functions/hybrid_search.sql passes them
# (USING): the statement's parameters and literals become these.
_FUNCTION_PARAMS = {
    "fts_config": "$1",
    "query": "$2",
    "q": "$3",
    "family": "$5",
    "alpha": "$9",
    "rrf_k": "$10",
    "use_vector": "$12",
    "k1": "$14",
    "b": "$15",
    "ragstore_ef": "$16",
    "ragstore_iterative": "$17",
    "w_fts": "$18",
    "w_vec": "$19",
}
_FUNCTION_PLACEHOLDERS = {
    "table": "%1$I",
    "vtype": "%2$s",
    "vec_order": "%3$s",
    "candidates": "%4$s",
    "norm": "%5$s",
    "fuse": "%6$s",
    "k": "$4",
    "fts_n": "$6",
    "vec_n": "$6",
    "fts_head": "(2 * $6)",
    "vec_candidates": "$13",
    "where_fts": "WHERE c.family = $5 AND c.chunk_id = f.chunk_id",
    "where_vec": "WHERE $12 AND s.settings IS NOT NULL",
}
_PARAM = re.compile(r"%\((\w+)\)s")
_PLACEHOLDER = re.compile(r"(?<!\{)\{(\w+)\}(?!\})")


def function_form(text: str) -> str:
    """``text`` (assembled, or a block) in the function's terms (module docstring); KeyError names a
    parameter or placeholder the function has no value for."""
    text = _PARAM.sub(lambda m: _FUNCTION_PARAMS[m.group(1)], text)
    text = _PLACEHOLDER.sub(lambda m: _FUNCTION_PLACEHOLDERS[m.group(1)], text)
    return text.replace("{{", "{").replace("}}", "}")


def _statement() -> str:
    # Always the re-ranked scan: for a family not of the bit storage it reads vec_n candidates and keeps
    # them all, in the order the plain scan's ranks give (distance, then chunk_id).
    return function_form(
        assemble("hybrid", dialect=POSTGRES, bit=True, candidates=None, guard=False, fusion=None, vectors=False)
    ).rstrip(";")


_MARKER = re.compile(r"\{\{hybrid_(statement|block:(\w+)|inline:(\w+))\}\}")


def expand(text: str) -> str:
    """A function file's text with its ``{{hybrid_statement}}``, ``{{hybrid_block:<name>}}`` and
    ``{{hybrid_inline:<name>}}`` markers replaced (module docstring); a block comes as a dollar-quoted
    literal, the statement bare (inside the file's own ``format()`` literal), an inline block bare with each
    parameter ``%(x)s`` as the function's own argument ``x`` (so it must have one of that name)."""

    def one(match: re.Match[str]) -> str:
        if match.group(3) is not None:
            return _PARAM.sub(lambda m: m.group(1), query("hybrid", match.group(3)))
        if match.group(2) is None:
            return _statement()
        body = function_form(query("hybrid", match.group(2)))
        return f"$b${body}$b$"

    return _MARKER.sub(one, text)
