"""The full-text leg is BM25 over ragstore.chunk_terms: its scores equal a reference computed in Python from
the chunks' own tsvectors; the postings, the words' counts and the ledger follow every write (insert, text
change, delete, prune, family drop) in every family; the postings have one index; an insert writes the
postings, counts and ledger in one statement."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import index_records, write_records
from ragstore.search.fts import fts_search
from ragstore.search.hybrid import BM25_B, BM25_K1
from tests.toolkit.bm25 import document_frequencies_are_current, postings_are_current

TEXTS = {
    "cp": "cp copies files and directories to a destination; cp copies files again",
    "scp": "scp copies files between hosts on a network, over ssh",
    "mv": "mv moves or renames files",
    "rm": "rm removes files and directories, directories first, recursively with -r",
    "tar": "tar stores files in an archive and extracts them; the archive keeps the files' modes",
    "ssh": "ssh logs into a remote host",
}


def write(conn: Any, fam: families.Family, texts: dict[str, str]) -> None:
    backend = OfflineBackend()
    records = [(f"t:{cid}", ChunkRecord(chunk_id=cid, package_path=f"man/{cid}", text=t)) for cid, t in texts.items()]
    write_records(conn, fam, backend, records)


@pytest.fixture
def family(conn: Any) -> families.Family:
    fam = families.create_family(conn, "docs", OfflineBackend())
    write(conn, fam, TEXTS)
    return fam


def reference(conn: Any, family: str, query: str) -> list[tuple[str, float]]:
    """BM25 from the chunks' tsvectors, in Python: (chunk_id, score) best first, chunk_id breaking ties."""
    rows = conn.execute(
        "SELECT c.chunk_id, u.lexeme, coalesce(array_length(u.positions, 1), 1) "
        "FROM ragstore.chunks AS c CROSS JOIN LATERAL unnest(c.tsv) AS u WHERE c.family = %s",
        (family,),
    ).fetchall()
    n = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = %s", (family,)).fetchone()[0]
    words = {w for (w,) in conn.execute("SELECT unnest(tsvector_to_array(to_tsvector('english', %s)))", (query,))}
    tf: dict[str, dict[str, int]] = {}
    for chunk, lexeme, count in rows:
        tf.setdefault(chunk, {})[lexeme] = count
    dl = {chunk: sum(terms.values()) for chunk, terms in tf.items()}
    avgdl = sum(dl.values()) / n
    df = {w: sum(1 for terms in tf.values() if w in terms) for w in words}
    scores: dict[str, float] = {}
    for chunk, terms in tf.items():
        held = [w for w in words if w in terms]
        if held:
            scores[chunk] = sum(
                math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                * terms[w] * (BM25_K1 + 1) / (terms[w] + BM25_K1 * (1 - BM25_B + BM25_B * dl[chunk] / avgdl))
                for w in held
            )  # fmt: skip
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


@pytest.mark.parametrize("query", ["copies files", "directories archive modes", "ssh host network", "files"])
def test_scores_equal_bm25_computed_from_the_tsvectors(conn: Any, family: Any, query: str) -> None:
    hits = fts_search(conn, family, query, k=10)
    expected = reference(conn, "docs", query)
    assert [h.chunk_id for h in hits] == [cid for cid, _ in expected]
    assert [h.score for h in hits] == pytest.approx([s for _, s in expected], rel=1e-9)


def test_a_query_of_exclusions_keeps_its_strict_meaning(conn: Any, family: Any) -> None:
    hits = fts_search(conn, family, "-files", k=10)
    assert {h.chunk_id for h in hits} == {"ssh"}  # every other chunk holds "files"
    assert [h.score for h in hits] == [0.0]


def scores_equal_the_reference(conn: Any, family: str, queries: tuple[str, ...] = ("copies files", "files")) -> None:
    fam = families.get_family(conn, family)
    for query in queries:
        hits = fts_search(conn, fam, query, k=20)
        expected = reference(conn, family, query)
        assert [(h.chunk_id, h.score) for h in hits] == [(cid, pytest.approx(s, rel=1e-9)) for cid, s in expected]


