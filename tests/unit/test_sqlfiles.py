"""The SQL blocks are sent compact: no comments, white space outside quotes made one space, quoted text kept;
the hybrid statements fit psycopg's cache of converted statements."""

from __future__ import annotations

import pytest
from psycopg import _queries

from ragstore.db.sqlfiles import compact, query
from ragstore.families import Family
from ragstore.search.fusion import FUSIONS, NORMALIZATIONS
from ragstore.search.hybrid import statement
from ragstore.search.request import make_filter

# A 384-d family of the default storage, as the registry returns it.
FAMILY = Family("docs", "minilm", "all-MiniLM-L6-v2", 384, "vector", "emb_docs", "ready", {})


def test_compact_drops_comments_and_keeps_quoted_text() -> None:
    text = "SELECT 'a  -- b' ,  \"x  y\" -- a comment\n  /* another */ , $f$ a  -- kept\n $f$,\n\t1 -- last"
    assert compact(text) == "SELECT 'a  -- b' , \"x  y\" , $f$ a  -- kept\n $f$, 1"


def test_compact_keeps_doubled_quotes_inside_strings() -> None:
    assert compact("SELECT 'it''s  -- here'   -- gone\n") == "SELECT 'it''s  -- here'"


def test_blocks_are_returned_without_their_comments() -> None:
    text = query("hybrid", "hybrid")
    assert "--" not in text and "\n" not in text and "  " not in text


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("any_words", [True, False])
@pytest.mark.parametrize(("vectors", "guard"), [(True, False), (False, True)])
def test_unfiltered_hybrid_statements_fit_psycopgs_statement_cache(
    fusion: str, normalization: str, any_words: bool, vectors: bool, guard: bool
) -> None:
    # psycopg converts the placeholders of a longer statement again on every call. Both forms: the fresh
    # path's (hits with vectors) and the remembered family's (guarded, no vectors: the search hot path).
    text = statement(
        FAMILY, "hybrid", make_filter(None, None), any_words=any_words, fts_n=20, vec_n=20, k=10,
        fusion=(fusion, normalization), vectors=vectors, guard=guard,
    )  # fmt: skip
    assert len(text.encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH
