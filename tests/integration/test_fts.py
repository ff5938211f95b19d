"""The full-text leg: websearch_to_tsquery syntax, empty and stopword-only queries, configurations."""

from __future__ import annotations

from typing import Any

import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from ragstore.search.fts import fts_search
from ragstore.search.hybrid import plain_words

TEXTS = {
    "cp": "cp copies files and directories to a destination",
    "scp": "scp copies files between hosts on a network, over ssh",
    "mv": "mv moves or renames files",
    "rm": "rm removes files and directories",
    "running": "the runner keeps running jobs",
}


def make_family(conn: Any, name: str = "docs", **options: Any) -> families.Family:
    backend = OfflineBackend()
    fam = families.create_family(conn, name, backend, options=options)
    records = [(f"t:{cid}", ChunkRecord(chunk_id=cid, package_path=f"man/{cid}", text=t)) for cid, t in TEXTS.items()]
    write_records(conn, fam, backend, records)
    return fam


def ids(hits: list[Any]) -> set[str]:
    return {h.chunk_id for h in hits}


@pytest.fixture
def family(conn: Any) -> families.Family:
    return make_family(conn)


def test_plain_words_match_any_word_with_all_words_first(conn: Any, family: Any) -> None:
    hits = fts_search(conn, family, "copies directories", k=10)
    assert [h.chunk_id for h in hits][:1] == ["cp"]  # the only chunk with both words
    assert ids(hits) == {"cp", "scp", "rm"}
    assert [h.ranks["fts"] for h in hits] == [1, 2, 3]


def test_match_all_keeps_the_strict_and(conn: Any, family: Any) -> None:
    assert ids(fts_search(conn, family, "copies directories", k=10, match="all")) == {"cp"}


def test_quoted_phrase_needs_adjacent_words(conn: Any, family: Any) -> None:
    assert ids(fts_search(conn, family, '"copies files"', k=10)) == {"cp", "scp"}
    assert ids(fts_search(conn, family, '"files copies"', k=10)) == set()


def test_or_matches_either_side(conn: Any, family: Any) -> None:
    assert ids(fts_search(conn, family, "hosts or renames", k=10)) == {"scp", "mv"}


def test_minus_excludes_a_word(conn: Any, family: Any) -> None:
    assert ids(fts_search(conn, family, "files -directories", k=10)) == {"scp", "mv"}


@pytest.mark.parametrize("text", ["", "   ", "the and of", "!!! ---", '""', "-"])
def test_empty_or_stopword_only_query_gives_no_hits_not_an_error(conn: Any, family: Any, text: str) -> None:
    assert fts_search(conn, family, text, k=10) == []


def test_english_stems_and_simple_does_not(conn: Any, dsn: str) -> None:
    english = make_family(conn, "docs_en")
    assert ids(fts_search(conn, english, "run", k=10)) == {"running"}
    with conn.transaction():
        conn.execute("DELETE FROM ragstore.emb_docs_en")
        conn.execute("DELETE FROM ragstore.chunks")
    simple = make_family(conn, "docs_simple", fts_config="simple")
    assert ids(fts_search(conn, simple, "run", k=10)) == set()
    assert ids(fts_search(conn, simple, "the runner", k=10)) == {"running"}  # simple keeps stopwords


def test_only_chunks_of_the_family_are_searched(conn: Any, family: Any) -> None:
    other = families.create_family(conn, "other", OfflineBackend())
    assert fts_search(conn, other, "files", k=10) == []


def test_scores_descend_with_chunk_id_breaking_ties(conn: Any, family: Any) -> None:
    hits = fts_search(conn, family, "files", k=10)
    keys = [(-h.score, h.chunk_id) for h in hits]
    assert keys == sorted(keys) and len(hits) == 4


def test_bad_options_are_refused(conn: Any, family: Any) -> None:
    with pytest.raises(InvalidInput):
        fts_search(conn, family, "files", k=0)
    with pytest.raises(InvalidInput):
        fts_search(conn, family, "files", k=3, match="some")


@pytest.mark.parametrize(
    ("text", "plain"),
    [("copy files", True), ('"copy files"', False), ("a or b", False), ("files -dirs", False), ("x-ray", True)],
)
def test_plain_words_detects_websearch_operators(text: str, plain: bool) -> None:
    assert plain_words(text) is plain