def test_postings_and_ledger_follow_inserts_text_changes_deletes_prune_and_drop(conn: Any, family: Any) -> None:
    postings_are_current(conn)
    assert conn.execute("SELECT count(*) FROM ragstore.chunk_terms WHERE lexeme = ''").fetchone()[0] == len(TEXTS)
    # A second family holding the same chunk ids, and a chunk of stop words alone (its length row only).
    other = families.create_family(conn, "other", OfflineBackend())
    write(conn, other, TEXTS | {"z": "files everywhere", "stop": "the and of a"})
    postings_are_current(conn)
    assert conn.execute(
        "SELECT lexeme, tf, dl FROM ragstore.chunk_terms WHERE family = 'other' AND chunk_id = 'stop'"
    ).fetchall() == [("", 0, 0)]
    # Text changes (the stop-word chunk gains words, mv loses some and gains others) and an insert.
    write(conn, family, {"mv": "mv moves files, mv moves directories, mv renames", "new": "brand new text"})
    write(conn, other, {"stop": "stop words became files", "ssh": "the and"})
    postings_are_current(conn)
    assert [h.chunk_id for h in fts_search(conn, family, "renames", k=5)] == ["mv"]
    # A delete in one family leaves the other family's chunk of the same id whole.
    conn.execute("DELETE FROM ragstore.chunks WHERE family = 'docs' AND chunk_id IN ('rm', 'new')")
    postings_are_current(conn)
    held = "SELECT count(*) FROM ragstore.chunk_terms WHERE family = %s AND chunk_id = %s"
    assert conn.execute(held, ("docs", "rm")).fetchone() == (0,)
    assert conn.execute(held, ("other", "rm")).fetchone()[0] > 1
    # Prune: the records name packages man/cp and man/ssh; their chunks the records no longer hold go.
    records = [{"chunk_id": "cp2", "package_path": "man/cp", "text": "cp copies files once"}]
    records.append({"chunk_id": "ssh", "package_path": "man/ssh", "text": "the and"})
    assert index_records(conn, "other", records, prune=True).pruned == 1
    assert conn.execute(held, ("other", "cp")).fetchone() == (0,)
    postings_are_current(conn)
    for name in ("docs", "other"):
        scores_equal_the_reference(conn, name)
    families.drop_family(conn, "other")
    postings_are_current(conn)
    assert conn.execute("SELECT count(*) FROM ragstore.chunk_terms WHERE family = 'other'").fetchone()[0] == 0
    scores_equal_the_reference(conn, "docs")


def names(conn: Any, query: str) -> list[str]:
    return [name for (name,) in conn.execute(query).fetchall()]


def postings_foreign_keys(conn: Any) -> list[str]:
    return names(
        conn,
        "SELECT conname FROM pg_catalog.pg_constraint"
        " WHERE conrelid = 'ragstore.chunk_terms'::regclass AND contype = 'f'",
    )


def test_postings_are_kept_by_the_triggers_alone(conn: Any, family: Any) -> None:
    # No foreign key: it was checked once per posting, which cost more than the COPY of the chunks.
    assert postings_foreign_keys(conn) == []
    # The delete trigger removes a deleted chunk's postings (what ON DELETE CASCADE did) ...
    conn.execute("DELETE FROM ragstore.chunks WHERE family = 'docs' AND chunk_id IN ('cp', 'tar')")
    postings_are_current(conn)
    assert conn.execute("SELECT count(*) FROM ragstore.chunk_terms WHERE chunk_id IN ('cp', 'tar')").fetchone() == (0,)
    # ... and the truncate trigger all of them, whether the TRUNCATE names the postings too or not.
    conn.execute("TRUNCATE ragstore.chunks CASCADE")
    assert conn.execute("SELECT count(*) FROM ragstore.chunk_terms").fetchone() == (0,)
    postings_are_current(conn)
    write(conn, family, TEXTS)
    postings_are_current(conn)
    conn.execute("TRUNCATE ragstore.chunks, ragstore.chunk_terms, ragstore.family_chunk_deltas CASCADE")
    assert conn.execute("SELECT count(*) FROM ragstore.chunk_terms").fetchone() == (0,)
    postings_are_current(conn)
    write(conn, family, TEXTS)
    postings_are_current(conn)
    assert [h.chunk_id for h in fts_search(conn, family, "renames", k=5)] == ["mv"]


def test_a_word_no_chunk_holds_any_more_has_no_count(conn: Any, family: Any) -> None:
    assert conn.execute("SELECT df FROM ragstore.chunk_term_df WHERE lexeme = 'renam'").fetchone() == (1,)
    write(conn, family, {"mv": "mv moves files"})  # the text change drops the word
    assert conn.execute("SELECT count(*) FROM ragstore.chunk_term_df WHERE lexeme = 'renam'").fetchone() == (0,)
    conn.execute("DELETE FROM ragstore.chunks WHERE family = 'docs' AND chunk_id = 'ssh'")  # 'log' was its own
    assert conn.execute("SELECT count(*) FROM ragstore.chunk_term_df WHERE lexeme = 'log'").fetchone() == (0,)
    postings_are_current(conn)


def test_concurrent_writers_of_one_family_keep_the_counts_current(dsn: str, conn: Any, family: Any) -> None:
    # Two sessions write overlapping words into one family at once, in several batches each, inserting
    # new chunks and changing the text of shared ones: they wait for each other on the words' counts
    # (a deadlock, if any, is retried by the writer) and the counts end as the chunks say.
    import threading

    from ragstore.db.connection import connect

    conn.commit()
    errors: list[BaseException] = []

    def writer(tag: str) -> None:
        try:
            with connect(dsn) as own:
                texts = {f"{tag}{i}": f"cp copies files {tag} word{i} shared{i % 5}" for i in range(40)}
                texts |= {f"both{i}": f"files both {tag} version {i}" for i in range(10)}
                records = [
                    (f"t:{cid}", ChunkRecord(chunk_id=cid, package_path="man/x", text=t)) for cid, t in texts.items()
                ]
                write_records(own, family, OfflineBackend(), records, batch_size=7)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    postings_are_current(conn)
    document_frequencies_are_current(conn)


