"""One text of the hybrid statement: the function file ragstore/sql/functions/hybrid_search.sql holds no copy of
it; what `ragstore migrate` applies is the file with hybrid.sql's statement and blocks put in, every
placeholder and named parameter of the library's form turned into the function's."""

from __future__ import annotations

import re

from ragstore.db import hybrid_text, schema
from ragstore.db.dialect import CITUS, POSTGRES
from ragstore.db.sqlfiles import query
from ragstore.search import drive


def applied() -> str:
    return next(f.text for f in schema.functions() if f.name == "hybrid_search.sql")


def test_the_function_file_holds_markers_not_a_copy_of_the_statement() -> None:
    raw = (schema.FUNCTIONS_DIR / "hybrid_search.sql").read_text(encoding="utf-8")
    assert "{{hybrid_statement}}" in raw
    assert "fts_scores" not in raw and "row_number()" not in raw  # the statement's own text is not here


def test_the_applied_function_has_hybrid_sql_statement_in_the_function_s_terms() -> None:
    text = applied()
    assert "{{" not in text and "%(" not in text
    assert re.search(r"(?<!\{)\{\w+\}(?!\})", text.split("$q$")[1]) is None  # no placeholder left
    # the blocks of hybrid.sql, in function form: the statement's CTEs and each choice the library makes
    assert "ragstore.fts_scores($5, $1::regconfig, $2, $14, $15)" in text
    for block in ("candidates_any", "candidates_all", "norm_tmm", "norm_minmax", "norm_zscore", "fuse_rrf", "fuse_cc"):
        assert f"$b${hybrid_text.function_form(query('hybrid', block))}$b$" in text, block


def test_a_change_of_hybrid_sql_is_a_change_of_the_function() -> None:
    # the function's recorded hash covers the statement put in: a different statement, a different text
    statement = hybrid_text.function_form(
        hybrid_text.assemble(
            "hybrid", dialect=POSTGRES, bit=True, candidates=None, guard=False, fusion=None, vectors=False
        )
    ).rstrip(";")
    assert statement in applied()


def test_the_citus_dialect_takes_hybrid_citus_blocks_and_the_rest_from_hybrid_sql() -> None:
    one = hybrid_text.assemble(
        "fts", dialect=POSTGRES, bit=False, candidates="any", guard=False, fusion=None, vectors=True
    )
    citus = hybrid_text.assemble(
        "fts", dialect=CITUS, bit=False, candidates="any", guard=False, fusion=None, vectors=True
    )
    assert query("hybrid", "bm25") in one and query("hybrid", "bm25") not in citus
    # The Citus bm25 block, with BM25's arithmetic put in: the same text ragstore.fts_scores runs.
    arithmetic = [query("hybrid", "bm25_weights"), query("hybrid", "bm25_sum")]
    assert all(text in citus and text not in one for text in arithmetic)
    fts_scores = next(f.text for f in schema.functions() if f.name == "fts_scores.sql")
    assert all(text.replace("%(k1)s", "k1").replace("%(b)s", "b") in fts_scores for text in arithmetic)
    assert query("hybrid", "candidates_any") in one and query("hybrid", "candidates_any") in citus
    assert (
        CITUS.hnsw_settings(ef_search=40, iterative=True) and POSTGRES.hnsw_settings(ef_search=40, iterative=True) == []
    )


def test_an_hnsw_step_carries_its_dialects_settings() -> None:
    one = drive.hnsw_step("SELECT 1", {"q": 1}, "hnsw", ef_search=40, iterative=True, dialect=POSTGRES)
    shards = drive.hnsw_step("SELECT 1", {"q": 1}, "hnsw", ef_search=40, iterative=True, dialect=CITUS)
    assert one.settings == ()  # one node: the statement makes them from its parameters
    assert one.params == shards.params == {"q": 1, "ragstore_ef": "40", "ragstore_iterative": "relaxed_order"}
    assert shards.settings == tuple(CITUS.hnsw_settings(ef_search=40, iterative=True)) and len(shards.settings) == 3
