"""Helpers several test modules share (once in integration/test_bm25.py)."""

from __future__ import annotations

from typing import Any


def postings_are_current(conn: Any) -> None:
    stored = conn.execute(
        "SELECT family, chunk_id, lexeme, tf, dl FROM ragstore.chunk_terms ORDER BY 1, 2, 3"
    ).fetchall()
    derived = conn.execute(
        "SELECT c.family, c.chunk_id, t.lexeme, t.tf, t.dl FROM ragstore.chunks AS c "
        "CROSS JOIN LATERAL ragstore.tsv_terms(c.tsv) AS t ORDER BY 1, 2, 3"
    ).fetchall()
    assert stored == derived
    ledger = conn.execute(
        "SELECT family, sum(delta), sum(tokens) FROM ragstore.family_chunk_deltas GROUP BY family "
        "HAVING sum(delta) <> 0 OR sum(tokens) <> 0 ORDER BY family"
    ).fetchall()
    counted = conn.execute(
        "SELECT family, count(*), sum(tf) FROM ragstore.chunk_terms WHERE lexeme = '' GROUP BY family ORDER BY family"
    ).fetchall()
    assert ledger == counted
    if conn.execute("SELECT to_regclass('ragstore.chunk_term_df')").fetchone()[0] is not None:  # from 0017
        document_frequencies_are_current(conn)


def document_frequencies_are_current(conn: Any) -> None:
    # Each word's count of chunks, derived from the chunks' own tsvectors; no row for a word no chunk holds.
    kept = conn.execute("SELECT family, lexeme, df FROM ragstore.chunk_term_df ORDER BY 1, 2").fetchall()
    derived = conn.execute(
        "SELECT c.family, u.lexeme, count(*) FROM ragstore.chunks AS c"
        " CROSS JOIN LATERAL unnest(tsvector_to_array(c.tsv)) AS u(lexeme) GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    assert kept == derived
    # ... and from the postings themselves, which BM25 reads beside them.
    counted = conn.execute(
        "SELECT family, lexeme, count(*) FROM ragstore.chunk_terms WHERE lexeme <> '' GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    assert kept == counted