def postings_indexes(conn: Any) -> list[str]:
    return names(
        conn,
        "SELECT indexrelid::regclass::text FROM pg_catalog.pg_index"
        " WHERE indrelid = 'ragstore.chunk_terms'::regclass ORDER BY 1",
    )


def trigger_bodies(conn: Any) -> list[str]:
    return names(
        conn,
        "SELECT prosrc FROM pg_catalog.pg_proc WHERE oid IN"
        " ('ragstore.chunks_count_deleted()'::regprocedure, 'ragstore.chunks_terms_updated()'::regprocedure)"
        " ORDER BY proname",
    )


def test_the_postings_have_one_index_which_the_delete_and_text_change_triggers_use(conn: Any, family: Any) -> None:
    # The primary key: the delete and text-change triggers find a chunk's postings through it, from the
    # terms of the old row's tsv.
    assert postings_indexes(conn) == ["ragstore.chunk_terms_pkey"]
    assert all("ragstore.tsv_terms(o.tsv) AS u" in body for body in trigger_bodies(conn))
    assert "chunk_term_df_add" not in insert_trigger_body(conn)


def test_a_one_chunk_delete_probes_the_key_after_a_large_delete_in_the_same_session(conn: Any, family: Any) -> None:
    # The delete trigger finds the postings through the primary key, in a statement planned at each call:
    # after a session's first delete removed half the chunks (a hash join over every posting is then the
    # cheaper plan), a delete of one chunk still probes the key rather than read every posting again.
    conn.execute(
        "INSERT INTO ragstore.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256)"
        " SELECT 'docs', 'g' || i, 'gen', format('word%s alpha%s beta%s gamma%s', i, i % 50, i % 7, i % 3),"
        " sha256(i::text::bytea), sha256(i::text::bytea) FROM generate_series(1, 3000) AS i"
    )
    conn.execute("ANALYZE ragstore.chunk_terms")
    conn.commit()
    plans: list[str] = []
    conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
    conn.execute("LOAD 'auto_explain'")
    conn.execute("SET auto_explain.log_min_duration = 0")
    conn.execute("SET auto_explain.log_nested_statements = on")
    conn.execute("SET client_min_messages = log")
    conn.execute("DELETE FROM ragstore.chunks WHERE family = 'docs' AND chunk_id ~ '^g[0-9]*[13579]$'")
    plans.clear()
    conn.execute("DELETE FROM ragstore.chunks WHERE family = 'docs' AND chunk_id = 'g2'")
    deletes = [plan for plan in plans if "Delete on chunk_terms" in plan]
    assert len(deletes) == 1, plans
    assert "Index Scan using chunk_terms_pkey" in deletes[0], deletes[0]
    conn.execute("RESET client_min_messages")
    postings_are_current(conn)


def df_add_calls_of_an_insert(conn: Any, statement: str) -> int:
    """How many times ``statement`` (an insert of chunks) called ragstore.chunk_term_df_add."""
    conn.commit()
    conn.execute("SET track_functions = 'all'")
    conn.execute(statement)
    calls = conn.execute(
        "SELECT coalesce(sum(calls), 0) FROM pg_catalog.pg_stat_xact_user_functions"
        " WHERE schemaname = 'ragstore' AND funcname = 'chunk_term_df_add'"
    ).fetchone()[0]
    conn.execute("RESET track_functions")
    return int(calls)


def test_an_insert_writes_postings_counts_and_ledger_in_one_statement(conn: Any, family: Any) -> None:
    # Two families and a stop-word chunk in one statement: the insert trigger's one statement over the new
    # rows' terms keeps every count exact without the second statement (chunk_term_df_add) it used to run.
    families.create_family(conn, "other", OfflineBackend())
    calls = df_add_calls_of_an_insert(
        conn,
        "INSERT INTO ragstore.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256)"
        " SELECT f, f || i, 'gen', CASE WHEN i = 7 THEN 'the and of' ELSE format('files word%s alpha%s copies', i,"
        " i % 3) END, sha256(i::text::bytea), sha256(i::text::bytea)"
        " FROM unnest(ARRAY['docs', 'other']) AS f CROSS JOIN generate_series(1, 40) AS i",
    )
    assert calls == 0
    postings_are_current(conn)
    assert conn.execute(
        "SELECT family, df FROM ragstore.chunk_term_df WHERE lexeme = 'alpha1' ORDER BY 1"
    ).fetchall() == [("docs", 13), ("other", 13)]
    # Deletes lower the counts in their own trigger since 0021, which dropped chunk_term_df_add.
    conn.execute("DELETE FROM ragstore.chunks WHERE chunk_id = 'docs3'")
    postings_are_current(conn)
    assert conn.execute("SELECT to_regproc('ragstore.chunk_term_df_add')").fetchone() == (None,)


def insert_trigger_body(conn: Any) -> str:
    return names(
        conn, "SELECT prosrc FROM pg_catalog.pg_proc WHERE oid = 'ragstore.chunks_count_inserted()'::regprocedure"
    )[0]
